import assert from "node:assert/strict";
import { test } from "node:test";
import * as vscode from "vscode";
import { barText, type ServerStatus, statusReport, summarise, summaryLines } from "../src/status";
import { StatusBar } from "../src/statusBar";
import type { Stub } from "./vscode-stub";

/** What today's server sends: no outbox, remote or drift fields. */
const TODAY: ServerStatus = {
  version: "0.1.0",
  ready: true,
  refused: 0,
  workspaces: [
    {
      root: "/home/me/project",
      state_dir: "/home/me/.local/state/mplp-lsp/project-1",
      events_by_kind: { file_update: 3, graph_update: 3 },
      events_total: 6,
      events_today: 6,
      rejected: 0,
      last_event_time: "2026-01-01T10:00:00.000Z",
      store_bytes: 4096,
      pending: 0,
    },
  ],
};

const WITH_FORWARDING: ServerStatus = {
  ...TODAY,
  workspaces: [
    { ...TODAY.workspaces![0]!, outbox: { depth: 2 }, remote: { state: "retrying" }, drift: { count: 1 } },
    { root: "/b", events_today: 4, outbox: { depth: 5 }, remote: { state: "retrying" }, drift: { count: 0 } },
  ],
};

test("fields the server does not send are absent, not zero and not errors", () => {
  const summary = summarise(TODAY);
  assert.deepEqual(summary, {
    ready: true,
    folders: 1,
    eventsToday: 6,
    outboxDepth: undefined,
    remoteState: undefined,
    driftCount: undefined,
  });
  assert.equal(barText(summary), "$(pulse) 6 today");
  assert.deepEqual(summaryLines(summary).slice(1), [
    "outbox depth: not reported by this server",
    "remote: not reported by this server",
    "drift: not reported by this server",
  ]);
});

test("outbox, remote and drift add up over folders", () => {
  const summary = summarise(WITH_FORWARDING);
  assert.equal(summary.eventsToday, 10);
  assert.equal(summary.outboxDepth, 7);
  assert.equal(summary.remoteState, "retrying");
  assert.equal(summary.driftCount, 1);
  assert.equal(barText(summary), "$(pulse) 10 today  $(cloud-upload) 7  remote retrying  $(warning) 1 drift");
});

test("starting, not recording, and malformed input", () => {
  assert.equal(barText(summarise(undefined)), "$(sync~spin) MPLP");
  assert.equal(barText(summarise({ ready: true, workspaces: [] })), "$(circle-slash) MPLP: not recording");
  const odd = summarise({ ready: true, workspaces: [{ events_today: "many" as unknown as number, drift: null as never }] });
  assert.equal(odd.eventsToday, 0);
  assert.equal(odd.driftCount, undefined);
});

test("the status view lists every folder and what it reported", () => {
  const report = statusReport(WITH_FORWARDING);
  assert.match(report, /^# mplp-lsp status/);
  assert.match(report, /## \/home\/me\/project/);
  assert.match(report, /\| by kind \| file_update 3, graph_update 3 \|/);
  assert.match(report, /\| outbox \| \{"depth":2\} \|/);
  assert.match(report, /\| store \| \/home\/me\/\.local\/state\/mplp-lsp\/project-1 \(4\.0 KiB\) \|/);
  assert.match(statusReport(TODAY), /\| drift \| - \|/);
});

test("the status bar item follows the notifications and opens the status view", () => {
  const bar = new StatusBar();
  const item = bar.item as unknown as InstanceType<Stub["StatusBarItem"]>;
  assert.ok(item.visible);
  assert.equal(item.command, "mplp.showStatus");
  assert.equal(item.text, "$(sync~spin) MPLP");
  bar.update(WITH_FORWARDING);
  assert.equal(item.text, barText(summarise(WITH_FORWARDING)));
  assert.match(String(item.tooltip), /^mplp-lsp 0\.1\.0\nevents today: 10 in 2 folder\(s\)/);
  assert.equal((item.backgroundColor as { id: string }).id, "statusBarItem.warningBackground");
  bar.update(TODAY);
  assert.equal(item.backgroundColor, undefined);
  bar.failed("mplp-lsp is not installed in python3.");
  assert.equal(item.text, "$(error) MPLP");
  assert.equal(bar.last, undefined);
  bar.dispose();
  assert.ok(item.disposed);
  assert.ok((vscode as unknown as Stub).extensions);
});
