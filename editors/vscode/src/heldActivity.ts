/**
 * What the editor did to files while no server could hear it: from activation until the client
 * runs, and during a restart. vscode-languageclient attaches its save and file-operation
 * listeners only once the server has answered `initialize`, so a save made while the server
 * starts (seconds, the first time a bundled server compiles its modules) would never reach it.
 * The extension holds those reports and sends them, in order, once the client runs.
 */

import * as vscode from "vscode";
// Types only: the client library's values need a running VS Code, and the tests have none.
import type {
  CreateFilesParams,
  DeleteFilesParams,
  DidSaveTextDocumentParams,
  LanguageClient,
  RenameFilesParams,
} from "vscode-languageclient/node";

/** What is held at most; past it the oldest go (the server's start-up catch-up is the net). */
export const HELD_LIMIT = 10_000;

export type Held =
  | { readonly kind: "save"; readonly uri: vscode.Uri }
  | { readonly kind: "create" | "delete"; readonly uris: readonly vscode.Uri[] }
  | {
      readonly kind: "rename";
      readonly files: readonly { readonly oldUri: vscode.Uri; readonly newUri: vscode.Uri }[];
    };

/** Only files on disk are file activity (not untitled buffers, settings, output channels). */
function onDisk(uri: vscode.Uri): boolean {
  return uri.scheme === "file";
}

/** The reports an editor event makes, or none for what is not on disk. */
export function heldOf(event: Held): Held | undefined {
  switch (event.kind) {
    case "save":
      return onDisk(event.uri) ? event : undefined;
    case "create":
    case "delete": {
      const uris = event.uris.filter(onDisk);
      return uris.length ? { kind: event.kind, uris } : undefined;
    }
    case "rename": {
      const files = event.files.filter((f) => onDisk(f.oldUri) && onDisk(f.newUri));
      return files.length ? { kind: "rename", files } : undefined;
    }
  }
}

export class HeldActivity implements vscode.Disposable {
  private held: Held[] = [];
  private holding = true;
  private holdingSince = Date.now();
  private readonly subscriptions: vscode.Disposable[];

  constructor() {
    this.subscriptions = [
      vscode.workspace.onDidSaveTextDocument((document) => this.add({ kind: "save", uri: document.uri })),
      vscode.workspace.onDidCreateFiles((event) => this.add({ kind: "create", uris: event.files })),
      vscode.workspace.onDidDeleteFiles((event) => this.add({ kind: "delete", uris: event.files })),
      vscode.workspace.onDidRenameFiles((event) => this.add({ kind: "rename", files: event.files })),
    ];
  }

  /** From now on no client listens (it is stopping or starting): hold what happens. */
  hold(): void {
    if (this.holding) return;
    this.holding = true;
    this.holdingSince = Date.now();
  }

  /**
   * Since when (ms since the epoch) activity is held: the next server is told, and cuts a new
   * workspace's first baseline there rather than at its own start, which comes later (after
   * the interpreter check), so a save made in between is a change, not a file that was there.
   */
  get since(): number {
    return this.holdingSince;
  }

  /** What is held, oldest first. */
  get pending(): readonly Held[] {
    return this.held;
  }

  add(event: Held): void {
    if (!this.holding) return;
    const report = heldOf(event);
    if (!report) return;
    this.held.push(report);
    if (this.held.length > HELD_LIMIT) this.held.splice(0, this.held.length - HELD_LIMIT);
  }

  /**
   * The client runs and listens itself from now on: send what was held, in order. A report the
   * client's own listeners also caught (between its start and this call) reaches the server
   * twice; the server's quiet period makes one event of both.
   */
  async send(client: LanguageClient): Promise<void> {
    const held = this.held;
    this.held = [];
    this.holding = false;
    const asUri = (uri: vscode.Uri): string => client.code2ProtocolConverter.asUri(uri);
    for (const report of held) {
      switch (report.kind) {
        case "save":
          await client.sendNotification("textDocument/didSave", {
            textDocument: { uri: asUri(report.uri) },
          } satisfies DidSaveTextDocumentParams);
          break;
        case "create":
          await client.sendNotification("workspace/didCreateFiles", {
            files: report.uris.map((uri) => ({ uri: asUri(uri) })),
          } satisfies CreateFilesParams);
          break;
        case "delete":
          await client.sendNotification("workspace/didDeleteFiles", {
            files: report.uris.map((uri) => ({ uri: asUri(uri) })),
          } satisfies DeleteFilesParams);
          break;
        case "rename":
          await client.sendNotification("workspace/didRenameFiles", {
            files: report.files.map((f) => ({ oldUri: asUri(f.oldUri), newUri: asUri(f.newUri) })),
          } satisfies RenameFilesParams);
          break;
      }
    }
  }

  dispose(): void {
    for (const subscription of this.subscriptions) subscription.dispose();
    this.held = [];
  }
}
