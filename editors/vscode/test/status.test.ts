import assert from "node:assert/strict";
import { test } from "node:test";
import * as vscode from "vscode";
import { barText, type ForwardStatus, type ServerStatus, statusReport, summarise, summaryLines } from "../src/status";
import { StatusBar } from "../src/statusBar";
import type { Stub } from "./vscode-stub";

/** The forwarding part of a folder's status, as forward/status.py builds it. */
function forward(more: Partial<ForwardStatus>): ForwardStatus {
  return {
    enabled: false,
    state: "off",
    remote: null,
    problem: null,
    depth: 0,
    pending_bytes: 0,
    budget_bytes: 1073741824,
    oldest_pending_age_s: null,
    last_success_at: null,
    last_error: null,
    last_error_at: null,
    delivered: 0,
    dead_lettered: 0,
    overflow_dropped: 0,
    quarantined: 0,
    batches_sent: 0,
    failed_attempts: 0,
    consecutive_failures: 0,
    next_attempt_in_s: null,
    ...more,
  };
}

/** What the server sends for a folder that does not forward and has no drift. */
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
      store_health: "ok",
      salvage: null,
      forward: forward({}),
      drift: 0,
      drift_deferred: 0,
    },
  ],
};

/** Two folders forwarding to a remote that is down, one with drift. */
const WITH_FORWARDING: ServerStatus = {
  ...TODAY,
  workspaces: [
    {
      ...TODAY.workspaces![0]!,
      forward: forward({
        enabled: true,
        state: "waiting",
        remote: "https://runtime.example/mplp",
        depth: 2,
        oldest_pending_age_s: 12.5,
        last_error: "connection refused",
        delivered: 40,
      }),
      drift: 1,
      drift_deferred: 2,
    },
    {
      root: "/b",
      events_today: 4,
      forward: forward({ enabled: true, state: "waiting", remote: "https://runtime.example/mplp", depth: 5 }),
      drift: 0,
      drift_deferred: 0,
    },
  ],
};

/** An older server (or a store from before forwarding and drift): no forward, no drift. */
const OLDER: ServerStatus = {
  ...TODAY,
  workspaces: [{ root: "/home/me/project", events_today: 6, forward: null }],
};

test("what the server sends for a folder without a remote: outbox 0, remote off, no drift", () => {
  const summary = summarise(TODAY);
  assert.deepEqual(summary, {
    ready: true,
    folders: 1,
    eventsToday: 6,
    outboxDepth: 0,
    remoteState: "off",
    remoteProblem: undefined,
    driftCount: 0,
    driftDeferred: 0,
  });
  assert.equal(barText(summary), "$(pulse) 6 today  $(cloud-upload) 0  remote off  $(warning) 0 drift");
  assert.deepEqual(summaryLines(summary).slice(1), ["outbox depth: 0", "remote: off", "drift: 0"]);
});

test("fields an older server does not send are absent, not zero and not errors", () => {
  const summary = summarise(OLDER);
  assert.equal(summary.outboxDepth, undefined);
  assert.equal(summary.remoteState, undefined);
  assert.equal(summary.driftCount, undefined);
  assert.equal(barText(summary), "$(pulse) 6 today");
  assert.deepEqual(summaryLines(summary).slice(1), [
    "outbox depth: not reported by this server",
    "remote: not reported by this server",
    "drift: not reported by this server",
  ]);
});

test("outbox, remote and drift add up over folders; the remote's trouble is named", () => {
  const summary = summarise(WITH_FORWARDING);
  assert.equal(summary.eventsToday, 10);
  assert.equal(summary.outboxDepth, 7);
  assert.equal(summary.remoteState, "waiting");
  assert.equal(summary.driftCount, 1);
  assert.equal(summary.driftDeferred, 2);
  assert.equal(barText(summary), "$(pulse) 10 today  $(cloud-upload) 7  remote waiting  $(warning) 1 drift");
  assert.deepEqual(summaryLines(summary).slice(2), [
    "remote: waiting: connection refused",
    "drift: 1 (2 deferred)",
  ]);
  const mixed = summarise({
    ready: true,
    workspaces: [{ forward: forward({ state: "idle" }) }, { forward: forward({ state: "misconfigured", problem: "http:// to a remote host" }) }],
  });
  assert.equal(mixed.remoteState, "idle/misconfigured");
  assert.equal(mixed.remoteProblem, "http:// to a remote host");
});

test("starting, not recording, and malformed input", () => {
  assert.equal(barText(summarise(undefined)), "$(sync~spin) MPLP");
  assert.equal(barText(summarise({ ready: true, workspaces: [] })), "$(circle-slash) MPLP: not recording");
  const odd = summarise({
    ready: true,
    workspaces: [{ events_today: "many" as unknown as number, drift: null as never, forward: [] as never }],
  });
  assert.equal(odd.eventsToday, 0);
  assert.equal(odd.driftCount, undefined);
  assert.equal(odd.outboxDepth, undefined);
});

test("the status view lists every folder and what it reported", () => {
  const report = statusReport(WITH_FORWARDING);
  assert.match(report, /^# mplp-lsp status/);
  assert.match(report, /## \/home\/me\/project/);
  assert.match(report, /\| by kind \| file_update 3, graph_update 3 \|/);
  assert.match(report, /\| forwarding \| waiting to https:\/\/runtime\.example\/mplp \|/);
  assert.match(report, /\| outbox \| 2 waiting, the oldest for 12\.5 s \|/);
  assert.match(report, /\| delivered \| 40, dead-lettered 0 \|/);
  assert.match(report, /\| last error \| connection refused \|/);
  assert.match(report, /\| drift \| 1 open, 2 deferred \|/);
  assert.match(report, /\| store \| \/home\/me\/\.local\/state\/mplp-lsp\/project-1 \(4\.0 KiB\), ok \|/);
  assert.match(statusReport(TODAY), /\| forwarding \| off to no remote \|/);
  assert.match(statusReport(OLDER), /\| forwarding \| not reported \(a store without an outbox\) \|/);
  assert.match(statusReport(OLDER), /\| drift \| - open, - deferred \|/);
});

test("the status view has the rows of each sink in use when there are several", () => {
  const collector = forward({ enabled: true, state: "idle", remote: "https://runtime.example/mplp", delivered: 7 });
  const otlp = forward({ enabled: true, state: "waiting", remote: "http://127.0.0.1:4318/v1/logs", depth: 3 });
  const unused = forward({});
  const both: ServerStatus = {
    ...TODAY,
    workspaces: [{ ...TODAY.workspaces![0]!, forward: { ...collector, sinks: { collector, otlp, vendor: unused } } }],
  };
  const report = statusReport(both);
  assert.match(report, /\| forwarding \(collector\) \| idle to https:\/\/runtime\.example\/mplp \|/);
  assert.match(report, /\| delivered \(collector\) \| 7, dead-lettered 0 \|/);
  assert.match(report, /\| forwarding \(otlp\) \| waiting to http:\/\/127\.0\.0\.1:4318\/v1\/logs \|/);
  assert.match(report, /\| outbox \(otlp\) \| 3 waiting \|/);
  assert.doesNotMatch(report, /vendor/);
  // One sink in use (an OTLP receiver alone): its rows, unnamed, as the server puts it on top.
  const alone: ServerStatus = {
    ...TODAY,
    workspaces: [{ ...TODAY.workspaces![0]!, forward: { ...otlp, sinks: { collector: unused, otlp } } }],
  };
  assert.match(statusReport(alone), /\| forwarding \| waiting to http:\/\/127\.0\.0\.1:4318\/v1\/logs \|/);
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
