/**
 * What the server reports in `mplp/status` (notification and request), summarised for the status
 * bar and written out for the status view. The server is the source of truth for the shape
 * (server/mplp_lsp/engine/status.py, docs/forwarding.md): per workspace folder, `forward` is
 * the outbox and remote (null for a store without an outbox), `drift` the count of open drift and
 * `drift_deferred` the drift set aside with "decide later".
 *
 * Fields a server does not send (an older one) are absent, not errors: they are left out of the
 * bar and named as "not reported" in the view.
 */

/** `forward` of a workspace folder (docs/forwarding.md, "Status"). */
export interface ForwardStatus {
  /** off, queuing, idle, sending, waiting (backoff), misconfigured. */
  state?: string;
  /** The remote's URL, or null when there is none this run. */
  remote?: string | null;
  /** Why forwarding is off when its configuration was refused. */
  problem?: string | null;
  /** Envelopes waiting for the remote. */
  depth?: number;
  oldest_pending_age_s?: number | null;
  last_success_at?: string | null;
  last_error?: string | null;
  delivered?: number;
  dead_lettered?: number;
  /** Each sink's own report (the collector, an OTLP receiver, ...), by name; the fields above
   * are the collector's while it is in use, else the first sink's in use. */
  sinks?: Record<string, ForwardStatus & { enabled?: boolean }>;
  [more: string]: unknown;
}

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
  store_health?: string;
  forward?: ForwardStatus | null;
  /** Drifted files awaiting a decision. */
  drift?: number;
  /** Drifted files set aside ("decide later"); not in `drift`. */
  drift_deferred?: number;
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
  /** Why forwarding is not delivering (a refused configuration, the last failed attempt). */
  remoteProblem?: string;
  driftCount?: number;
  driftDeferred?: number;
}

function numberOf(value: unknown): number | undefined {
  return typeof value === "number" && Number.isFinite(value) ? value : undefined;
}

function textOf(value: unknown): string | undefined {
  return typeof value === "string" && value !== "" ? value : undefined;
}

/** Sum of the numbers present; undefined when no folder reports the field. */
function total(values: (number | undefined)[]): number | undefined {
  const present = values.filter((value): value is number => value !== undefined);
  return present.length ? present.reduce((a, b) => a + b, 0) : undefined;
}

function forwardOf(folder: WorkspaceStatus): ForwardStatus | undefined {
  const forward = folder.forward;
  return forward !== null && typeof forward === "object" && !Array.isArray(forward) ? forward : undefined;
}

/** States in which the outbox is not draining, with the reason the server gave. */
const TROUBLE = new Set(["waiting", "misconfigured"]);

export function summarise(status: ServerStatus | undefined): Summary {
  const folders = Array.isArray(status?.workspaces) ? status.workspaces : [];
  const forwards = folders.map(forwardOf);
  const states = [
    ...new Set(forwards.map((f) => textOf(f?.state)).filter((s): s is string => s !== undefined)),
  ];
  const problem = forwards
    .filter((f) => TROUBLE.has(String(f?.state)))
    .map((f) => textOf(f?.problem) ?? textOf(f?.last_error))
    .find((text) => text !== undefined);
  return {
    ready: status?.ready === true,
    folders: folders.length,
    eventsToday: total(folders.map((f) => numberOf(f.events_today))) ?? 0,
    outboxDepth: total(forwards.map((f) => numberOf(f?.depth))),
    remoteState: states.length ? states.join("/") : undefined,
    remoteProblem: problem,
    driftCount: total(folders.map((f) => numberOf(f.drift))),
    driftDeferred: total(folders.map((f) => numberOf(f.drift_deferred))),
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
  const remote = summary.remoteState ?? absent;
  const deferred = summary.driftDeferred ? ` (${summary.driftDeferred} deferred)` : "";
  return [
    `events today: ${summary.eventsToday} in ${summary.folders} folder(s)`,
    `outbox depth: ${summary.outboxDepth ?? absent}`,
    `remote: ${summary.remoteProblem ? `${remote}: ${summary.remoteProblem}` : remote}`,
    `drift: ${summary.driftCount ?? absent}${deferred}`,
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

/** The view's rows for `forward`: one row saying so when the store has no outbox; the rows of
 * each sink in use, named, when more than one is. */
function forwardRows(forward: ForwardStatus | undefined): string[] {
  if (!forward) return ["| forwarding | not reported (a store without an outbox) |"];
  const inUse = Object.entries(forward.sinks ?? {}).filter(
    ([, sink]) => sink !== null && typeof sink === "object" && (sink.enabled === true || textOf(sink.remote) !== undefined),
  );
  if (inUse.length < 2) return sinkRows(forward, "");
  return inUse.flatMap(([name, sink]) => sinkRows(sink, ` (${name})`));
}

function sinkRows(forward: ForwardStatus, label: string): string[] {
  const age = numberOf(forward.oldest_pending_age_s);
  return [
    `| forwarding${label} | ${shown(forward.state)} to ${textOf(forward.remote) ?? "no remote"}${textOf(forward.problem) ? `: ${forward.problem}` : ""} |`,
    `| outbox${label} | ${shown(forward.depth)} waiting${age === undefined ? "" : `, the oldest for ${age} s`} |`,
    `| delivered${label} | ${shown(forward.delivered)}, dead-lettered ${shown(forward.dead_lettered)} |`,
    `| last success${label} | ${shown(forward.last_success_at)} |`,
    `| last error${label} | ${shown(forward.last_error)} |`,
  ];
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
      ...forwardRows(forwardOf(folder)),
      `| drift | ${shown(folder.drift)} open, ${shown(folder.drift_deferred)} deferred |`,
      `| store | ${shown(folder.state_dir)} (${bytes(numberOf(folder.store_bytes))}), ${shown(folder.store_health)} |`,
    );
  }
  return lines.join("\n") + "\n";
}
