// The timeline chart: one lane per source, one bar per server-side time bucket. The server
// sends at most a few hundred buckets whatever the store holds; this only draws them.

const TEMPLATE = "0000-01-01T00:00:00.000Z";
const LABELS = { editor: "Editor / watcher", git: "Git", tools: "Tools", ci: "CI", runtime: "Runtime" };
const LABEL_W = 120;
const AXIS_H = 22;

export function bucketStart(prefix) {
  return Date.parse(prefix + TEMPLATE.slice(prefix.length));
}

export function bucketEnd(prefix, unit) {
  const start = new Date(bucketStart(prefix));
  const next = new Date(start);
  if (unit === "month") next.setUTCMonth(next.getUTCMonth() + 1);
  else if (unit === "year") next.setUTCFullYear(next.getUTCFullYear() + 1);
  else next.setTime(start.getTime() + SECONDS[unit] * 1000);
  return next.getTime();
}

const SECONDS = { second: 1, "10 seconds": 10, minute: 60, "10 minutes": 600, hour: 3600, day: 86400 };

export class Timeline {
  constructor(canvas, onPick) {
    this.canvas = canvas;
    this.onPick = onPick;
    this.data = null;
    this.selected = { bucket: 0, lane: 0 };
    canvas.addEventListener("click", (event) => this.click(event));
    canvas.addEventListener("keydown", (event) => this.key(event));
    canvas.addEventListener("focus", () => this.draw());
    canvas.addEventListener("blur", () => this.draw());
    new ResizeObserver(() => this.draw()).observe(canvas.parentElement);
  }

  get lanes() { return this.data ? this.data.lanes : Object.keys(LABELS); }

  show(data) {
    this.data = data;
    this.selected.bucket = Math.min(this.selected.bucket, Math.max(0, data.buckets.length - 1));
    this.draw();
  }

  geometry() {
    const width = this.canvas.parentElement.clientWidth;
    const laneH = (this.canvas.height - AXIS_H) / this.lanes.length;
    return { width, laneH, plot: width - LABEL_W };
  }

  // The drawn span: the asked range, widened to whole buckets at both ends.
  span() {
    const buckets = this.data.buckets;
    let from = Date.parse(this.data.from), to = Date.parse(this.data.to);
    if (buckets.length) {
      from = Math.min(from, bucketStart(buckets[0][0]));
      to = Math.max(to, bucketEnd(buckets[buckets.length - 1][0], this.data.unit));
    }
    return [from, to];
  }

  x(ms, g) {
    const [from, to] = this.span();
    return LABEL_W + ((ms - from) / (to - from)) * g.plot;
  }

  draw() {
    const canvas = this.canvas, ratio = window.devicePixelRatio || 1;
    const g = this.geometry();
    canvas.width = Math.floor(g.width * ratio);
    canvas.height = Math.floor(230 * ratio);
    canvas.style.height = "230px";
    const ctx = canvas.getContext("2d");
    ctx.scale(ratio, ratio);
    g.laneH = (230 - AXIS_H) / this.lanes.length;
    ctx.fillStyle = "#fff";
    ctx.fillRect(0, 0, g.width, 230);
    ctx.font = "12px system-ui, sans-serif";
    const styles = getComputedStyle(document.documentElement);
    this.lanes.forEach((lane, i) => {
      ctx.fillStyle = i % 2 ? "#f6f8fa" : "#ffffff";
      ctx.fillRect(0, i * g.laneH, g.width, g.laneH);
      ctx.fillStyle = "#1b1f24";
      ctx.fillText(LABELS[lane] || lane, 6, i * g.laneH + g.laneH / 2 + 4);
    });
    if (!this.data || !this.data.buckets.length) {
      ctx.fillStyle = "#4b5563";
      ctx.fillText("No events in this range.", LABEL_W + 8, 20);
      return;
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(LABEL_W, 0, g.plot, 230);
    ctx.clip();
    const peaks = this.lanes.map((_, i) => Math.max(1, ...this.data.buckets.map((b) => b[1][i])));
    this.data.buckets.forEach(([prefix, counts], index) => {
      const x0 = this.x(bucketStart(prefix), g);
      const x1 = Math.max(x0 + 2, this.x(bucketEnd(prefix, this.data.unit), g) - 1);
      counts.forEach((count, lane) => {
        if (!count) return;
        const h = Math.max(3, (Math.log1p(count) / Math.log1p(peaks[lane])) * (g.laneH - 6));
        ctx.fillStyle = styles.getPropertyValue(`--${this.lanes[lane]}`).trim() || "#0b5cad";
        ctx.fillRect(x0, (lane + 1) * g.laneH - 3 - h, x1 - x0, h);
      });
      if (index === this.selected.bucket && document.activeElement === this.canvas) {
        ctx.strokeStyle = "#1b1f24";
        ctx.lineWidth = 2;
        ctx.strokeRect(x0 - 1, this.selected.lane * g.laneH + 1, x1 - x0 + 2, g.laneH - 2);
      }
    });
    ctx.restore();
    ctx.fillStyle = "#4b5563";
    const axisY = 230 - 6;
    const [from, to] = this.span().map((ms) => new Date(ms).toISOString().slice(0, 19).replace("T", " "));
    ctx.fillText(from, LABEL_W, axisY);
    const end = to;
    ctx.fillText(end, g.width - ctx.measureText(end).width - 4, axisY);
    ctx.fillText(`1 bar = 1 ${this.data.unit}`, LABEL_W + g.plot / 2 - 30, axisY);
  }

  click(event) {
    if (!this.data || !this.data.buckets.length) return;
    const g = this.geometry();
    g.laneH = (230 - AXIS_H) / this.lanes.length;
    const rect = this.canvas.getBoundingClientRect();
    const px = event.clientX - rect.left, py = event.clientY - rect.top;
    const lane = Math.min(this.lanes.length - 1, Math.max(0, Math.floor(py / g.laneH)));
    let best = 0, distance = Infinity;
    this.data.buckets.forEach(([prefix], index) => {
      const mid = (this.x(bucketStart(prefix), g) + this.x(bucketEnd(prefix, this.data.unit), g)) / 2;
      if (Math.abs(mid - px) < distance) { distance = Math.abs(mid - px); best = index; }
    });
    this.selected = { bucket: best, lane };
    this.pick();
  }

  key(event) {
    if (!this.data || !this.data.buckets.length) return;
    const s = this.selected, n = this.data.buckets.length;
    const moves = {
      ArrowLeft: () => { s.bucket = Math.max(0, s.bucket - 1); },
      ArrowRight: () => { s.bucket = Math.min(n - 1, s.bucket + 1); },
      ArrowUp: () => { s.lane = Math.max(0, s.lane - 1); },
      ArrowDown: () => { s.lane = Math.min(this.lanes.length - 1, s.lane + 1); },
      Home: () => { s.bucket = 0; },
      End: () => { s.bucket = n - 1; },
      Enter: () => this.pick(),
    };
    if (moves[event.key]) {
      event.preventDefault();
      moves[event.key]();
      this.draw();
    }
  }

  pick() {
    const [prefix] = this.data.buckets[this.selected.bucket];
    this.draw();
    this.onPick({
      from: new Date(bucketStart(prefix)).toISOString(),
      to: new Date(bucketEnd(prefix, this.data.unit)).toISOString(),
      lane: this.lanes[this.selected.lane],
    });
  }
}
