/**
 * What the server reports in `mplp/status` (notification and request), summarised for the status
 * bar and written out for the status view.
 *
 * Fields the server does not send (an older server, or a feature that is not there yet: outbox,
 * remote, drift) are absent, not errors: they are left out of the bar and named as "not
 * reported" in the view.
 */

export interface WorkspaceStatus {
  root?: string;
  state_dir?: string;
  events_today?: number;
  events_total?: number;
  events_by_kind?: Record<string, number>;
  rejected?: number;
  last_event_time?: string | null;
  store_bytes?: number;
  pending?: number;
  /** Forwarding outbox (when the server forwards): envelopes waiting for the remote. */
  outbox?: { depth?: number; [more: string]: unknown };
  /** Remote runtime connection (when the server forwards). */
  remote?: { state?: string; url?: string; [more: string]: unknown };
  /** Drift between the project graph and the files (when the server detects drift). */
  drift?: { count?: number; [more: string]: unknown };
  [more: string]: unknown;
}

export interface ServerStatus {
  version?: string;
  ready?: boolean;
  refused?: number;
  workspaces?: WorkspaceStatus[];
  [more: string]: unknown;
}

export interface Summary {
  ready: boolean;
  folders: number;
  eventsToday: number;
  outboxDepth?: number;
  remoteState?: string;
  driftCount?: number;
}

function numberOf(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

/** Sum of the numbers present; undefined when no folder reports the field. */
function total(values: (number | undefined)[]): number | undefined {
  const present = values.filter((value): value is number => value !== undefined);
  return present.length ? present.reduce((a, b) => a + b, 0) : undefined;
}

export function summarise(status: ServerStatus | undefined): Summary {
  const folders = Array.isArray(status?.workspaces) ? status.workspaces : [];
  const states = [
    ...new Set(
      folders.map((f) => f.remote?.state).filter((s): s is string => typeof s === "string"),
    ),
  ];
  return {
    ready: status?.ready === true,
    folders: folders.length,
    eventsToday: total(folders.map((f) => numberOf(f.events_today))) ?? 0,
    outboxDepth: total(folders.map((f) => numberOf(f.outbox?.depth))),
    remoteState: states.length ? states.join("/") : undefined,
    driftCount: total(folders.map((f) => numberOf(f.drift?.count))),
  };
}

/** The status bar text (with VS Code `$(icon)` names). */
export function barText(summary: Summary): string {
  if (!summary.ready) return "$(sync~spin) MPLP";
  if (summary.folders === 0) return "$(circle-slash) MPLP: not recording";
  const parts = [`$(pulse) ${summary.eventsToday} today`];
  if (summary.outboxDepth !== undefined) parts.push(`$(cloud-upload) ${summary.outboxDepth}`);
  if (summary.remoteState !== undefined) parts.push(`remote ${summary.remoteState}`);
  if (summary.driftCount !== undefined) parts.push(`$(warning) ${summary.driftCount} drift`);
  return parts.join("  ");
}

/** One line per fact, for the tooltip and the terminal. */
export function summaryLines(summary: Summary): string[] {
  if (!summary.ready) return ["mplp-lsp is starting"];
  const absent = "not reported by this server";
  return [
    `events today: ${summary.eventsToday} in ${summary.folders} folder(s)`,
    `outbox depth: ${summary.outboxDepth ?? absent}`,
    `remote: ${summary.remoteState ?? absent}`,
    `drift: ${summary.driftCount ?? absent}`,
  ];
}

function bytes(n: number | undefined): string {
  if (n === undefined) return "-";
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 / 1024).toFixed(1)} MiB`;
}

function shown(value: unknown): string {
  if (value === undefined || value === null) return "-";
  return typeof value === "object" ? JSON.stringify(value) : String(value);
}

/** The status view: a Markdown document with everything the server reported. */
export function statusReport(status: ServerStatus | undefined): string {
  const summary = summarise(status);
  const lines = [
    "# mplp-lsp status",
    "",
    `server ${shown(status?.version)}, ${summary.ready ? "ready" : "starting"}; refused input: ${shown(status?.refused ?? 0)}`,
    "",
    ...summaryLines(summary).map((line) => `- ${line}`),
  ];
  for (const folder of status?.workspaces ?? []) {
    lines.push(
      "",
      `## ${shown(folder.root)}`,
      "",
      "| | |",
      "|---|---|",
      `| events today | ${shown(folder.events_today)} |`,
      `| events stored | ${shown(folder.events_total)} |`,
      `| by kind | ${Object.entries(folder.events_by_kind ?? {})
        .map(([kind, n]) => `${kind} ${n}`)
        .join(", ") || "-"} |`,
      `| last event | ${shown(folder.last_event_time)} |`,
      `| rejected | ${shown(folder.rejected)} |`,
      `| waiting to be stored | ${shown(folder.pending)} |`,
      `| outbox | ${shown(folder.outbox)} |`,
      `| remote | ${shown(folder.remote)} |`,
      `| drift | ${shown(folder.drift)} |`,
      `| store | ${shown(folder.state_dir)} (${bytes(numberOf(folder.store_bytes))}) |`,
    );
  }
  return lines.join("\n") + "\n";
}
