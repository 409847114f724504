/**
 * What the server gets of the `mplp` section: everything but the settings only the extension
 * reads (how to start the server, tracing), which the server would log as unknown; and, for
 * the settings that run a program, read a file or send data, only the user's own
 * (machine-level) value. A folder's `.vscode/settings.json` is the repository's to write, so
 * its `remoteUrl` or `tools` must not reach the server unless the user, in their own
 * settings, turned `mplp.allowWorkspaceSensitiveSettings` on. VS Code merges every level into
 * the section; `inspect()` tells the levels apart.
 */

import * as vscode from "vscode";
import { CLIENT_SETTINGS } from "./settingsSchema";

const SECTION = "mplp";
/** `interpreter`, `trace`, ...: the first key under `mplp.` of each extension-only setting. */
const CLIENT_ONLY = new Set(Object.keys(CLIENT_SETTINGS).map((name) => name.split(".")[1]));
/** Keep equal to SENSITIVE_SETTINGS in server/mplp_lsp/config/settings.py (less the client-only ones). */
export const SENSITIVE = [
  "tools",
  "remoteUrl",
  "remoteTokenFile",
  "remoteAllowInsecureHttp",
  "otlpEndpoint",
  "otlpTokenFile",
  "otlpSendHostName",
  "remotes",
  "stateDir",
  "vslUrl",
  "llmEndpointUrl",
  "llmModel",
  "llmApiKeyFile",
] as const;
export const ALLOW_WORKSPACE_SENSITIVE = "allowWorkspaceSensitiveSettings";

export interface Levels {
  defaultValue?: unknown;
  globalValue?: unknown;
  workspaceValue?: unknown;
  workspaceFolderValue?: unknown;
}
/** A setting's values by level, or undefined when they cannot be told apart. */
export type Inspect = (key: string) => Levels | undefined;

/** The levels of the settings as they apply to ``scopeUri`` (a workspace folder). */
export function levelsIn(scopeUri?: string | null): Inspect {
  return (key) => {
    // The test stub of `vscode` has no configuration: then nothing is known, and nothing passes.
    const workspace = (vscode as { workspace?: Partial<typeof vscode.workspace> }).workspace;
    if (workspace?.getConfiguration === undefined) return undefined;
    const scope = scopeUri ? vscode.Uri.parse(scopeUri) : undefined;
    return workspace.getConfiguration(SECTION, scope).inspect(key);
  };
}

/** Whether the user set ``levels`` anywhere (VS Code reports a default for every key). */
function setSomewhere(levels: Levels): boolean {
  return (
    levels.globalValue !== undefined ||
    levels.workspaceValue !== undefined ||
    levels.workspaceFolderValue !== undefined
  );
}

/**
 * The section as the server should see it. A setting nobody set is left out, so that the
 * server's other sources (the user's and the workspace's mplp-lsp files, the environment)
 * apply rather than VS Code's copy of the default.
 */
export function serverSection(section: unknown, inspect: Inspect = levelsIn()): unknown {
  if (section === null || typeof section !== "object" || Array.isArray(section)) return section;
  // A WorkspaceConfiguration also carries its accessor methods; they are not settings.
  const out: Record<string, unknown> = Object.fromEntries(
    Object.entries(section).filter(
      ([key, value]) => !CLIENT_ONLY.has(key) && typeof value !== "function",
    ),
  );
  delete out[ALLOW_WORKSPACE_SENSITIVE];
  for (const key of Object.keys(out)) {
    const levels = inspect(key);
    if (levels !== undefined && !setSomewhere(levels)) delete out[key];
  }
  if (inspect(ALLOW_WORKSPACE_SENSITIVE)?.globalValue === true) {
    out[ALLOW_WORKSPACE_SENSITIVE] = true; // the merged values stand, workspace ones included
    return out;
  }
  for (const key of SENSITIVE) {
    if (!(key in out)) continue;
    const machine = inspect(key)?.globalValue;
    if (machine === undefined) delete out[key];
    else out[key] = machine;
  }
  return out;
}

/** The server's status request, and its notification the status bar follows. */
export const STATUS_METHOD = "mplp/status";

/**
 * The `initialize` request's options: the section, the server's own notifications the
 * extension handles (the server sends them only to a client that lists them) and, when the
 * extension held file activity for this server, since when (ms since the epoch).
 */
export function initializationOptions(
  section: unknown,
  heldSince?: number,
): Record<string, unknown> {
  const options: Record<string, unknown> = {
    [SECTION]: serverSection(section),
    notifications: [STATUS_METHOD],
  };
  if (heldSince !== undefined) options.heldSince = heldSince;
  return options;
}

