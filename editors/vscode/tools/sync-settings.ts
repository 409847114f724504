/**
 * Writes package.json's `contributes.configuration` (from schemas/settings.schema.json),
 * `contributes.commands` (from src/commands.ts) and `capabilities` (src/settingsSchema.ts). Run by `npm run sync-settings` after either
 * changes; test/manifest.test.ts fails until it has been run.
 */

import { readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { commandsContribution } from "../src/commands";
import {
  capabilitiesContribution,
  configurationContribution,
  type SettingsSchema,
} from "../src/settingsSchema";

/** The extension's folder (this file runs from out/tools/ or, in tests, out/test/). */
export const PACKAGE_ROOT = resolve(__dirname, "..", "..");
export const PACKAGE_JSON = resolve(PACKAGE_ROOT, "package.json");
export const SETTINGS_SCHEMA = resolve(PACKAGE_ROOT, "..", "..", "schemas", "settings.schema.json");

export function readJson(path: string): Record<string, any> {
  return JSON.parse(readFileSync(path, "utf8"));
}

/** package.json as it should be. */
export function syncedManifest(manifest: Record<string, any>, schema: SettingsSchema) {
  return {
    ...manifest,
    capabilities: capabilitiesContribution(),
    contributes: {
      ...manifest.contributes,
      commands: commandsContribution(),
      configuration: configurationContribution(schema),
    },
  };
}

if (require.main === module) {
  const synced = syncedManifest(readJson(PACKAGE_JSON), readJson(SETTINGS_SCHEMA) as SettingsSchema);
  writeFileSync(PACKAGE_JSON, JSON.stringify(synced, null, 2) + "\n");
  console.log(`wrote ${PACKAGE_JSON}`);
}
