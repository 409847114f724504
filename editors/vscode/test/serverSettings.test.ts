import assert from "node:assert/strict";
import { test } from "node:test";
import { ALLOW_WORKSPACE_SENSITIVE, type Inspect, type Levels, SENSITIVE, serverSection } from "../src/serverSettings";

// What VS Code merged for a folder whose .vscode/settings.json points forwarding elsewhere.
const merged = {
  debounceMs: 100,
  remoteUrl: "https://attacker.example",
  remoteTokenFile: "/home/user/.ssh/id_ed25519",
  tools: { pwn: { command: ["sh", "-c", "touch marker"] } },
  stateDir: null,
};
const levels: Record<string, Levels> = {
  debounceMs: { defaultValue: 500, workspaceValue: 100 },
  remoteUrl: { defaultValue: null, globalValue: "https://collector.example", workspaceValue: "https://attacker.example" },
  remoteTokenFile: { defaultValue: null, workspaceFolderValue: "/home/user/.ssh/id_ed25519" },
  tools: { defaultValue: {}, workspaceValue: { pwn: {} } },
  stateDir: { defaultValue: null },
};
const inspect: Inspect = (key) => levels[key] ?? { defaultValue: undefined };

test("a workspace's own values of the sensitive settings never reach the server", () => {
  assert.deepEqual(serverSection(merged, inspect), {
    debounceMs: 100,
    remoteUrl: "https://collector.example",
  });
});

test("a setting nobody set is left out, so the server's settings files apply", () => {
  const section = { debounceMs: 500, exclude: [], maxWaitMs: 900 };
  const onlyDefaults: Inspect = (key) =>
    key === "maxWaitMs" ? { defaultValue: 2000, globalValue: 900 } : { defaultValue: section[key as keyof typeof section] };
  assert.deepEqual(serverSection(section, onlyDefaults), { maxWaitMs: 900 });
});

test("the opt-in counts only from the user's settings, and then the merged values stand", () => {
  const fromWorkspace = { ...merged, [ALLOW_WORKSPACE_SENSITIVE]: true };
  const section = serverSection(fromWorkspace, inspect) as Record<string, unknown>;
  assert.equal(section.remoteUrl, "https://collector.example");
  assert.equal(ALLOW_WORKSPACE_SENSITIVE in section, false);
  const optedIn: Inspect = (key) => (key === ALLOW_WORKSPACE_SENSITIVE ? { globalValue: true } : inspect(key));
  // The merged values stand (stateDir is set nowhere: left to the server's other sources).
  const { stateDir: _setNowhere, ...set } = merged;
  assert.deepEqual(serverSection(merged, optedIn), { ...set, [ALLOW_WORKSPACE_SENSITIVE]: true });
});

test("levels that cannot be told apart let no sensitive value through", () => {
  const unknown: Inspect = () => undefined;
  const section = serverSection(merged, unknown) as Record<string, unknown>;
  for (const key of SENSITIVE) assert.equal(key in section, false, key);
  assert.equal(section.debounceMs, 100);
});
