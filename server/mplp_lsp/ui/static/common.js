// Shared helpers of the dashboards: requests with the session cookie, DOM building, tables.
// Everything the server sends is shown as text (never as HTML): events are untrusted.

export async function api(path, options = {}) {
  const init = { credentials: "same-origin", ...options };
  if (options.json !== undefined) {
    init.method = init.method || "POST";
    init.body = JSON.stringify(options.json);
    init.headers = { "Content-Type": "application/json" };
  }
  const response = await fetch(path, init);
  const body = await response.json().catch(() => ({}));
  if (!response.ok && response.status !== 409) {
    const reason = body.errors && body.errors[0] ? body.errors[0].message : response.statusText;
    throw new Error(`${response.status}: ${reason}`);
  }
  return body;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export function table(caption, columns, rows) {
  if (!rows.length) return el("p", { class: "muted" }, `${caption}: none`);
  return el(
    "div",
    { class: "table-wrap" },
    el(
      "table",
      {},
      el("caption", { class: "muted" }, caption),
      el("thead", {}, el("tr", {}, columns.map(([title]) => el("th", { scope: "col" }, title)))),
      el("tbody", {}, rows.map((row) => el("tr", {}, columns.map(([, cell]) => el("td", {}, cell(row)))))),
    ),
  );
}

export function state(value) {
  const text = value == null ? "–" : String(value);
  return el("span", { class: `state state-${text.toLowerCase()}` }, text);
}

export function short(text, length = 12) {
  return text == null ? "–" : String(text).slice(0, length);
}

export function when(iso) {
  return iso ? String(iso).replace("T", " ").replace(/\.\d+Z$|Z$/, "Z") : "–";
}

export function duration(seconds) {
  if (seconds == null) return "–";
  if (seconds < 120) return `${Math.round(seconds)} s`;
  if (seconds < 7200) return `${Math.round(seconds / 60)} min`;
  if (seconds < 172800) return `${(seconds / 3600).toFixed(1)} h`;
  return `${(seconds / 86400).toFixed(1)} d`;
}

export function replace(container, ...children) {
  container.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined));
}

// Runs fn at most once per `ms`, the last call winning (live updates come in bursts).
export function debounce(fn, ms) {
  let timer = null;
  return () => {
    clearTimeout(timer);
    timer = setTimeout(fn, ms);
  };
}
