// The local dashboard: timeline, project graph, drift, forwarding, export, live updates.
import { api, el, table, state, short, when, duration, replace, debounce } from "./common.js";
import { Timeline } from "./timeline.js";

const $ = (id) => document.getElementById(id);
let view = { from: null, to: null }; // null: the whole stored range
let latestSeen = null;

const chart = new Timeline($("timeline-canvas"), showBucket);

async function loadTimeline() {
  const query = new URLSearchParams();
  if (view.from) query.set("from", view.from);
  if (view.to) query.set("to", view.to);
  const data = await api(`/ui/api/timeline?${query}`);
  chart.show(data);
  const total = data.buckets.reduce((sum, [, counts]) => sum + counts.reduce((a, b) => a + b, 0), 0);
  $("range").textContent = data.unit
    ? `${when(data.from)} to ${when(data.to)}: ${total.toLocaleString()} events in ${data.buckets.length} buckets of ${/^\d/.test(data.unit) ? data.unit : `1 ${data.unit}`}`
    : "No events stored yet.";
  if (!performance.getEntriesByName("timeline-rendered").length) {
    performance.mark("timeline-rendered");
    document.body.dataset.timelineRendered = String(Math.round(performance.now()));
  }
  return data;
}

function setSpan(seconds) {
  if (seconds === "all") {
    view = { from: null, to: null };
  } else {
    const end = latestSeen ? Date.parse(latestSeen) + 1000 : Date.now();
    view = { from: new Date(end - seconds * 1000).toISOString(), to: new Date(end).toISOString() };
  }
  loadTimeline();
}

function currentSpan() {
  const data = chart.data;
  if (!data || !data.from) return null;
  return [Date.parse(data.from), Date.parse(data.to)];
}

function zoom(factor) {
  const span = currentSpan();
  if (!span) return;
  const mid = (span[0] + span[1]) / 2;
  const half = Math.max(30000, ((span[1] - span[0]) * factor) / 2);
  view = { from: new Date(mid - half).toISOString(), to: new Date(mid + half).toISOString() };
  loadTimeline();
}

function pan(direction) {
  const span = currentSpan();
  if (!span) return;
  const step = ((span[1] - span[0]) / 2) * direction;
  view = { from: new Date(span[0] + step).toISOString(), to: new Date(span[1] + step).toISOString() };
  loadTimeline();
}

async function showBucket({ from, to, lane }) {
  const list = $("bucket-events");
  replace(list, el("li", {}, el("span", { class: "row" }, "loading…")));
  const query = new URLSearchParams({ from, to, lane });
  const { events, limit } = await api(`/ui/api/timeline/events?${query}`);
  const items = events.map((event) =>
    el("li", {}, el("button", { type: "button", onclick: () => showEnvelope(event) },
      el("span", { class: `lane lane-${event.lane}` }, event.kind), " ", when(event.timestamp), " #", event.seq,
      el("span", { class: "muted" }, " received ", when(event.received_at)),
      el("span", { class: "summary" }, " ", event.summary))),
  );
  if (!items.length) items.push(el("li", {}, el("span", { class: "row" }, `no ${lane} events here`)));
  if (events.length === limit) items.push(el("li", {}, el("span", { class: "row muted" }, `first ${limit} shown: zoom in for the rest`)));
  replace(list, items);
}

function showEnvelope(event) {
  $("envelope").textContent = JSON.stringify(event.envelope, null, 2);
}

// --- project graph -------------------------------------------------------------------------

async function loadGraph() {
  const q = $("graph-search").value.trim();
  const g = await api(`/ui/api/graph?${new URLSearchParams({ q })}`);
  const plans = g.plans.length
    ? g.plans.map((plan) =>
        el("div", { class: "finding plan" },
          el("strong", {}, plan.title || plan.plan_id), " ", state(plan.status),
          el("ol", { class: "steps", "aria-label": "Steps in dependency order" },
            plan.steps.map((step) => el("li", {}, state(step.status), " ", step.description || step.step_id,
              step.depends_on.length ? el("span", { class: "muted" }, ` (after ${step.depends_on.length})`) : null)))))
    : [el("p", { class: "muted" }, "Plans: none")];
  replace($("graph-body"),
    el("h3", {}, "Plans"), plans,
    table("Commits", [["Commit", (c) => el("code", {}, short(c.commit_id))], ["When", (c) => when(c.committed_at)],
      ["Author", (c) => c.author || "–"], ["Branches", (c) => c.branches.join(", ")], ["Message", (c) => c.message || ""]], g.commits),
    table("Branches", [["Branch", (b) => b.ref_name], ["Head", (b) => el("code", {}, short(b.head_commit))]], g.branches),
    table("Authors", [["Name", (a) => a.name || "–"], ["Email", (a) => a.email || "–"], ["Commits", (a) => a.commits]], g.authors),
    table("Files", [["Path", (f) => el("code", {}, f.path)], ["Recorded", (f) => when(f.last_modified)], ["Size", (f) => f.size ?? "–"]], g.files),
  );
}

// --- drift -----------------------------------------------------------------------------------

const STRATEGIES = [
  ["fs", "File system wins"],
  ["psg", "PSG wins (restore)"],
  ["merge", "Three-way merge"],
  ["ignore", "Decide later"],
];

async function loadDrift() {
  const { drifts } = await api("/ui/api/drift");
  if (!drifts.length) {
    replace($("drift-body"), el("p", { class: "muted" }, "No drift: the project graph matches the disk."));
    return;
  }
  replace($("drift-body"), drifts.map((d) =>
    el("div", { class: "finding", "data-path": d.path },
      el("code", {}, d.path), " ", state(d.state), el("div", { class: "muted" }, d.message),
      el("div", { class: "toolbar", role: "group", "aria-label": `Resolve ${d.path}` },
        STRATEGIES.map(([strategy, label]) =>
          el("button", { type: "button", "data-strategy": strategy, onclick: () => resolve(d.path, strategy) }, label))))));
}

async function resolve(path, strategy) {
  const result = await api("/ui/api/drift/resolve", { json: { path, strategy } });
  $("live-state").textContent = result.message || (result.ok ? "resolved" : "not resolved");
  loadDrift();
}

// --- forwarding ------------------------------------------------------------------------------

async function loadForwarding() {
  const { status, retry, dead_letters: dead } = await api("/ui/api/forwarding");
  if (!status) {
    replace($("forwarding-body"), el("p", { class: "muted" }, "This store has no outbox."));
    return;
  }
  const card = (label, value, wide = false) =>
    el("div", { class: wide ? "card wide" : "card" }, el("b", {}, value ?? "–"), el("span", {}, label));
  // One block per sink (the collector, an OTLP receiver, ...): each has its own queue and counters.
  const sinks = Object.values(status.sinks ?? { collector: { ...status, sink: "collector" } })
    .filter((sink) => sink.sink === "collector" || sink.enabled || sink.state !== "off");
  const sinkBlock = (sink) => el("section", { class: "sink", "data-sink": sink.sink },
    sinks.length > 1 ? el("h3", {}, `Sink: ${sink.sink}`) : null,
    el("div", { class: "cards" },
      card("state", sink.state), card("remote", sink.remote ? breakableUrl(sink.remote) : "none", true), card("outbox depth", sink.depth),
      card("oldest pending", duration(sink.oldest_pending_age_s)), card("delivered", sink.delivered),
      card("dead letters", sink.dead_letters), card("last success", when(sink.last_success_at)),
      card("next attempt in", duration(sink.next_attempt_in_s)),
      sink.rejected ? card("rejected in part", sink.rejected) : null),
    sink.last_error ? el("p", { class: "error" }, `Last error (${when(sink.last_error_at)}): ${sink.last_error}`) : null);
  replace($("forwarding-body"),
    ...sinks.map(sinkBlock),
    el("p", { class: "muted" }, `Retry schedule: waits up to ${retry.ceilings_s.map((s) => duration(s)).join(", ")}, then at most ${duration(retry.max_delay_s)}; ${retry.note}.`),
    el("h3", {}, "Dead letters"),
    dead.length ? el("div", { class: "toolbar" }, el("button", { type: "button", id: "requeue-all", onclick: () => requeue({ all: true }) }, `Requeue all ${dead.length}`)) : null,
    table("Dead letters", [["Seq", (d) => d.seq], ["Kind", (d) => d.kind], ["Sink", (d) => d.sink], ["Status", (d) => d.status ?? "–"],
      ["When", (d) => when(d.dead_at)], ["Reason", (d) => d.reason],
      ["", (d) => el("button", { type: "button", "data-seq": d.seq, "data-sink": d.sink, onclick: () => requeue({ seqs: [d.seq], sink: d.sink }) }, "Requeue")]], dead),
  );
}

// A long address wraps after its separators, never inside a word of it.
function breakableUrl(url) {
  return url.split(/(?<=[/.:?&=])/).flatMap((part) => [part, el("wbr")]);
}

async function requeue(body) {
  const { requeued } = await api("/ui/api/dead-letters/requeue", { json: body });
  $("live-state").textContent = `requeued ${requeued}`;
  loadForwarding();
}

// --- live updates ----------------------------------------------------------------------------

const refreshTimeline = debounce(() => { if (!view.to) loadTimeline(); }, 800);
const refreshOthers = debounce(() => { loadGraph(); loadDrift(); loadForwarding(); }, 1000);

function connect() {
  const source = new EventSource("/ui/api/live");
  source.addEventListener("open", () => { $("live-state").textContent = "live"; $("live-state").classList.add("on"); });
  source.addEventListener("error", () => { $("live-state").textContent = "reconnecting…"; $("live-state").classList.remove("on"); });
  source.addEventListener("events", (message) => {
    const { events } = JSON.parse(message.data);
    const list = $("live-events");
    for (const event of events) {
      // The newest time seen: an event that happened earlier (reported late) does not move it back.
      if (!latestSeen || event.timestamp > latestSeen) latestSeen = event.timestamp;
      list.prepend(el("li", { "data-kind": event.kind }, el("span", { class: "row" },
        el("span", { class: `lane lane-${event.lane}` }, event.kind), " ", when(event.timestamp), " #", event.seq)));
    }
    while (list.children.length > 50) list.lastChild.remove();
    refreshTimeline();
    refreshOthers();
  });
}

// --- wiring ----------------------------------------------------------------------------------

document.querySelectorAll("[data-span]").forEach((button) =>
  button.addEventListener("click", () => setSpan(button.dataset.span === "all" ? "all" : Number(button.dataset.span))));
$("zoom-in").addEventListener("click", () => zoom(0.5));
$("zoom-out").addEventListener("click", () => zoom(2));
$("pan-left").addEventListener("click", () => pan(-1));
$("pan-right").addEventListener("click", () => pan(1));
$("timeline-canvas").addEventListener("keydown", (event) => {
  if (event.key === "+" || event.key === "=") zoom(0.5);
  if (event.key === "-") zoom(2);
});
$("graph-search").addEventListener("input", debounce(loadGraph, 250));

loadTimeline().then((data) => { if (data.to) latestSeen = data.to; });
connect();
loadGraph();
loadDrift();
loadForwarding();
