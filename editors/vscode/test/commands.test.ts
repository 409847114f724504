import assert from "node:assert/strict";
import { test } from "node:test";
import { advertisedCommands, describeResult } from "../src/commands";

test("a drift scan's answer is summed over folders", () => {
  const answer = [
    { root: "/home/me/a", checked: 10, drifted: 1, cancelled: false, seconds: 0.01, repository: null },
    { root: "/home/me/b", checked: 5, drifted: 2, cancelled: false, seconds: 0.01, repository: { head: "x" } },
  ];
  assert.deepEqual(describeResult("mplp.scanDrift", answer), {
    message: "drift scan: 3 drifted of 15 file(s) checked; the repository moved in b",
    failed: false,
  });
  assert.match(describeResult("mplp.scanDrift", [{ checked: 1, drifted: 0, cancelled: true }]).message, /\(cancelled\)$/);
});

test("installing hooks names the folders done and the ones refused, with the reason", () => {
  const answer = [
    { root: "/home/me/project", hooks: [{ name: "reference-transaction", state: "installed", chained: false }] },
    { root: "/home/me/notes", error: "not a git repository" },
  ];
  assert.deepEqual(describeResult("mplp.installHooks", answer), {
    message: "Git hooks installed in project; not in notes: not a git repository",
    failed: true,
  });
  assert.equal(describeResult("mplp.installHooks", []).message, "no workspace folder");
});

test("the dashboard: opened, or the private page to open, or why there is none", () => {
  assert.deepEqual(describeResult("mplp.openDashboard", { root: "/home/me/project", shown: true }), {
    message: "dashboard of project opened in the browser",
    failed: false,
  });
  assert.match(
    describeResult("mplp.openDashboard", { root: "/p", shown: false, page: "file:///state/ui-login.html" }).message,
    /open file:\/\/\/state\/ui-login\.html in a browser/,
  );
  assert.equal(describeResult("mplp.openDashboard", { error: "no API" }).failed, true);
});

test("other answers: a string is shown as is; malformed ones do not throw", () => {
  assert.deepEqual(describeResult("mplp.other", "fine"), { message: "fine", failed: false });
  assert.equal(describeResult("mplp.other", { a: 1 }).message, "mplp.other: done");
  assert.equal(describeResult("mplp.scanDrift", null).message, "drift scan: 0 drifted of 0 file(s) checked");
  assert.deepEqual([...advertisedCommands({ executeCommandProvider: { commands: ["a", 1] } })], ["a"]);
});
