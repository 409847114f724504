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
  scanDrift: { command: "mplp.scanForDrift", title: "Scan for drift", server: "mplp.scanDrift" },
  openEventLog: { command: "mplp.openEventLog", title: "Open event log" },
  installHooks: {
    command: "mplp.installGitHooks",
    title: "Install Git hooks",
    server: "mplp.installHooks",
  },
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
