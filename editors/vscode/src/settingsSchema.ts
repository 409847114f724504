/**
 * The extension's `contributes.configuration` is made from `schemas/settings.schema.json`, the
 * one description of the daemon's settings; `npm run sync-settings` writes it into package.json
 * and a test fails when the two differ.
 */

/** The part of a JSON Schema property that VS Code's settings editor understands. */
export interface SchemaProperty {
  type?: string | string[];
  enum?: unknown[];
  enumDescriptions?: string[];
  default?: unknown;
  description?: string;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  items?: unknown;
  [other: string]: unknown;
}

export interface SettingsSchema {
  properties: Record<string, SchemaProperty>;
}

export type Contribution = Record<string, unknown>;

/** Settings that only the extension reads: how to start the server and how to trace it. */
export const CLIENT_SETTINGS: Record<string, Contribution> = {
  "mplp.importStrategy": {
    type: "string",
    enum: ["useBundled", "fromEnvironment"],
    default: "useBundled",
    markdownEnumDescriptions: [
      "The mplp-lsp packaged in the extension, run by `mplp.interpreter` (any Python 3.11 or newer).",
      "The mplp-lsp installed in `mplp.interpreter`'s environment (`pip install mplp-lsp`).",
    ],
    scope: "machine-overridable",
    markdownDescription:
      "Which mplp-lsp runs. A .vsix built without a bundled server always uses the environment's.",
  },
  "mplp.interpreter": {
    type: "string",
    default: "",
    scope: "machine-overridable",
    markdownDescription:
      "Python interpreter (3.11 or newer) that runs the server: the bundled one as `<interpreter> -I -S <extension>/bundled/launch.py serve`, or with `mplp.importStrategy` `fromEnvironment` its own `mplp_lsp` as `<interpreter> -I -m mplp_lsp serve`. Empty: the Python extension's interpreter for the workspace, else `python3`.",
  },
  "mplp.serverPath": {
    type: "string",
    default: "",
    scope: "machine-overridable",
    markdownDescription:
      "Path of an `mplp-lsp` executable; the server runs as `<serverPath> serve`. Takes precedence over `mplp.interpreter`.",
  },
  "mplp.trace.server": {
    type: "string",
    enum: ["off", "messages", "verbose"],
    default: "off",
    scope: "window",
    markdownDescription:
      "Log the LSP messages between VS Code and mplp-lsp in the MPLP output channel.",
  },
};

/**
 * Settings that run a program, read a file or send data somewhere. In Restricted Mode (a
 * workspace the user has not trusted) VS Code ignores the workspace's own values of these, so a
 * repository's `.vscode/settings.json` cannot start a program or redirect forwarding.
 */
export const RESTRICTED_SETTINGS = [
  "mplp.serverPath",
  "mplp.interpreter",
  "mplp.importStrategy",
  "mplp.tools",
  "mplp.remoteUrl",
  "mplp.remoteTokenFile",
  "mplp.remoteAllowInsecureHttp",
  "mplp.otlpEndpoint",
  "mplp.otlpTokenFile",
  "mplp.otlpSendHostName",
  "mplp.remotes",
  "mplp.stateDir",
  "mplp.llmEndpointUrl",
  "mplp.llmModel",
  "mplp.llmApiKeyFile",
  "mplp.vslUrl",
] as const;

/** package.json's `capabilities`: limited support for untrusted workspaces. */
export function capabilitiesContribution(): Contribution {
  return {
    untrustedWorkspaces: {
      supported: "limited",
      description:
        "In Restricted Mode mplp-lsp records as usual, but takes the settings that start a program, read a file or send data only from your user settings.",
      restrictedConfigurations: [...RESTRICTED_SETTINGS],
    },
  };
}

/**
 * Settings VS Code must read only from the user's own settings: the switch that lets a
 * workspace set the restricted settings cannot itself come from a workspace.
 */
const USER_ONLY_SETTINGS = new Set(["allowWorkspaceSensitiveSettings"]);

/** Keys JSON Schema has and VS Code reads the same way. */
const COPIED = ["type", "enum", "default", "minimum", "maximum", "minLength", "items"] as const;

/** `mplp.<name>` contributions for every property of the settings schema. */
export function settingsFromSchema(schema: SettingsSchema): Record<string, Contribution> {
  const out: Record<string, Contribution> = {};
  for (const [name, property] of Object.entries(schema.properties)) {
    const entry: Contribution = {};
    for (const key of COPIED) {
      if (property[key] !== undefined) entry[key] = property[key];
    }
    // The schema's descriptions use Markdown (`code`), which VS Code renders only from these keys.
    if (property.enumDescriptions !== undefined) {
      entry.markdownEnumDescriptions = property.enumDescriptions;
    }
    if (property.description !== undefined) entry.markdownDescription = property.description;
    // Folders may differ (the server reads settings per workspace folder).
    entry.scope = USER_ONLY_SETTINGS.has(name) ? "machine" : "resource";
    out[`mplp.${name}`] = entry;
  }
  return out;
}

/** The whole `contributes.configuration` block of package.json. */
export function configurationContribution(schema: SettingsSchema): Contribution {
  return {
    title: "MPLP",
    properties: { ...settingsFromSchema(schema), ...CLIENT_SETTINGS },
  };
}
