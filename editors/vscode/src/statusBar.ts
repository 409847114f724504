/** The status bar item, fed by the server's `mplp/status` notification; a click opens the status view. */

import * as vscode from "vscode";
import { COMMANDS } from "./commands";
import { barText, summarise, summaryLines, type ServerStatus } from "./status";

export class StatusBar implements vscode.Disposable {
  readonly item: vscode.StatusBarItem;
  last: ServerStatus | undefined;

  constructor() {
    this.item = vscode.window.createStatusBarItem("mplp.status", vscode.StatusBarAlignment.Left);
    this.item.name = "MPLP";
    this.item.command = COMMANDS.showStatus.command;
    this.starting();
    this.item.show();
  }

  starting(): void {
    this.last = undefined;
    this.item.text = "$(sync~spin) MPLP";
    this.item.tooltip = "mplp-lsp is starting";
    this.item.backgroundColor = undefined;
  }

  failed(problem: string): void {
    this.last = undefined;
    this.item.text = "$(error) MPLP";
    this.item.tooltip = `${problem}\nClick for details.`;
    this.item.backgroundColor = new vscode.ThemeColor("statusBarItem.errorBackground");
  }

  update(status: ServerStatus): void {
    this.last = status;
    const summary = summarise(status);
    this.item.text = barText(summary);
    this.item.tooltip = [`mplp-lsp ${status.version ?? ""}`.trim(), ...summaryLines(summary)].join(
      "\n",
    );
    this.item.backgroundColor = summary.driftCount
      ? new vscode.ThemeColor("statusBarItem.warningBackground")
      : undefined;
  }

  dispose(): void {
    this.item.dispose();
  }
}
