/**
 * The channel vscode-languageclient traces LSP messages into. The library traces only while its
 * trace channel's log level is Trace, so `mplp.trace.server` alone would do nothing unless the
 * user also changed the MPLP channel's level. This view of the MPLP channel reports Trace while
 * the setting is on and writes the trace lines at Info, the level the channel shows by default.
 */

import * as vscode from "vscode";

const SETTING = "mplp.trace.server";

export function traceChannel(log: vscode.LogOutputChannel): vscode.LogOutputChannel & vscode.Disposable {
  const tracing = () => vscode.workspace.getConfiguration().get<string>(SETTING, "off") !== "off";
  const changed = new vscode.EventEmitter<vscode.LogLevel>();
  const level = () => (tracing() ? vscode.LogLevel.Trace : log.logLevel);
  const subscriptions = [
    changed,
    log.onDidChangeLogLevel(() => changed.fire(level())),
    vscode.workspace.onDidChangeConfiguration((change) => {
      if (change.affectsConfiguration(SETTING)) changed.fire(level());
    }),
  ];
  return new Proxy(log, {
    get(target, property, receiver) {
      if (property === "logLevel") return level();
      if (property === "onDidChangeLogLevel") return changed.event;
      if (property === "trace") return (message: string) => target.info(message);
      if (property === "dispose") return () => subscriptions.forEach((s) => s.dispose());
      const value = Reflect.get(target, property, receiver);
      return typeof value === "function" ? value.bind(target) : value;
    },
  }) as vscode.LogOutputChannel & vscode.Disposable;
}
