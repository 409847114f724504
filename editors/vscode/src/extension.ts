/**
 * The MPLP extension: starts `mplp-lsp serve` for the workspace, shows its status, and gives the
 * server's commands a place in the command palette. All the logic that can run outside VS Code
 * (choosing the interpreter, reading the status, the settings) lives in the other modules.
 */

import * as vscode from "vscode";
import {
  ExecuteCommandRequest,
  LanguageClient,
  type LanguageClientOptions,
  RevealOutputChannelOn,
  type ServerOptions,
} from "vscode-languageclient/node";
import { advertisedCommands, COMMANDS, describeResult, type ExtensionCommand } from "./commands";
import { HeldActivity } from "./heldActivity";
import { type Bundle, chooseLaunch, cliArgs, type Launch, probe, readBundle, resolved } from "./launch";
import { onPythonChanged, pythonFromExtension } from "./python";
import { initializationOptions, levelsIn, serverSection, STATUS_METHOD } from "./serverSettings";
import { type ServerStatus, statusReport } from "./status";
import { StatusBar } from "./statusBar";
import { traceChannel } from "./trace";

const SECTION = "mplp";
const STATUS_URI = vscode.Uri.parse("mplp-status:mplp-lsp%20status.md");
/** Settings that change how the server is started; the others the server re-reads itself. */
const RESTART_ON = [`${SECTION}.interpreter`, `${SECTION}.serverPath`, `${SECTION}.importStrategy`];

class Extension implements vscode.Disposable {
  private client: LanguageClient | undefined;
  private launch: Launch | undefined;
  private problem: string | undefined;
  private queue: Promise<void> = Promise.resolve();
  private readonly statusChanged = new vscode.EventEmitter<vscode.Uri>();

  /**
   * @param neutralDir the working directory of every process the extension starts: never the
   *   workspace, whose files must not be picked up as code.
   */
  constructor(
    readonly log: vscode.LogOutputChannel,
    readonly bar: StatusBar,
    readonly neutralDir: string,
    readonly trace: vscode.LogOutputChannel,
    /** The server packaged in this .vsix; undefined in one built without it. */
    readonly bundle: Bundle | undefined,
    /** File activity while no client listens, sent once one does. */
    readonly held: HeldActivity,
  ) {}

  /** Start, or stop and start again; calls are serialised. */
  restart(): Promise<void> {
    this.queue = this.queue.then(
      () => this.stopAndStart(),
      () => this.stopAndStart(),
    );
    return this.queue;
  }

  private async stopAndStart(): Promise<void> {
    this.held.hold();
    await this.stop();
    this.bar.starting();
    this.problem = undefined;
    this.launch = undefined;
    const config = vscode.workspace.getConfiguration(SECTION);
    const folder = vscode.workspace.workspaceFolders?.[0];
    const settings = {
      serverPath: config.get<string>("serverPath"),
      interpreter: config.get<string>("interpreter"),
      importStrategy: config.get<string>("importStrategy"),
    };
    const launch = resolved(
      chooseLaunch(
        settings,
        // The Python extension may pick the workspace's own interpreter: not in Restricted Mode.
        vscode.workspace.isTrusted ? await pythonFromExtension(folder?.uri) : undefined,
        this.bundle,
      ),
    );
    if (launch.python && !this.bundle && settings.importStrategy !== "fromEnvironment") {
      this.log.info("this build of the extension has no bundled server: using the interpreter's mplp-lsp");
    }
    const checked = await probe(launch, this.neutralDir);
    if (!checked.ok) {
      this.fail(`${checked.problem} ${checked.fix}`);
      return;
    }
    this.launch = launch;
    const what = launch.bundle ? "the bundled mplp-lsp" : "mplp-lsp";
    this.log.info(`starting ${what} ${checked.version} with ${launch.command} (${launch.origin})`);
    const client = new LanguageClient(
      "mplp",
      "MPLP",
      serverOptions(launch, this.neutralDir),
      clientOptions(this.log, this.trace, this.held),
    );
    client.onNotification(STATUS_METHOD, (status: ServerStatus) => {
      this.bar.update(status);
      this.statusChanged.fire(STATUS_URI);
    });
    this.client = client;
    try {
      await client.start();
    } catch (error) {
      this.fail(`mplp-lsp did not start: ${error instanceof Error ? error.message : String(error)}`);
      return;
    }
    try {
      await this.held.send(client);
    } catch (error) {
      this.log.warn(`sending what the editor did while mplp-lsp started: ${String(error)}`);
    }
  }

  private fail(message: string): void {
    this.problem = message;
    this.log.error(message);
    this.bar.failed(message);
    void vscode.window.showErrorMessage(`MPLP: ${message}`, "Open Settings", "Show Log").then((pick) => {
      if (pick === "Open Settings") {
        void vscode.commands.executeCommand("workbench.action.openSettings", SECTION);
      } else if (pick === "Show Log") {
        this.log.show();
      }
    });
  }

  async stop(): Promise<void> {
    const client = this.client;
    this.client = undefined;
    if (client?.needsStop()) {
      try {
        await client.stop();
      } catch (error) {
        this.log.warn(`stopping mplp-lsp: ${String(error)}`);
      }
    }
  }

  startedFromPythonExtension(): boolean {
    return this.launch?.origin === "the Python extension";
  }

  /** What the status view shows: the server's answer now, else its last notification. */
  async report(): Promise<string> {
    if (this.problem) return `# mplp-lsp is not running\n\n${this.problem}\n`;
    let status = this.bar.last;
    if (this.client?.isRunning()) {
      try {
        // Earlier mplp-lsp versions (pygls) could not parse a request without params.
        status = await this.client.sendRequest<ServerStatus>(STATUS_METHOD, {});
      } catch (error) {
        this.log.warn(`${STATUS_METHOD}: ${String(error)}`);
      }
    }
    return statusReport(status);
  }

  async showStatus(): Promise<void> {
    this.statusChanged.fire(STATUS_URI);
    const document = await vscode.workspace.openTextDocument(STATUS_URI);
    await vscode.window.showTextDocument(document, { preview: true });
  }

  statusProvider(): vscode.TextDocumentContentProvider {
    return { onDidChange: this.statusChanged.event, provideTextDocumentContent: () => this.report() };
  }

  /** Run a command the server implements, or say that this server does not have it. */
  async serverCommand(entry: ExtensionCommand): Promise<unknown> {
    const client = this.client;
    if (!entry.server || !client?.isRunning()) {
      void vscode.window.showWarningMessage("MPLP: mplp-lsp is not running. Run “MPLP: Restart”.");
      return undefined;
    }
    if (!advertisedCommands(client.initializeResult?.capabilities).has(entry.server)) {
      return NOT_ADVERTISED;
    }
    return vscode.window.withProgress(
      { location: vscode.ProgressLocation.Window, title: `MPLP: ${entry.title}` },
      async () => {
        const result = await client.sendRequest(ExecuteCommandRequest.type, {
          command: entry.server!,
          arguments: [],
        });
        this.log.info(`${entry.server}: ${JSON.stringify(result)}`);
        const outcome = describeResult(entry.server!, result);
        const show = outcome.failed ? vscode.window.showWarningMessage : vscode.window.showInformationMessage;
        void show(`MPLP: ${outcome.message}`);
        return result;
      },
    );
  }

  async scanDrift(): Promise<void> {
    if ((await this.serverCommand(COMMANDS.scanDrift)) === NOT_ADVERTISED) {
      void vscode.window.showWarningMessage(
        "MPLP: this mplp-lsp does not detect drift yet; update mplp-lsp to get drift diagnostics.",
      );
    }
  }

  /** The server installs the hook for each folder, into the store it records into. */
  async installHooks(): Promise<void> {
    if ((await this.serverCommand(COMMANDS.installHooks)) === NOT_ADVERTISED) {
      void vscode.window.showWarningMessage(
        "MPLP: this mplp-lsp cannot install Git hooks from the editor; update it, or run `mplp-lsp hooks install --state-dir <its state dir>` in the folder.",
      );
    }
  }

  /** The server has the editor open the private page that logs a browser in to the dashboard. */
  async openDashboard(): Promise<void> {
    if ((await this.serverCommand(COMMANDS.openDashboard)) === NOT_ADVERTISED) {
      void vscode.window.showWarningMessage(
        "MPLP: this mplp-lsp has no dashboard; update it, or run `mplp-lsp ui --open` in the folder.",
      );
    }
  }

  /** `mplp-lsp events --follow` for a folder, in a terminal. */
  async openEventLog(): Promise<void> {
    const folder =
      (vscode.workspace.workspaceFolders?.length ?? 0) > 1
        ? await vscode.window.showWorkspaceFolderPick({ placeHolder: "Events of which folder?" })
        : vscode.workspace.workspaceFolders?.[0];
    if (!folder || !this.launch) return;
    const root = folder.uri.fsPath;
    const stateDir = this.bar.last?.workspaces?.find((w) => w.root === root)?.state_dir;
    // Like every process the extension starts: the resolved interpreter, outside the workspace.
    const terminal = vscode.window.createTerminal({
      name: `MPLP events: ${folder.name}`,
      cwd: this.neutralDir,
      shellPath: this.launch.command,
      shellArgs: cliArgs(
        this.launch,
        "events",
        "--follow",
        "--workspace",
        root,
        ...(stateDir ? ["--state-dir", stateDir] : []),
      ),
    });
    // The log is to watch: the keyboard stays where the user was typing.
    terminal.show(true);
  }

  dispose(): void {
    void this.stop();
    this.statusChanged.dispose();
  }
}

const NOT_ADVERTISED = Symbol("not advertised");

/**
 * No `transport`: the server speaks LSP on its stdin/stdout either way, and with
 * `TransportKind.stdio` vscode-languageclient appends `--stdio` to the arguments.
 */
function serverOptions(launch: Launch, cwd: string): ServerOptions {
  return { command: launch.command, args: cliArgs(launch, "serve"), options: { cwd } };
}

function clientOptions(
  log: vscode.LogOutputChannel,
  trace: vscode.LogOutputChannel,
  held: HeldActivity,
): LanguageClientOptions {
  return {
    // mplp-lsp records activity on files of every language.
    documentSelector: [{ scheme: "file" }],
    outputChannel: log,
    traceOutputChannel: trace,
    revealOutputChannelOn: RevealOutputChannelOn.Never,
    initializationOptions: () =>
      initializationOptions(vscode.workspace.getConfiguration(SECTION), held.since),
    synchronize: { configurationSection: SECTION },
    middleware: {
      workspace: {
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (!Array.isArray(result)) return result;
          return result.map((value, index) =>
            params.items[index]?.section === SECTION
              ? serverSection(value, levelsIn(params.items[index]?.scopeUri))
              : value,
          );
        },
      },
    },
  };
}

let extension: Extension | undefined;

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const log = vscode.window.createOutputChannel("MPLP", { log: true });
  const bar = new StatusBar();
  const trace = traceChannel(log);
  // First, so that nothing the editor does while the server starts is missed.
  const held = new HeldActivity();
  extension = new Extension(
    log,
    bar,
    context.extensionUri.fsPath,
    trace,
    readBundle(context.extensionUri.fsPath),
    held,
  );
  const ext = extension;
  const handlers: Record<keyof typeof COMMANDS, () => unknown> = {
    restart: () => ext.restart(),
    showLogs: () => log.show(),
    showStatus: () => ext.showStatus(),
    scanDrift: () => ext.scanDrift(),
    openEventLog: () => ext.openEventLog(),
    installHooks: () => ext.installHooks(),
    openDashboard: () => ext.openDashboard(),
  };
  context.subscriptions.push(
    held,
    log,
    trace,
    bar,
    ext,
    vscode.workspace.registerTextDocumentContentProvider(STATUS_URI.scheme, ext.statusProvider()),
    ...Object.entries(handlers).map(([name, handler]) =>
      vscode.commands.registerCommand(COMMANDS[name as keyof typeof COMMANDS].command, handler),
    ),
    vscode.workspace.onDidChangeConfiguration((change) => {
      if (RESTART_ON.some((key) => change.affectsConfiguration(key))) void ext.restart();
    }),
    // Settings Restricted Mode ignored (the interpreter, forwarding) apply once trusted.
    vscode.workspace.onDidGrantWorkspaceTrust(() => void ext.restart()),
  );
  const pythonWatch = await onPythonChanged(() => {
    if (ext.startedFromPythonExtension()) void ext.restart();
  });
  if (pythonWatch) context.subscriptions.push(pythonWatch);
  await ext.restart();
}

export async function deactivate(): Promise<void> {
  await extension?.stop();
  extension = undefined;
}
