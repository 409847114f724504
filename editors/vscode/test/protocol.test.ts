/**
 * The real Python server, spawned the way the extension spawns it and spoken to through
 * vscode-jsonrpc (what vscode-languageclient uses underneath), declaring the client
 * capabilities vscode-languageclient declares: a save produces the status notification the
 * status bar shows; a file changed behind the server's back becomes a drift diagnostic (pulled,
 * as VS Code pulls them) with quick fixes, and the first quick fix clears it.
 */

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, test } from "node:test";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { advertisedCommands, COMMANDS, describeResult } from "../src/commands";
import { chooseLaunch, cliArgs } from "../src/launch";
import { initializationOptions, serverSection } from "../src/serverSettings";
import { barText, type ServerStatus, summarise } from "../src/status";

const PYTHON = process.env.MPLP_LSP_PYTHON || "python3";
const TIMEOUT_MS = 60_000;

/** Resolve with what `check` returns once it is not undefined; poll every 100 ms. */
async function eventually<T>(what: string, check: () => Promise<T | undefined> | T | undefined): Promise<T> {
  const deadline = Date.now() + TIMEOUT_MS;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

interface Diagnostic {
  range: unknown;
  message: string;
  source?: string;
  code?: string | number;
}
interface CodeAction {
  title: string;
  kind?: string;
  isPreferred?: boolean;
  command?: { command: string; arguments?: unknown[] };
}

const scratch = realpathSync(mkdtempSync(join(tmpdir(), "mplp-vscode-")));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("a save produces mplp/status; a change behind the server's back a drift diagnostic with quick fixes", { timeout: TIMEOUT_MS * 2 }, async () => {
  const root = join(scratch, "project");
  mkdirSync(join(root, "src"), { recursive: true });
  execFileSync("git", ["init", "-q", root]);
  const launch = chooseLaunch({ interpreter: PYTHON });
  const server = spawn(
    launch.command,
    cliArgs(launch, "serve", "--state-dir", join(scratch, "state"), "--log-level", "warning"),
    { cwd: root, stdio: ["pipe", "pipe", "pipe"], env: { ...process.env, PYTHONUNBUFFERED: "1" } },
  );
  let stderr = "";
  server.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => server.on("exit", resolve));
  const connection = createMessageConnection(new StreamMessageReader(server.stdout), new StreamMessageWriter(server.stdin));

  // The VS Code side of the settings, as the extension's middleware sends them.
  const vscodeSection = { debounceMs: 100, interpreter: PYTHON, serverPath: "", trace: { server: "off" } };
  connection.onRequest("workspace/configuration", (params: { items: { section?: string }[] }) =>
    params.items.map((item) => (item.section === "mplp" ? serverSection(vscodeSection) : null)),
  );
  connection.onRequest("client/registerCapability", () => null);
  connection.onRequest("window/workDoneProgress/create", () => null);
  let refreshes = 0;
  connection.onRequest("workspace/diagnostic/refresh", () => {
    refreshes += 1;
    return null;
  });
  const statuses: ServerStatus[] = [];
  let saved: (status: ServerStatus) => void;
  const savedStatus = new Promise<ServerStatus>((resolve) => (saved = resolve));
  connection.onNotification("mplp/status", (status: ServerStatus) => {
    statuses.push(status);
    const folder = status.workspaces?.[0];
    if ((folder?.events_by_kind?.file_update ?? 0) >= 1) saved(status);
  });
  connection.listen();

  try {
    const rootUri = pathToFileURL(root).href;
    const initialized = (await connection.sendRequest("initialize", {
      processId: process.pid,
      rootUri,
      workspaceFolders: [{ uri: rootUri, name: "project" }],
      capabilities: {
        workspace: {
          configuration: true,
          workspaceFolders: true,
          didChangeConfiguration: { dynamicRegistration: true },
          diagnostics: { refreshSupport: true },
          // VS Code watches the workspace for the server (this test's watcher reports nothing).
          didChangeWatchedFiles: { dynamicRegistration: true, relativePatternSupport: true },
          applyEdit: true,
          workspaceEdit: { documentChanges: true },
        },
        window: { workDoneProgress: true },
        // What vscode-languageclient declares: pull diagnostics, refreshed by the server.
        textDocument: {
          synchronization: { didSave: true },
          diagnostic: { dynamicRegistration: true, relatedDocumentSupport: false },
          codeAction: {
            codeActionLiteralSupport: { codeActionKind: { valueSet: ["quickfix"] } },
            isPreferredSupport: true,
            dataSupport: true,
            resolveSupport: { properties: ["edit"] },
          },
        },
      },
      initializationOptions: initializationOptions(vscodeSection),
    })) as { capabilities: Record<string, unknown> };
    // Every server command the extension calls is advertised, and so is the quick fixes' one.
    const advertised = advertisedCommands(initialized.capabilities);
    for (const entry of Object.values(COMMANDS)) {
      if ("server" in entry) assert.ok(advertised.has(entry.server), `${entry.server} is advertised`);
    }
    assert.ok(advertised.has("mplp.resolveDrift"));
    assert.ok(initialized.capabilities.diagnosticProvider, "the server offers pull diagnostics");
    await connection.sendNotification("initialized", {});

    const file = join(root, "src", "app.py");
    const uri = pathToFileURL(file).href;
    writeFileSync(file, "");
    await connection.sendNotification("textDocument/didOpen", {
      textDocument: { uri, languageId: "python", version: 1, text: "" },
    });
    writeFileSync(file, "print('saved in VS Code')\n");
    await connection.sendNotification("textDocument/didSave", { textDocument: { uri } });

    const status = await Promise.race([
      savedStatus,
      new Promise<never>((_, reject) =>
        setTimeout(
          () => reject(new Error(`no status after the save; got ${JSON.stringify(statuses)}\n${stderr}`)),
          TIMEOUT_MS,
        ).unref(),
      ),
    ]);
    assert.equal(status.ready, true);
    assert.equal(status.workspaces?.[0]?.root, root);
    assert.ok((status.workspaces?.[0]?.events_today ?? 0) >= 1);
    assert.match(barText(summarise(status)), /^\$\(pulse\) \d+ today/);
    // The request answers with the same shape the notification has.
    const asked = (await connection.sendRequest("mplp/status", null)) as ServerStatus;
    assert.ok((asked.workspaces?.[0]?.events_by_kind?.file_update ?? 0) >= 1);
    // The extension's own settings were stripped: the server saw nothing it did not know.
    assert.doesNotMatch(stderr, /unknown setting/);
    // The folder's status as the server sends it: no remote, an empty outbox, no drift.
    const folder = asked.workspaces?.[0];
    assert.equal(folder?.forward?.state, "off");
    assert.equal(folder?.forward?.depth, 0);
    assert.equal(folder?.drift, 0);
    assert.equal(barText(summarise(asked)), `$(pulse) ${folder?.events_today} today  $(cloud-upload) 0  remote off  $(warning) 0 drift`);

    // Drift: the PSG has recorded the file; now it changes with nobody telling the server.
    await eventually("the file in the PSG", async () => {
      const now = (await connection.sendRequest("mplp/status", null)) as ServerStatus;
      return (now.workspaces?.[0]?.events_by_kind?.graph_update ?? 0) >= 1 ? true : undefined;
    });
    writeFileSync(file, "print('changed behind the server')\n");
    const scanned = await connection.sendRequest("workspace/executeCommand", { command: "mplp.scanDrift", arguments: [] });
    assert.match(describeResult("mplp.scanDrift", scanned).message, /^drift scan: 1 drifted of \d+ file\(s\) checked$/);
    const pull = async () =>
      ((await connection.sendRequest("textDocument/diagnostic", { textDocument: { uri } })) as { items: Diagnostic[] }).items;
    const [diagnostic, ...others] = await eventually("a drift diagnostic", async () => {
      const items = await pull();
      return items.length ? items : undefined;
    });
    assert.equal(others.length, 0);
    assert.equal(diagnostic!.source, "mplp");
    assert.equal(diagnostic!.code, "drift");
    assert.match(diagnostic!.message, /^Drift: the file differs from the project graph/);
    assert.ok(refreshes >= 1, "the server asked VS Code to pull again");
    const drifted = await eventually("drift in the status", () => statuses.find((s) => s.workspaces?.[0]?.drift === 1));
    assert.match(barText(summarise(drifted)), /\$\(warning\) 1 drift$/);

    const actions = (await connection.sendRequest("textDocument/codeAction", {
      textDocument: { uri },
      range: diagnostic!.range,
      context: { diagnostics: [diagnostic], only: ["quickfix"] },
    })) as CodeAction[];
    assert.deepEqual(
      actions.map((action) => [action.kind, action.command?.command, action.command?.arguments?.[1]]),
      [
        ["quickfix", "mplp.resolveDrift", "fs"],
        ["quickfix", "mplp.resolveDrift", "psg"],
        ["quickfix", "mplp.resolveDrift", "merge"],
        ["quickfix", "mplp.resolveDrift", "ignore"],
      ],
    );
    assert.equal(actions[0]!.isPreferred, true);
    // VS Code runs a quick fix's command through workspace/executeCommand.
    await connection.sendRequest("workspace/executeCommand", actions[0]!.command);
    await eventually("the diagnostic to clear", async () => ((await pull()).length === 0 ? true : undefined));
    const after = (await connection.sendRequest("mplp/status", null)) as ServerStatus;
    assert.equal(after.workspaces?.[0]?.drift, 0);

    await connection.sendRequest("shutdown");
    await connection.sendNotification("exit");
    assert.equal(await exited, 0, stderr);
  } finally {
    connection.dispose();
    server.kill();
  }
});
