// The team dashboard: one read of /ui/api/team, drawn as tables and bars.
import { api, el, table, state, short, when, duration, replace } from "./common.js";

const $ = (id) => document.getElementById(id);
const COLOURS = ["#0b5cad", "#8a3ffc", "#00726b", "#b34700", "#a40e26", "#4b5563", "#7d4e00"];

function name(url) {
  return url ? url.replace(/^.*[/:]/, "").replace(/\.git$/, "") || url : "(no repository)";
}

function activity(rows) {
  if (!rows.length) return [el("p", { class: "muted" }, "No activity in this period.")];
  const repos = [...new Set(rows.map((r) => r.repo_url))];
  const colour = (repo) => COLOURS[repos.indexOf(repo) % COLOURS.length];
  const periods = new Map();
  for (const row of rows) {
    const counts = periods.get(row.at) || new Map();
    counts.set(row.repo_url, (counts.get(row.repo_url) || 0) + row.events);
    periods.set(row.at, counts);
  }
  const peak = Math.max(...[...periods.values()].map((c) => [...c.values()].reduce((a, b) => a + b, 0)));
  const legend = el("p", { class: "toolbar" }, repos.map((repo) => {
    const swatch = el("span", { class: "swatch", "aria-hidden": "true" });
    swatch.style.backgroundColor = colour(repo);
    return el("span", {}, swatch, " ", name(repo));
  }));
  const bars = el("ul", { class: "bars", "aria-label": "Events per period, by repository" },
    [...periods.entries()].map(([at, counts]) => {
      const total = [...counts.values()].reduce((a, b) => a + b, 0);
      const bar = el("span", { class: "bar" }, [...counts.entries()].map(([repo, n]) => {
        const part = el("span", { title: `${name(repo)}: ${n}` });
        part.style.width = `${(n / peak) * 100}%`;
        part.style.backgroundColor = colour(repo);
        return part;
      }));
      return el("li", {}, el("span", { class: "bar-label" }, when(at).slice(0, 16)), bar, el("span", { class: "bar-value" }, total));
    }));
  const authors = new Map();
  for (const row of rows) {
    const key = `${row.author}\u0000${row.repo_url}`;
    authors.set(key, (authors.get(key) || 0) + row.events);
  }
  const byAuthor = [...authors.entries()].map(([key, events]) => {
    const [author, repo] = key.split("\u0000");
    return { author: author === "null" || !author ? "(not recorded)" : author, repo, events };
  }).sort((a, b) => b.events - a.events);
  return [legend, bars, table("Events per person and repository (file, git, tool and CI events; a file change counts for its workstation's git author)",
    [["Person", (r) => r.author], ["Repository", (r) => name(r.repo)], ["Events", (r) => r.events]], byAuthor)];
}

function figure(kind, title, value, explain) {
  return el("div", { class: `dora ${kind}` },
    el("h4", {}, title), el("p", { class: "dora-value" }, value), el("p", { class: "muted" }, explain));
}

function delivery(view) {
  const patterns = el("p", { class: "muted", id: "deploy-patterns" },
    "Deployment pipelines: ids matching ", view.deploy_pipelines.flatMap((p, i) => [i ? ", " : "", el("code", {}, p)]),
    view.pipelines.length ? ` (here: ${view.pipelines.join(", ")})` : " (none reported yet)");
  if (!view.repositories.length) return [patterns, el("p", { class: "muted" }, "No deployment finished in this period.")];
  const percent = (rate) => (rate == null ? "–" : `${Math.round(rate * 1000) / 10} %`);
  return [patterns, ...view.repositories.map((r) => el("div", { class: "finding", "data-repo": r.repo_url },
    el("h3", {}, name(r.repo_url), " ", el("span", { class: "muted" }, r.repo_url)),
    el("div", { class: "dora-keys" },
      figure("dora-frequency", "Deployment frequency",
        r.deployment_frequency.per_week == null ? "–" : `${r.deployment_frequency.per_week} per week`,
        r.deployment_frequency.explain),
      figure("dora-lead", "Lead time for changes", duration(r.lead_time.median_s), r.lead_time.explain),
      figure("dora-cfr", "Change failure rate", percent(r.change_failure_rate.rate), r.change_failure_rate.explain),
      figure("dora-restore", "Time to restore", duration(r.time_to_restore.median_s), r.time_to_restore.explain))))];
}

function repositories(graphs) {
  if (!graphs.length) return [el("p", { class: "muted" }, "No repository has reported yet.")];
  return graphs.map((g) => el("div", { class: "finding" },
    el("h3", {}, name(g.repo_url), " ", el("span", { class: "muted" }, g.repo_url)),
    table("Branches", [["Branch", (b) => b.ref_name], ["Head", (b) => el("code", {}, short(b.head_commit))], ["Changed", (b) => when(b.changed_at)]], g.branches),
    table("Recent commits", [["Commit", (c) => el("code", {}, short(c.commit_id))], ["When", (c) => when(c.committed_at)],
      ["Author", (c) => c.author || "–"], ["Branches", (c) => (c.branches || []).join(", ")], ["Message", (c) => c.message || ""]], g.commits)));
}

function pipelines(summary, runs) {
  const rate = (r) => (r.success_rate == null ? "–" : `${Math.round(r.success_rate * 100)} %`);
  return [
    table("Pipelines", [["Provider", (p) => p.ci_provider], ["Pipeline", (p) => p.pipeline_id], ["Runs", (p) => p.runs],
      ["Success rate", rate], ["Mean duration", (p) => duration(p.mean_duration_ms == null ? null : p.mean_duration_ms / 1000)],
      ["Last run", (p) => when(p.last_run_at)]], summary),
    table("Recent runs", [["Pipeline", (r) => r.pipeline_id], ["Run", (r) => r.run_id], ["Status", (r) => state(r.status)],
      ["Duration", (r) => duration(r.duration_ms == null ? null : r.duration_ms / 1000)], ["Branch", (r) => r.branch_name || "–"],
      ["Commit", (r) => el("code", {}, short(r.commit_id))], ["When", (r) => when(r.status_at)]], runs),
  ];
}

function leadTimes(rows, median) {
  return [
    el("p", {}, "Median: ", el("strong", { id: "median-lead-time" }, duration(median)), ` over ${rows.length} commit(s)`),
    table("Lead time per commit", [["Repository", (r) => name(r.repo_url)], ["Commit", (r) => el("code", {}, short(r.commit_id))],
      ["Committed", (r) => when(r.committed_at)], ["First success", (r) => when(r.first_success_at)], ["Lead time", (r) => duration(r.lead_time_s)]], rows),
  ];
}

function streams(rows) {
  const ago = (iso) => duration((Date.now() - Date.parse(iso)) / 1000) + " ago";
  const backlog = (s) => (s.backlog == null ? "–" : `${s.backlog} (reported ${s.backlog_reported_at ? ago(s.backlog_reported_at) : "with a batch"})`);
  const status = (s) => {
    if (s.replaced_by) return el("span", { class: "state state-replaced" }, `replaced by ${short(s.replaced_by, 8)}`);
    if (s.clock_ahead_ms) return el("span", { class: "state state-failed" }, `clock ${duration(s.clock_ahead_ms / 1000)} ahead`);
    return el("span", { class: "state state-succeeded" }, "live");
  };
  return [table("Workspace streams", [["Stream", (s) => el("code", {}, short(s.stream, 8))], ["Machine", (s) => s.machine || "–"],
    ["Person", (s) => s.author || "–"], ["Repositories", (s) => (s.repositories || []).map(name).join(", ") || "–"],
    ["Last contact", (s) => `${when(s.last_contact)} (${ago(s.last_contact)})`], ["Backlog", backlog],
    ["Accepted", (s) => s.accepted], ["Duplicates", (s) => s.duplicates], ["Status", status]], rows)];
}

async function load() {
  const view = await api(`/ui/api/team?days=${$("days").value}`);
  replace($("delivery-body"), delivery(view.delivery));
  replace($("activity-body"), activity(view.activity));
  replace($("repositories-body"), repositories(view.repositories));
  replace($("pipelines-body"), pipelines(view.pipelines, view.runs));
  replace($("lead-body"), leadTimes(view.lead_times, view.median_lead_time_s));
  replace($("streams-body"), streams(view.streams));
  document.body.dataset.loaded = $("days").value; // the period on show (tests wait for it)
}

$("days").addEventListener("change", load);
load();
setInterval(load, 15000);
