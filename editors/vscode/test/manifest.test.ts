import assert from "node:assert/strict";
import { test } from "node:test";
import { COMMANDS } from "../src/commands";
import { serverSection } from "../src/serverSettings";
import { CLIENT_SETTINGS, RESTRICTED_SETTINGS, type SettingsSchema } from "../src/settingsSchema";
import { PACKAGE_JSON, readJson, SETTINGS_SCHEMA, syncedManifest } from "../tools/sync-settings";

const manifest = readJson(PACKAGE_JSON);
const schema = readJson(SETTINGS_SCHEMA) as SettingsSchema;

test("package.json contributes exactly the settings of schemas/settings.schema.json (run `npm run sync-settings`)", () => {
  assert.deepEqual(manifest.contributes, syncedManifest(manifest, schema).contributes);
  assert.deepEqual(manifest.capabilities, syncedManifest(manifest, schema).capabilities);
});

test("Restricted Mode ignores a workspace's value of every setting that runs, reads or sends", () => {
  const { supported, restrictedConfigurations } = manifest.capabilities.untrustedWorkspaces;
  assert.equal(supported, "limited");
  const contributed = Object.keys(manifest.contributes.configuration.properties);
  // Every llm* setting sends a prompt or names a key file; every remote* one sends or reads.
  const bySubject = contributed.filter((name) => /^mplp\.(llm|remote)/.test(name));
  for (const name of [...bySubject, "mplp.serverPath", "mplp.interpreter", "mplp.tools", "mplp.stateDir", "mplp.vslUrl"]) {
    assert.ok(restrictedConfigurations.includes(name), `${name} is restricted`);
  }
  for (const name of RESTRICTED_SETTINGS) assert.ok(contributed.includes(name), `${name} is a setting`);
});

test("a setting added to the schema makes the manifest stale", () => {
  const grown = { properties: { ...schema.properties, newSetting: { type: "boolean", default: true } } };
  assert.notDeepEqual(manifest.contributes, syncedManifest(manifest, grown).contributes);
  assert.deepEqual(syncedManifest(manifest, grown).contributes.configuration.properties["mplp.newSetting"], {
    type: "boolean",
    default: true,
    scope: "resource",
  });
});

test("every schema setting keeps its type, default, bounds and enum", () => {
  const contributed = manifest.contributes.configuration.properties;
  for (const [name, property] of Object.entries(schema.properties)) {
    const entry = contributed[`mplp.${name}`];
    assert.ok(entry, `mplp.${name} is contributed`);
    for (const key of ["type", "default", "minimum", "maximum", "enum"] as const) {
      assert.deepEqual(entry[key], property[key], `mplp.${name}.${key}`);
    }
  }
});

test("the extension's own settings never reach the server, and never shadow a server setting", () => {
  const ownKeys = Object.keys(CLIENT_SETTINGS).map((key) => key.split(".")[1]!);
  for (const key of ownKeys) assert.ok(!(key in schema.properties), `${key} is the server's`);
  const section = Object.fromEntries([...ownKeys, "debounceMs"].map((key) => [key, 1]));
  assert.deepEqual(serverSection(section), { debounceMs: 1 });
});

test("command ids never equal the server command they call (vscode-languageclient registers those)", () => {
  const ids = new Set<string>(Object.values(COMMANDS).map((entry) => entry.command));
  for (const entry of Object.values(COMMANDS)) {
    if ("server" in entry) assert.ok(!ids.has(entry.server), `${entry.server} collides`);
  }
});

test("the manifest can be packaged: activation once start-up finished, entry point, icon, repository", () => {
  assert.equal(manifest.main, "./dist/extension.js");
  // Every workspace is recorded, git or not; commands activate the extension by themselves.
  assert.deepEqual(manifest.activationEvents, ["onStartupFinished"]);
  assert.match(manifest.icon, /\.png$/);
  assert.equal(manifest.repository.type, "git");
  assert.match(manifest.engines.vscode, /^\^1\.\d+\.\d+$/);
  const typesVersion = manifest.devDependencies["@types/vscode"].replace(/^[~^]/, "");
  assert.ok(
    typesVersion.localeCompare(manifest.engines.vscode.slice(1), undefined, { numeric: true }) <= 0,
    "@types/vscode must not be newer than engines.vscode (vsce refuses)",
  );
});
