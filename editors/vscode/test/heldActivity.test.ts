/**
 * What the editor does while no server listens (activation, the server's start, a restart) is
 * held and sent, in order, once the client runs; what is not a file on disk is not held.
 */

import assert from "node:assert/strict";
import { test } from "node:test";
import * as vscode from "vscode";
import type { LanguageClient } from "vscode-languageclient/node";
import { HELD_LIMIT, HeldActivity } from "../src/heldActivity";
import type { Stub } from "./vscode-stub";

const stub = vscode as unknown as Stub;

function uri(path: string, scheme = "file"): vscode.Uri {
  return { scheme, path, toString: () => `${scheme}://${path}` } as unknown as vscode.Uri;
}

/** A client that records what it is asked to send: [method, params]. */
function recordingClient(): { client: LanguageClient; sent: [string, unknown][] } {
  const sent: [string, unknown][] = [];
  const client = {
    code2ProtocolConverter: { asUri: (u: vscode.Uri) => u.toString() },
    sendNotification: async (method: string, params: unknown) => {
      sent.push([method, params]);
    },
  };
  return { client: client as unknown as LanguageClient, sent };
}

test("held until the client runs, then sent in the order they happened", async () => {
  const held = new HeldActivity();
  try {
    stub.workspace.saved.fire({ uri: uri("/w/a.txt") });
    stub.workspace.saved.fire({ uri: uri("Untitled-1", "untitled") });
    stub.workspace.created.fire({ files: [uri("/w/b.txt"), uri("/x", "vscode-userdata")] });
    stub.workspace.renamed.fire({ files: [{ oldUri: uri("/w/b.txt"), newUri: uri("/w/c.txt") }] });
    stub.workspace.deleted.fire({ files: [uri("/w/c.txt")] });
    const { client, sent } = recordingClient();
    await held.send(client);
    assert.deepEqual(sent, [
      ["textDocument/didSave", { textDocument: { uri: "file:///w/a.txt" } }],
      ["workspace/didCreateFiles", { files: [{ uri: "file:///w/b.txt" }] }],
      ["workspace/didRenameFiles", { files: [{ oldUri: "file:///w/b.txt", newUri: "file:///w/c.txt" }] }],
      ["workspace/didDeleteFiles", { files: [{ uri: "file:///w/c.txt" }] }],
    ]);
    // The client listens itself from now on; a restart holds again.
    stub.workspace.saved.fire({ uri: uri("/w/d.txt") });
    assert.equal(held.pending.length, 0);
    held.hold();
    stub.workspace.saved.fire({ uri: uri("/w/e.txt") });
    assert.deepEqual(
      held.pending.map((h) => h.kind === "save" && h.uri.path),
      ["/w/e.txt"],
    );
  } finally {
    held.dispose();
  }
});

test("at most HELD_LIMIT reports are held: the newest", () => {
  const held = new HeldActivity();
  try {
    for (let i = 0; i < HELD_LIMIT + 5; i += 1) stub.workspace.saved.fire({ uri: uri(`/w/${i}`) });
    assert.equal(held.pending.length, HELD_LIMIT);
    const first = held.pending[0]!;
    assert.equal(first.kind === "save" && first.uri.path, "/w/5");
  } finally {
    held.dispose();
  }
});

test("since when activity is held: from activation, and again from each restart", async () => {
  const before = Date.now();
  const held = new HeldActivity();
  try {
    const activated = held.since;
    assert.ok(activated >= before && activated <= Date.now());
    held.hold(); // the first start: still held since activation
    assert.equal(held.since, activated);
    await held.send(recordingClient().client);
    await new Promise((resolve) => setTimeout(resolve, 5));
    held.hold(); // a restart
    assert.ok(held.since > activated);
  } finally {
    held.dispose();
  }
});
