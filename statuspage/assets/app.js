// The live status page: polls status.json and draws it. Values from the
// crawl (URLs, error messages, host names) come from the web, so they are
// only ever set as text, never as markup.
"use strict";

const POLL_MS = 1000;

function $(id) { return document.getElementById(id); }

function setText(id, v) {
  const el = $(id);
  if (el) el.textContent = String(v);
}

function fmtNum(v) { return (v === undefined || v === null) ? "0" : String(v); }

function fmtRate(v) { return (v || 0).toFixed(1); }

function fmtDur(sec) {
  if (!isFinite(sec) || sec < 0) return "?";
  sec = Math.round(sec);
  const h = Math.floor(sec / 3600), m = Math.floor(sec % 3600 / 60), s = sec % 60;
  if (h > 0) return h + "h" + String(m).padStart(2, "0") + "m";
  if (m > 0) return m + "m" + String(s).padStart(2, "0") + "s";
  return s + "s";
}

function ago(t, now) { return fmtDur((now - Date.parse(t)) / 1000) + " ago"; }

// row appends a table row of cells; each cell is [text, className?].
function row(tbody, cells, key) {
  const tr = document.createElement("tr");
  if (key !== undefined) tr.dataset.key = key;
  for (const c of cells) {
    const td = document.createElement("td");
    const [text, cls] = Array.isArray(c) ? c : [c, ""];
    td.textContent = String(text);
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  tbody.appendChild(tr);
}

function fill(id, items, cells, key) {
  const tbody = $(id).tBodies[0];
  tbody.replaceChildren();
  for (const it of items || []) row(tbody, cells(it), key ? key(it) : undefined);
}

// eta estimates the time left from the records completed over the last
// ten minutes of the timeline (or all of it if shorter).
function eta(s) {
  const left = s.records - s.complete;
  if (left <= 0) return 0;
  const tl = s.timeline || [];
  if (tl.length < 2) return NaN;
  const last = tl[tl.length - 1];
  const tLast = Date.parse(last.at);
  let first = tl[0];
  for (const p of tl) { if (tLast - Date.parse(p.at) <= 600e3) { first = p; break; } }
  const dt = (tLast - Date.parse(first.at)) / 1000;
  const done = last.complete - first.complete;
  if (dt <= 0 || done <= 0) return NaN;
  return left / (done / dt);
}

const SVGNS = "http://www.w3.org/2000/svg";

function svgEl(name, attrs) {
  const el = document.createElementNS(SVGNS, name);
  for (const [k, v] of Object.entries(attrs)) el.setAttribute(k, String(v));
  return el;
}

// chart draws series (arrays of [time ms, value]) in svg; the first is
// the line, an optional second a dashed reference (the total).
function chart(svg, series, label) {
  svg.replaceChildren();
  const W = 600, H = 160, L = 48, B = 20, T = 8, R = 8;
  const pts = series.flat();
  svg.appendChild(svgEl("line", { x1: L, y1: H - B, x2: W - R, y2: H - B, class: "axis" }));
  svg.appendChild(svgEl("line", { x1: L, y1: T, x2: L, y2: H - B, class: "axis" }));
  if (pts.length < 2) return;
  const t0 = Math.min(...pts.map(p => p[0])), t1 = Math.max(...pts.map(p => p[0]));
  const vmax = Math.max(1, ...pts.map(p => p[1]));
  const x = t => L + (t1 > t0 ? (t - t0) / (t1 - t0) : 0) * (W - L - R);
  const y = v => H - B - v / vmax * (H - B - T);
  series.forEach((s, i) => {
    if (s.length < 1) return;
    svg.appendChild(svgEl("polyline", {
      points: s.map(p => x(p[0]).toFixed(1) + "," + y(p[1]).toFixed(1)).join(" "),
      class: i === 0 ? "line" : "total",
    }));
  });
  const top = svgEl("text", { x: 2, y: T + 10 });
  top.textContent = label(vmax);
  svg.appendChild(top);
  const zero = svgEl("text", { x: 2, y: H - B });
  zero.textContent = "0";
  svg.appendChild(zero);
  const span = svgEl("text", { x: W - R, y: H - 4, "text-anchor": "end" });
  span.textContent = fmtDur((t1 - t0) / 1000);
  svg.appendChild(span);
}

// RATE_WINDOW_S is the span, in seconds, the pages/s chart averages over,
// as the progress line does: pages arrive in bursts (a batch of results,
// a host's delay passing), and a rate between samples a second apart
// jumps between zero and the burst, a saw-tooth that hides the trend. A
// timeline shorter than two windows averages over half its span (at
// least RATE_MIN_WINDOW_S), so a short crawl still has a line.
const RATE_WINDOW_S = 30, RATE_MIN_WINDOW_S = 3;

// rateSeries is pages per second over the timeline tl: at each sample,
// the pages since the latest sample at least the window before it,
// divided by the time between them. Samples within the first window have
// no point.
function rateSeries(tl) {
  const t = tl.map(p => Date.parse(p.at));
  const span = t.length > 1 ? (t[t.length - 1] - t[0]) / 1000 : 0;
  const win = Math.max(RATE_MIN_WINDOW_S, Math.min(RATE_WINDOW_S, span / 2)) * 1000;
  const out = [];
  let j = 0;
  for (let i = 1; i < tl.length; i++) {
    while (j + 1 < i && t[i] - t[j + 1] >= win) j++;
    const dt = (t[i] - t[j]) / 1000;
    if (t[i] - t[j] < win || dt <= 0) continue;
    out.push([t[i], Math.max(0, tl[i].pages - tl[j].pages) / dt]);
  }
  return out;
}

function draw(s) {
  const now = Date.now();
  const st = $("state");
  st.textContent = s.state;
  st.className = "state " + s.state;
  setText("dispatcher", s.dispatcher);
  setText("run", s.run);
  setText("age", ago(s.updated, now));
  $("age").dataset.updated = s.updated;
  setText("records", fmtNum(s.records));
  setText("complete", fmtNum(s.complete));
  setText("partial", fmtNum(s.partial));
  setText("pct", s.records > 0 ? (100 * s.complete / s.records).toFixed(1) : "0.0");
  const e = eta(s);
  setText("eta", s.state === "finished" ? "done" : fmtDur(e));
  setText("pages", fmtNum(s.pages));
  setText("pages_per_sec", fmtRate(s.pages_per_sec));
  let failed = 0;
  for (const n of Object.values(s.errors || {})) failed += n;
  setText("failed", failed);
  setText("queued", fmtNum(s.queued));
  setText("in_flight", fmtNum(s.in_flight));
  setText("expired", fmtNum(s.expired));
  setText("late", fmtNum(s.late));
  setText("forged", fmtNum(s.forged || 0));
  setText("waiting_render", fmtNum(s.waiting_render));
  let rendered = 0;
  for (const m of s.members || []) rendered += m.rendered || 0;
  setText("rendered", rendered);
  const dns = s.dns || {};
  setText("dns_queries", fmtNum(dns.queries || 0));
  setText("dns_lookups", fmtNum(dns.lookups || 0));
  setText("dns_cached", fmtNum(dns.cached || 0));
  setText("dns_timeouts", fmtNum(dns.timeouts || 0));
  setText("dns_in_flight", fmtNum(dns.in_flight || 0));
  setText("dns_latency", (dns.latency_ms || 0).toFixed(1));

  const tl = s.timeline || [];
  chart($("chart-complete"), [
    tl.map(p => [Date.parse(p.at), p.complete]),
    tl.map(p => [Date.parse(p.at), p.records]),
  ], v => String(Math.round(v)));
  const rate = rateSeries(tl);
  chart($("chart-rate"), [rate], v => v.toFixed(1) + "/s");

  fill("members", s.members, m => [m.name, m.render ? "yes" : "",
    [m.in_flight, "n"], [m.capacity, "n"], [fmtRate(m.rate), "n"], [m.fetched, "n"],
    [m.failed, "n"], [m.rendered || 0, "n"], ago(m.last_seen, now)], m => m.name);
  fill("left", s.left, m => [m.name, m.reason || "", [m.fetched, "n"], ago(m.left, now)], m => m.name);
  fill("quarantined", s.quarantined, q => [q.key, q.address || "", q.why, [q.count, "n"], ago(q.first, now)], q => q.key);

  const fl = Object.entries(s.errors || {}).sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : 1));
  fill("failures", fl, f => [f[0], [f[1], "n"]], f => f[0]);
  const robots = Object.entries(s.robots || {}).sort();
  fill("robots", robots, r => [r[0], [r[1], "n"]], r => r[0]);

  fill("slow", s.slow_hosts, h => [h.host, [h.requests, "n"],
    [((h.total_seconds || 0) / Math.max(1, h.requests)).toFixed(3), "n"], [(h.max_seconds || 0).toFixed(3), "n"]], h => h.host);
  fill("backoff", s.backoff, h => [h.host, h.class || "", [h.failures, "n"],
    fmtDur((Date.parse(h.until) - now) / 1000), h.why || ""], h => h.host);
  fill("recent", s.recent_errors, r => [new Date(r.at).toLocaleTimeString(), r.class,
    [r.status || "", "n"], r.host, [r.url, "url"], r.supervisor, [r.error || "", "err"]]);
}

async function poll() {
  try {
    const resp = await fetch("status.json", { cache: "no-store" });
    if (!resp.ok) throw new Error(resp.status + " " + resp.statusText);
    const s = await resp.json();
    draw(s);
    $("conn").hidden = true;
    document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  } catch (err) {
    $("conn").hidden = false;
  }
  setTimeout(poll, POLL_MS);
}

poll();
