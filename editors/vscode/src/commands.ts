/**
 * The extension's commands, in one table: package.json's `contributes.commands` is generated
 * from it (`npm run sync-settings`) and the extension registers exactly these.
 *
 * Commands the server implements run through `workspace/executeCommand` under the server's own
 * name. vscode-languageclient registers every command the server advertises as a VS Code command,
 * so the extension's ids must never equal a server command's name or activation fails.
 */

export interface ExtensionCommand {
  command: string;
  title: string;
  /** The server command (`workspace/executeCommand`) this one calls when the server has it. */
  server?: string;
}

export const CATEGORY = "MPLP";

export const COMMANDS = {
  restart: { command: "mplp.restart", title: "Restart the mplp-lsp server" },
  showStatus: { command: "mplp.showStatus", title: "Show status" },
  showLogs: { command: "mplp.showLogs", title: "Show logs" },
  scanDrift: { command: "mplp.scanForDrift", title: "Scan for drift", server: "mplp.scanDrift" },
  openEventLog: { command: "mplp.openEventLog", title: "Open event log" },
  installHooks: {
    command: "mplp.installGitHooks",
    title: "Install Git hooks",
    server: "mplp.installHooks",
  },
  openDashboard: { command: "mplp.showDashboard", title: "Open dashboard", server: "mplp.openDashboard" },
} as const satisfies Record<string, ExtensionCommand>;

/** `contributes.commands` of package.json. */
export function commandsContribution(): { command: string; title: string; category: string }[] {
  return Object.values(COMMANDS).map(({ command, title }) => ({
    command,
    title,
    category: CATEGORY,
  }));
}

/** The commands the server said it runs, from its `initialize` result. */
export function advertisedCommands(capabilities: unknown): Set<string> {
  const provider = (capabilities as { executeCommandProvider?: { commands?: unknown } } | undefined)
    ?.executeCommandProvider;
  const commands = Array.isArray(provider?.commands) ? provider.commands : [];
  return new Set(commands.filter((name): name is string => typeof name === "string"));
}

export interface Outcome {
  message: string;
  /** Some folder could not do it (its reason is in the message). */
  failed: boolean;
}

function folderName(root: unknown): string {
  return typeof root === "string" ? (root.split(/[\\/]/).filter(Boolean).pop() ?? root) : "?";
}

function entries(result: unknown): Record<string, unknown>[] {
  return Array.isArray(result)
    ? result.filter((e): e is Record<string, unknown> => typeof e === "object" && e !== null)
    : [];
}

/** What to tell the user about a server command's answer (shapes: lsp/drift.py, lsp/hooks.py). */
export function describeResult(server: string, result: unknown): Outcome {
  if (server === COMMANDS.scanDrift.server) {
    const scans = entries(result);
    const sum = (key: string) => scans.reduce((n, s) => n + (typeof s[key] === "number" ? (s[key] as number) : 0), 0);
    const moved = scans.filter((s) => s.repository).map((s) => folderName(s.root));
    const cancelled = scans.some((s) => s.cancelled === true);
    return {
      message:
        `drift scan: ${sum("drifted")} drifted of ${sum("checked")} file(s) checked` +
        (moved.length ? `; the repository moved in ${moved.join(", ")}` : "") +
        (cancelled ? " (cancelled)" : ""),
      failed: false,
    };
  }
  if (server === COMMANDS.installHooks.server) {
    const folders = entries(result);
    const failed = folders.filter((f) => typeof f.error === "string");
    const done = folders.filter((f) => Array.isArray(f.hooks)).map((f) => folderName(f.root));
    const parts = [
      ...(done.length ? [`Git hooks installed in ${done.join(", ")}`] : []),
      ...failed.map((f) => `not in ${folderName(f.root)}: ${String(f.error)}`),
    ];
    return { message: parts.join("; ") || "no workspace folder", failed: failed.length > 0 };
  }
  if (server === COMMANDS.openDashboard.server && typeof result === "object" && result !== null) {
    // The server had the editor open its private login page (window/showDocument, external).
    const answer = result as { root?: unknown; shown?: unknown; page?: unknown; error?: unknown };
    if (typeof answer.error === "string") return { message: `no dashboard: ${answer.error}`, failed: true };
    const where = folderName(answer.root);
    return answer.shown === true
      ? { message: `dashboard of ${where} opened in the browser`, failed: false }
      : {
          message: `dashboard of ${where}: open ${String(answer.page)} in a browser (once, within a minute)`,
          failed: false,
        };
  }
  return { message: typeof result === "string" ? result : `${server}: done`, failed: false };
}
