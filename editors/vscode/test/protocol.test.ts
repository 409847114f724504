/**
 * The real Python server, spawned the way the extension spawns it and spoken to through
 * vscode-jsonrpc (what vscode-languageclient uses underneath): a save produces the status
 * notification the status bar shows.
 */

import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { after, test } from "node:test";
import { createMessageConnection, StreamMessageReader, StreamMessageWriter } from "vscode-jsonrpc/node";
import { advertisedCommands } from "../src/commands";
import { chooseLaunch, cliArgs } from "../src/launch";
import { serverSection } from "../src/serverSettings";
import { barText, type ServerStatus, summarise } from "../src/status";

const PYTHON = process.env.MPLP_LSP_PYTHON || "python3";
const TIMEOUT_MS = 60_000;

const scratch = realpathSync(mkdtempSync(join(tmpdir(), "mplp-vscode-")));
after(() => rmSync(scratch, { recursive: true, force: true }));

test("didSave of a file in a git workspace produces an mplp/status notification", { timeout: TIMEOUT_MS * 2 }, async () => {
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
        workspace: { configuration: true, workspaceFolders: true, didChangeConfiguration: { dynamicRegistration: true } },
        window: { workDoneProgress: true },
        textDocument: { synchronization: { didSave: true } },
      },
      initializationOptions: { mplp: serverSection(vscodeSection) },
    })) as { capabilities: Record<string, unknown> };
    assert.ok(advertisedCommands(initialized.capabilities) instanceof Set);
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

    await connection.sendRequest("shutdown");
    await connection.sendNotification("exit");
    assert.equal(await exited, 0, stderr);
  } finally {
    connection.dispose();
    server.kill();
  }
});
