/** The interpreter the Python extension (ms-python.python) uses for a folder, when it is installed. */

import { PVSC_EXTENSION_ID, PythonExtension } from "@vscode/python-extension";
import * as vscode from "vscode";

export async function pythonFromExtension(resource?: vscode.Uri): Promise<string | undefined> {
  if (!vscode.extensions.getExtension(PVSC_EXTENSION_ID)) return undefined;
  try {
    const environments = (await PythonExtension.api()).environments;
    const environment = await environments.resolveEnvironment(
      environments.getActiveEnvironmentPath(resource),
    );
    return environment?.executable.uri?.fsPath;
  } catch {
    return undefined; // a broken Python extension must not keep the server from starting
  }
}

/** Calls `listener` when the user picks another interpreter in the Python extension. */
export async function onPythonChanged(listener: () => void): Promise<vscode.Disposable | undefined> {
  if (!vscode.extensions.getExtension(PVSC_EXTENSION_ID)) return undefined;
  try {
    return (await PythonExtension.api()).environments.onDidChangeActiveEnvironmentPath(listener);
  } catch {
    return undefined;
  }
}
