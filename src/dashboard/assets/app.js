// The ratekeeper dashboard. Polls the admin listener's JSON (/v1/rules, /v1/admin/hot-keys, /v1/admin/rates) once a
// second and draws with plain SVG; the what-if panel posts a scenario to /v1/admin/simulate. No libraries: keys
// come from clients, so every text goes into the page through textContent, never as markup.
"use strict";

const SVG = "http://www.w3.org/2000/svg";
const POLL_MS = 1000;

const $ = (id) => document.getElementById(id);

function el(tag, attrs, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function svg(tag, attrs, text) {
  const e = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  return e;
}

function fmt(v, digits = 3) {
  if (v === undefined || v === null) return "–";
  if (!Number.isFinite(v)) return "∞";
  if (Math.abs(v) >= 1e6) return v.toExponential(2);
  return Number(v.toPrecision(digits)).toString();
}

async function getJSON(path, options) {
  const res = await fetch(path, Object.assign({ cache: "no-store" }, options));
  const body = await res.json().catch(() => null);
  if (!res.ok) {
    const e = body && body.error ? body.error : { message: res.status + " " + res.statusText };
    throw Object.assign(new Error(e.message), { field: e.field });
  }
  return body;
}

// ---- charts ----

// A nice upper bound for an axis.
function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = Math.pow(10, Math.floor(Math.log10(v)));
  for (const m of [1, 2, 2.5, 5, 10]) if (v <= m * p) return m * p;
  return 10 * p;
}

// Axes and grid into `g`; returns scale functions. box: {x, y, w, h}; x and y ranges.
function axes(root, box, x0, x1, y1, xLabel, yLabel, right) {
  const sx = (x) => box.x + ((x - x0) / (x1 - x0 || 1)) * box.w;
  const sy = (y) => box.y + box.h - (y / (y1 || 1)) * box.h;
  for (let i = 0; i <= 4; i++) {
    const y = (y1 * i) / 4;
    root.append(svg("line", { class: "grid", x1: box.x, x2: box.x + box.w, y1: sy(y), y2: sy(y) }));
    root.append(svg("text", { x: box.x - 6, y: sy(y) + 4, "text-anchor": "end" }, fmt(y)));
  }
  for (let i = 0; i <= 6; i++) {
    const x = x0 + ((x1 - x0) * i) / 6;
    root.append(svg("text", { x: sx(x), y: box.y + box.h + 16, "text-anchor": "middle" }, fmt(x)));
  }
  root.append(svg("line", { class: "axis", x1: box.x, x2: box.x + box.w, y1: box.y + box.h, y2: box.y + box.h }));
  root.append(svg("line", { class: "axis", x1: box.x, x2: box.x, y1: box.y, y2: box.y + box.h }));
  root.append(svg("text", { x: box.x + box.w, y: box.y + box.h + 30, "text-anchor": "end" }, xLabel));
  root.append(svg("text", { x: box.x, y: box.y - 8 }, yLabel));
  if (right) {
    const sr = (y) => box.y + box.h - (y / (right.max || 1)) * box.h;
    for (let i = 0; i <= 4; i++) {
      const y = (right.max * i) / 4;
      root.append(svg("text", { x: box.x + box.w + 6, y: sr(y) + 4 }, fmt(y)));
    }
    root.append(svg("text", { x: box.x + box.w, y: box.y - 8, "text-anchor": "end" }, right.label));
    return { sx, sy, sr };
  }
  return { sx, sy };
}

function polyline(points, cls) {
  return svg("polyline", { class: "line " + cls, points: points.map((p) => p[0].toFixed(1) + "," + p[1].toFixed(1)).join(" ") });
}

function legend(box, items) {
  box.replaceChildren(...items.map(([cls, text]) => el("span", {}, el("span", { class: "swatch " + cls }), text)));
}

// ---- rules ----

async function refreshRules() {
  const doc = await getJSON("/v1/rules");
  $("version").textContent = "rules " + (doc.version || "none") + " · " + new Date(doc.loaded_at_unix_ms || 0).toLocaleTimeString();
  const rows = [];
  for (const d of doc.domains) {
    for (const r of d.rules) {
      const params = [];
      if (r.half_life_seconds) params.push("half-life " + fmt(r.half_life_seconds) + "s");
      if (r.burst !== undefined) params.push("burst " + r.burst);
      if (r.capacity !== undefined) params.push("capacity " + r.capacity);
      if (r.shadow_mode) params.push("shadow");
      rows.push(el("tr", {}, el("td", {}, d.domain), el("td", { class: "key" }, r.path), el("td", {}, r.name),
        el("td", {}, r.unlimited ? "unlimited" : r.algorithm), el("td", { class: "num" }, r.unlimited ? "–" : r.requests_per_unit),
        el("td", {}, r.unlimited ? "" : r.unit || fmt(r.window_seconds) + "s"), el("td", {}, params.join(", ")),
        el("td", { class: "num" }, r.keys === undefined ? "–" : r.keys)));
    }
  }
  $("rules").tBodies[0].replaceChildren(...rows);
}

// ---- hot keys ----

async function refreshHotKeys() {
  const doc = await getJSON("/v1/admin/hot-keys?n=10");
  $("hot-note").textContent = "(hits decay with a half-life of " + fmt(doc.half_life_seconds) + " s; state read without charging)";
  const rows = [];
  for (const r of doc.rules) {
    for (const k of r.keys) {
      const limited = k.limited === true;
      const state = k.state === "unavailable" ? el("span", { class: "badge" }, "store unavailable")
        : el("span", { class: "badge " + (limited ? "limited" : "ok") }, limited ? "limited" : "ok");
      rows.push(el("tr", { class: limited ? "limited" : "ok", "data-rule": r.rule, "data-key": k.key },
        el("td", { title: r.domain + " / " + r.rule }, r.name), el("td", { class: "key", title: k.key }, k.key),
        el("td", { class: "num" }, fmt(k.hits)), el("td", { class: "num" }, k.estimate === undefined ? "–" : fmt(k.estimate)),
        el("td", { class: "num" }, fmt(k.remaining)),
        el("td", { class: "num" }, k.retry_after_seconds === undefined ? "–" : k.retry_after_seconds === null ? "never" : fmt(k.retry_after_seconds) + " s"),
        el("td", {}, state)));
    }
  }
  rows.sort((a, b) => Number(b.cells[2].textContent) - Number(a.cells[2].textContent));
  $("hot").tBodies[0].replaceChildren(...(rows.length ? rows : [el("tr", { class: "empty" }, el("td", { colspan: 7 }, "no traffic yet"))]));
}

// ---- rates ----

// rule id -> {name, samples: [{t, ok, refused}]}: the server's samples of the last minutes (history=1, asked for
// when the page opens and after it lost the server), then one of the page's own at each poll.
const history = new Map();
let span = 120; // seconds drawn: what the server keeps (history_seconds)
let haveHistory = false;

async function refreshRates() {
  const doc = await getJSON("/v1/admin/rates" + (haveHistory ? "" : "?history=1"));
  const t = doc.now_unix_ms / 1000;
  span = doc.history_seconds || span;
  const seen = new Set();
  for (const r of doc.rules) {
    const id = r.domain + "\n" + r.rule;
    seen.add(id);
    if (!history.has(id)) history.set(id, { name: r.domain + " / " + r.name, samples: [] });
    const h = history.get(id);
    if (r.history) h.samples = r.history.map((s) => ({ t: t - s.seconds_ago, ok: s.ok, refused: s.refused }));
    h.samples.push({ t, ok: r.ok, refused: r.over_limit + r.shadow_over_limit });
    while (h.samples.length > 2 && h.samples[0].t < t - span) h.samples.shift();
  }
  for (const id of [...history.keys()]) if (!seen.has(id)) history.delete(id);
  haveHistory = true;
  drawRates(t);
}

function drawRates(now) {
  const chart = $("rates-chart");
  chart.replaceChildren();
  const series = [];
  for (const h of history.values()) {
    const ok = [], refused = [];
    for (let i = 1; i < h.samples.length; i++) {
      const a = h.samples[i - 1], b = h.samples[i];
      const dt = b.t - a.t;
      if (!(dt > 0)) continue;
      ok.push([b.t - now, Math.max(0, (b.ok - a.ok) / dt)]);
      refused.push([b.t - now, Math.max(0, (b.refused - a.refused) / dt)]);
    }
    const busy = ok.some((p) => p[1] > 0) || refused.some((p) => p[1] > 0);
    if (busy) series.push({ name: h.name, ok, refused });
  }
  let top = 0;
  for (const s of series) for (const p of s.ok.concat(s.refused)) top = Math.max(top, p[1]);
  // The span the server keeps, or less while it has not seen that much (in steps of 30 s): recent traffic drawn wide.
  let oldest = now;
  for (const h of history.values()) if (h.samples.length) oldest = Math.min(oldest, h.samples[0].t);
  const shown = Math.min(span, Math.max(30, Math.ceil((now - oldest) / 30) * 30));
  const box = { x: 48, y: 22, w: 650, h: 160 };
  const { sx, sy } = axes(chart, box, -shown, 0, niceMax(top), "seconds ago", "decisions / s");
  const items = [];
  series.forEach((s, i) => {
    const c = "c" + (i % 8);
    chart.append(polyline(s.ok.map((p) => [sx(p[0]), sy(p[1])]), c));
    chart.append(polyline(s.refused.map((p) => [sx(p[0]), sy(p[1])]), c + " dashed"));
    items.push([c, s.name + " allowed (solid) / refused (dashed)"]);
  });
  if (!series.length) chart.append(svg("text", { x: box.x + box.w / 2, y: box.y + box.h / 2, "text-anchor": "middle" }, "no decisions in the last " + shown + " s"));
  legend($("rates-legend"), items);
}

// ---- what-if ----

function numberOr(text) {
  const t = text.trim();
  return t !== "" && Number.isFinite(Number(t)) ? Number(t) : t;
}

function scenario(form) {
  const f = Object.fromEntries(new FormData(form).entries());
  const limiter = { algorithm: f.algorithm, limit: numberOr(f.limit), window: f.window };
  if (f.algorithm === "earrrl") limiter.half_life = f.half_life;
  if ((f.algorithm === "gcra" || f.algorithm === "leaky_queue") && f.burst.trim()) limiter.burst = numberOr(f.burst);
  if ((f.algorithm === "token_bucket" || f.algorithm === "leaky_bucket") && f.capacity.trim()) limiter.capacity = numberOr(f.capacity);
  const client = { name: "client", pattern: f.pattern };
  if (f.pattern === "burst") Object.assign(client, { size: numberOr(f.size), every: f.every });
  else client.rate = numberOr(f.rate);
  if (f.pattern === "abuser") client.reform_at = f.reform_at;
  if (f.pattern === "on_off") Object.assign(client, { on: f.on, off: f.off });
  return { duration: f.duration, limiter, clients: [client] };
}

function showFields(form) {
  const a = form.elements.algorithm.value, p = form.elements.pattern.value;
  for (const l of form.querySelectorAll("label[data-for]")) l.hidden = !l.dataset.for.split(" ").includes(a);
  for (const l of form.querySelectorAll("label[data-pattern]")) l.hidden = !l.dataset.pattern.split(" ").includes(p);
}

async function runWhatIf(event) {
  event.preventDefault();
  const form = $("whatif");
  $("whatif-error").textContent = "";
  try {
    const doc = await getJSON("/v1/admin/simulate", {
      method: "POST",
      headers: { "Content-Type": "application/json" },  // the admin listener takes no other (docs/security.md)
      body: JSON.stringify(scenario(form)),
    });
    drawWhatIf(doc);
  } catch (e) {
    $("whatif-error").textContent = (e.field ? e.field + ": " : "") + e.message;
  }
}

function drawWhatIf(doc) {
  const chart = $("whatif-chart");
  chart.replaceChildren();
  const n = doc.clients[0].allowed_per_bucket.length;
  const allowed = new Array(n).fill(0), refused = new Array(n).fill(0);
  for (const c of doc.clients) {
    c.allowed_per_bucket.forEach((v, i) => (allowed[i] += v));
    c.refused_per_bucket.forEach((v, i) => (refused[i] += v));
  }
  const perSecond = (v) => v / doc.bucket_seconds;
  const top = niceMax(Math.max(...allowed.map((v, i) => perSecond(v + refused[i]))));
  const c0 = doc.clients[0];
  const line = c0.estimate ? { values: c0.estimate, label: "estimate (per window)" } : { values: c0.remaining, label: "remaining" };
  const lineMax = niceMax(Math.max(doc.limiter.limit, ...line.values.filter(Number.isFinite)));
  const box = { x: 48, y: 22, w: 620, h: 190 };
  const { sx, sy, sr } = axes(chart, box, 0, doc.duration_seconds, top, "seconds", "attempts / s", { max: lineMax, label: line.label });
  const bw = Math.max(1, box.w / n - 0.5);
  const bars = svg("g", { class: "bars" });
  for (let i = 0; i < n; i++) {
    const x = sx(i * doc.bucket_seconds);
    const a = perSecond(allowed[i]), r = perSecond(refused[i]);
    if (a > 0) bars.append(svg("rect", { class: "s0 allowed", x: x.toFixed(1), y: sy(a).toFixed(1), width: bw.toFixed(1), height: (sy(0) - sy(a)).toFixed(1) }));
    if (r > 0) bars.append(svg("rect", { class: "s1 refused", x: x.toFixed(1), y: sy(a + r).toFixed(1), width: bw.toFixed(1), height: (sy(a) - sy(a + r)).toFixed(1) }));
  }
  chart.append(bars);
  if (c0.estimate) {
    const y = sr(doc.limiter.limit);
    chart.append(svg("line", { class: "line c3 dashed", x1: box.x, x2: box.x + box.w, y1: y, y2: y }));
  }
  chart.append(polyline(doc.sample_times.map((t, i) => [sx(t), sr(Math.min(line.values[i], lineMax))]).filter((p) => Number.isFinite(p[1])), "c0 estimate"));
  legend($("whatif-legend"), [["s0", "allowed"], ["s1", "refused"], ["c0", line.label + " (right axis)"]]
    .concat(c0.estimate ? [["c3", "the limit"]] : []));
  const first = c0.first_refused_seconds;
  $("whatif-summary").textContent = doc.limiter.algorithm + ": " + doc.allowed + " of " + doc.attempts + " attempts allowed" +
    (first === null ? ", none refused" : ", first refused at " + fmt(first) + " s");
  chart.setAttribute("data-attempts", String(doc.attempts));
}

// ---- loop ----

async function tick() {
  try {
    await Promise.all([refreshHotKeys(), refreshRates()]);
    $("status").textContent = "live";
    $("status").className = "status live";
  } catch (e) {
    haveHistory = false; // the server may have restarted, or the page slept: ask for its samples again
    $("status").textContent = "disconnected";
    $("status").className = "status down";
  }
}

document.addEventListener("DOMContentLoaded", () => {
  const form = $("whatif");
  form.addEventListener("submit", runWhatIf);
  form.addEventListener("change", () => showFields(form));
  showFields(form);
  refreshRules().catch(() => {});
  setInterval(() => refreshRules().catch(() => {}), 5000);
  tick();
  setInterval(tick, POLL_MS);
});
