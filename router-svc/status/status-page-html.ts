/**
 * The router's status page (`GET /`): one self-contained HTML document, inline CSS and JS, no CDN
 * and no build step. It polls `/v1/status` once a second and draws the hit-ratio chart (inline
 * SVG), the instance table (with each instance's served models, cache-identity §1), the tokenizer
 * in use and each model's (§5), and the stream table.
 *
 * Every string from the status JSON (instance names come from etcd, errors from engines) reaches
 * the DOM through `textContent`, `dataset` or `setAttribute` only — never through innerHTML — and
 * the Content-Security-Policy allows exactly this page's script and style (by hash), fetches to
 * the same origin and nothing else, so even a bug there could not run injected script.
 */
import { createHash } from 'node:crypto';

const STYLE = `
:root { --fg: #1d232b; --muted: #5b6672; --line: #d9dee4; --bg: #f5f7f9; --ok: #17803d; --warn: #a35d00; --bad: #b42318; --accent: #2456c7; }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.4 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; color: var(--fg); background: var(--bg); }
header { display: flex; flex-wrap: wrap; align-items: baseline; gap: 8px 20px; padding: 12px 20px; background: #1d232b; color: #fff; }
header h1 { margin: 0; font-size: 18px; font-weight: 600; }
header .meta { color: #c9d1da; font-size: 13px; }
header .meta b { color: #fff; font-weight: 600; }
main { padding: 16px 20px; display: grid; gap: 16px; max-width: 1400px; }
section { background: #fff; border: 1px solid var(--line); border-radius: 6px; padding: 12px 14px; }
h2 { margin: 0 0 8px; font-size: 15px; font-weight: 600; }
h2 .count { color: var(--muted); font-weight: 400; }
table { width: 100%; border-collapse: collapse; font-variant-numeric: tabular-nums; }
th, td { text-align: left; padding: 5px 8px; border-bottom: 1px solid var(--line); white-space: nowrap; }
th { font-size: 12px; color: var(--muted); font-weight: 600; text-transform: uppercase; letter-spacing: .03em; }
td.num, th.num { text-align: right; }
td.err { white-space: normal; color: var(--bad); max-width: 420px; word-break: break-word; }
td.mono { font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px; }
tbody tr:nth-child(even) { background: #fafbfc; }
.empty td { color: var(--muted); font-style: italic; }
.badge { display: inline-block; padding: 1px 7px; border-radius: 10px; font-size: 12px; font-weight: 600; background: #eef1f4; color: var(--muted); }
.badge.ok { background: #e3f4e8; color: var(--ok); }
.badge.warn { background: #fdf0dc; color: var(--warn); }
.badge.bad { background: #fde7e5; color: var(--bad); }
.bar { display: inline-block; vertical-align: middle; width: 70px; height: 8px; margin-left: 6px; background: #eef1f4; border-radius: 4px; overflow: hidden; }
.bar i { display: block; height: 100%; background: var(--accent); }
#banner, #fetch-error { display: none; padding: 8px 20px; background: #fde7e5; color: var(--bad); font-weight: 600; }
#banner.shown, #fetch-error.shown { display: block; }
.chart-head { display: flex; justify-content: space-between; align-items: baseline; flex-wrap: wrap; gap: 8px; }
.chart-head .legend { color: var(--muted); font-size: 13px; }
.chart-head .legend b { color: var(--fg); }
svg { display: block; width: 100%; height: 200px; }
svg .grid { stroke: #e6e9ed; stroke-width: 1; }
svg .axis { fill: var(--muted); font-size: 11px; }
svg .line { fill: none; stroke: var(--accent); stroke-width: 2; }
svg .point { fill: var(--accent); }
svg .none { fill: var(--muted); font-size: 13px; }
footer { padding: 0 20px 16px; color: var(--muted); font-size: 12px; }
`;

// No template literals in the script: it lives inside one here.
const SCRIPT = `
'use strict';
var POLL_MS = 1000;
var WINDOW_S = 120;
var SVG_NS = 'http://www.w3.org/2000/svg';
var H = 200, L = 40, R = 14, T = 10, B = 24;

function byId(id) { return document.getElementById(id); }
function text(el, s) { el.textContent = String(s); return el; }
function cell(tr, value, cls) {
  var td = document.createElement('td');
  td.textContent = String(value);
  if (cls) td.className = cls;
  tr.appendChild(td);
  return td;
}
function badge(td, label, kind) {
  var span = document.createElement('span');
  span.className = 'badge' + (kind ? ' ' + kind : '');
  span.textContent = String(label);
  td.appendChild(span);
  return span;
}
function stateKind(state) { return state === 'ACTIVE' ? 'ok' : state === 'LEASE_LOST' ? 'warn' : 'bad'; }
function svg(name, attrs, parent) {
  var el = document.createElementNS(SVG_NS, name);
  for (var k in attrs) el.setAttribute(k, String(attrs[k]));
  if (parent) parent.appendChild(el);
  return el;
}
function fmtAge(ms) {
  if (ms === null || ms === undefined) return 'never';
  return ms < 1000 ? Math.round(ms) + ' ms' : (ms / 1000).toFixed(1) + ' s';
}

function renderHeader(s) {
  text(byId('policy'), s.policy.name);
  text(byId('epoch'), s.view.epoch || '(none)');
  text(byId('version'), s.view.version);
  var fresh = byId('freshness');
  fresh.replaceChildren();
  badge(fresh, s.view.stale ? 'stale' : 'fresh', s.view.stale ? 'bad' : 'ok');
  fresh.dataset.stale = String(s.view.stale);
  text(byId('heard'), fmtAge(s.view.since_heard_ms));
  var banner = byId('banner');
  if (s.view.stale) {
    banner.textContent = 'Directory view stale: no cache credit, routing by load only' + (s.view.stale_reason ? ' (' + s.view.stale_reason + ')' : '');
    banner.className = 'shown';
  } else {
    banner.className = '';
  }
}

function renderInstances(s) {
  var body = byId('instances').tBodies[0];
  var rows = [];
  s.instances.forEach(function (i) {
    var tr = document.createElement('tr');
    tr.dataset.name = i.name;
    cell(tr, i.name, 'mono name');
    cell(tr, i.role ? i.type + ' / ' + i.role : i.type, 'type');
    cell(tr, modelsText(i.models), 'models');
    cell(tr, i.source || '-', 'source');
    badge(cell(tr, '', 'state'), i.state, stateKind(i.state));
    badge(cell(tr, '', 'schedulable'), i.candidate ? 'candidate' : i.schedulable ? 'no load report' : 'not schedulable', i.candidate ? 'ok' : 'warn');
    if (i.load) {
      cell(tr, i.load.waiting_requests_num, 'num waiting');
      var gpu = cell(tr, (i.load.gpu_cache_usage_perc * 100).toFixed(1) + '%', 'num gpu');
      var bar = document.createElement('span');
      bar.className = 'bar';
      var fill = document.createElement('i');
      fill.style.width = Math.max(0, Math.min(100, i.load.gpu_cache_usage_perc * 100)) + '%';
      bar.appendChild(fill);
      gpu.appendChild(bar);
    } else {
      cell(tr, '-', 'num waiting');
      cell(tr, '-', 'num gpu');
    }
    cell(tr, i.dp_size, 'num dp');
    cell(tr, i.incarnation_id || '-', 'mono incarnation');
    rows.push(tr);
  });
  if (rows.length === 0) rows.push(emptyRow(10, 'no instances in the view'));
  body.replaceChildren.apply(body, rows);
  text(byId('instance-count'), '(' + s.instances.length + ')');
}

function modelsText(models) {
  if (!models) return 'unknown (any model)';
  if (models.length === 0) return 'none';
  return models.map(function (m) { return m.parent ? m.name + ' (adapter of ' + m.parent + ')' : m.name; }).join(', ');
}

function engineText(e) {
  return e ? e.engine + (e.reason ? ' (' + e.reason + ')' : '') + ', ' + e.shadow_checks + ' shadow checks, ' + e.mismatches + ' differences' : '-';
}

function renderModelTokenizers(s) {
  var body = byId('model-tokenizers').tBodies[0];
  var rows = [];
  (s.model_tokenizers || []).forEach(function (m) {
    var tr = document.createElement('tr');
    tr.dataset.model = m.model;
    var t = m.tokenizer;
    cell(tr, m.model, 'mono model');
    cell(tr, t.path, 'mono path');
    cell(tr, t.vocab_size, 'num vocab');
    cell(tr, t.fingerprint, 'mono fingerprint');
    cell(tr, t.chat_template || 'none: chat requests are routed by load', 'mono template');
    cell(tr, engineText(t.template_engine), 'engine');
    rows.push(tr);
  });
  if (rows.length === 0) rows.push(emptyRow(6, 'no --models_file: every model uses the tokenizer above'));
  body.replaceChildren.apply(body, rows);
}

function renderStreams(s) {
  var body = byId('streams').tBodies[0];
  var rows = [];
  s.streams.forEach(function (st) {
    var tr = document.createElement('tr');
    tr.dataset.instance = st.instance_name;
    tr.dataset.rank = String(st.dp_rank);
    cell(tr, st.instance_name, 'mono instance');
    cell(tr, st.dp_rank, 'num rank');
    badge(cell(tr, '', 'sync'), st.synchronized ? 'synchronized' : 'unsynchronized', st.synchronized ? 'ok' : 'bad');
    cell(tr, st.sequence, 'num sequence');
    cell(tr, st.device_blocks, 'num device');
    cell(tr, st.host_blocks, 'num host');
    cell(tr, st.block_size, 'num block-size');
    cell(tr, st.error, 'err');
    rows.push(tr);
  });
  if (rows.length === 0) rows.push(emptyRow(8, 'no KV event streams: no cache credit'));
  body.replaceChildren.apply(body, rows);
  text(byId('stream-count'), '(' + s.streams.length + ')');
}

function emptyRow(span, msg) {
  var tr = document.createElement('tr');
  tr.className = 'empty';
  var td = cell(tr, msg);
  td.colSpan = span;
  return tr;
}

function renderChart(s) {
  var chart = byId('hit-ratio-chart');
  chart.replaceChildren();
  // One user unit per CSS pixel: points stay round and labels unstretched at any page width.
  var W = Math.max(320, Math.round(chart.clientWidth || 800));
  chart.setAttribute('viewBox', '0 0 ' + W + ' ' + H);
  var pw = W - L - R, ph = H - T - B;
  var t1 = s.now_ms, t0 = t1 - WINDOW_S * 1000;
  function x(t) { return L + ((t - t0) / (t1 - t0)) * pw; }
  function y(v) { return T + (1 - v) * ph; }
  [0, 0.25, 0.5, 0.75, 1].forEach(function (v) {
    svg('line', { x1: L, x2: W - R, y1: y(v), y2: y(v), class: 'grid' }, chart);
    text(svg('text', { x: L - 6, y: y(v) + 4, 'text-anchor': 'end', class: 'axis' }, chart), v.toFixed(2));
  });
  [120, 90, 60, 30, 0].forEach(function (ago) {
    text(svg('text', { x: x(t1 - ago * 1000), y: H - 6, 'text-anchor': 'middle', class: 'axis' }, chart), ago === 0 ? 'now' : '-' + ago + ' s');
  });
  var pts = s.hit_ratio.points.filter(function (p) { return p.count > 0 && p.t_ms >= t0; });
  var gapMs = s.hit_ratio.interval_ms * 1.5;
  var path = '', prev = null;
  pts.forEach(function (p) {
    var move = prev === null || p.t_ms - prev.t_ms > gapMs;
    path += (move ? 'M' : 'L') + x(p.t_ms).toFixed(1) + ',' + y(p.mean).toFixed(1) + ' ';
    prev = p;
  });
  if (path) svg('path', { d: path, class: 'line' }, chart);
  pts.forEach(function (p) {
    var c = svg('circle', { cx: x(p.t_ms).toFixed(1), cy: y(p.mean).toFixed(1), r: 3, class: 'point' }, chart);
    c.dataset.mean = String(p.mean);
    c.dataset.count = String(p.count);
    text(svg('title', {}, c), 'mean ' + p.mean.toFixed(3) + ' over ' + p.count + ' decision' + (p.count === 1 ? '' : 's') + ' (max ' + p.max.toFixed(3) + ')');
  });
  if (pts.length === 0) {
    text(svg('text', { x: L + pw / 2, y: T + ph / 2, 'text-anchor': 'middle', class: 'none' }, chart), 'no routing decisions in the last ' + WINDOW_S + ' s');
  }
  var last = pts.length > 0 ? pts[pts.length - 1] : null;
  text(byId('last-ratio'), last ? last.mean.toFixed(3) : '-');
  text(byId('last-count'), last ? last.count : 0);
  text(byId('decisions'), s.hit_ratio.decisions);
}

function renderTokenizer(s) {
  var t = s.tokenizer;
  var perModel = (s.model_tokenizers || []).length > 0;
  text(byId('tok-path'), t ? t.path : perModel ? 'none: models without an entry below are routed by load' : 'none: text and chat requests are routed by load');
  text(byId('tok-vocab'), t ? t.vocab_size : '-');
  text(byId('tok-fingerprint'), t ? t.fingerprint : '-');
  text(byId('tok-template'), t ? (t.chat_template || 'none: chat requests are routed by load') : '-');
  text(byId('tok-threads'), t ? t.render_threads + (t.segment_cache ? ', segment cache on' : ', segment cache off') : '-');
  text(byId('tok-engine'), engineText(t && t.template_engine));
  var u = s.untokenized_requests || { total: 0, by_reason: {} };
  var parts = [];
  for (var r in u.by_reason) if (u.by_reason[r] > 0) parts.push(r + ' ' + u.by_reason[r]);
  text(byId('tok-untokenized'), u.total + (parts.length ? ' (' + parts.join(', ') + ')' : ''));
}

function render(s) {
  renderHeader(s);
  renderTokenizer(s);
  renderModelTokenizers(s);
  renderChart(s);
  renderInstances(s);
  renderStreams(s);
  text(byId('updated'), new Date(s.now_ms).toISOString());
  document.body.dataset.polls = String(Number(document.body.dataset.polls || '0') + 1);
}

function poll() {
  fetch('/v1/status', { cache: 'no-store', headers: { accept: 'application/json' } })
    .then(function (res) {
      if (!res.ok) throw new Error('HTTP ' + res.status);
      return res.json();
    })
    .then(function (s) {
      render(s);
      byId('fetch-error').className = '';
    })
    .catch(function (e) {
      var el = byId('fetch-error');
      el.textContent = 'Cannot read /v1/status: ' + (e && e.message ? e.message : String(e)) + ' (retrying)';
      el.className = 'shown';
    })
    .then(function () { setTimeout(poll, POLL_MS); });
}
poll();
`;

const BODY = `
<header>
  <h1>router-svc status</h1>
  <span class="meta">policy <b id="policy">-</b></span>
  <span class="meta">view epoch <b id="epoch">-</b> version <b id="version">-</b></span>
  <span class="meta">view <span id="freshness"></span> last heard <b id="heard">-</b> ago</span>
</header>
<div id="banner"></div>
<div id="fetch-error"></div>
<main>
  <section>
    <div class="chart-head">
      <h2>KV hit ratio of routed requests <span class="count">(mean per second, last 120 s)</span></h2>
      <span class="legend">latest second: mean <b id="last-ratio">-</b> over <b id="last-count">0</b> decisions; <b id="decisions">0</b> decisions since start</span>
    </div>
    <svg id="hit-ratio-chart" viewBox="0 0 800 200" role="img" aria-label="kv hit ratio per second"></svg>
  </section>
  <section>
    <h2>Instances <span class="count" id="instance-count"></span></h2>
    <table id="instances">
      <thead><tr><th>Instance</th><th>Type / role</th><th>Models</th><th>Source</th><th>State</th><th>Routing</th><th class="num">Waiting</th><th class="num">GPU KV usage</th><th class="num">DP size</th><th>Incarnation</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section>
    <h2>Tokenizer <span class="count">(--tokenizer: every model without its own)</span></h2>
    <table id="tokenizer">
      <tbody>
        <tr><th>Directory</th><td class="mono" id="tok-path">-</td></tr>
        <tr><th>Vocabulary</th><td class="num" id="tok-vocab">-</td></tr>
        <tr><th>Fingerprint (sha256 of tokenizer.json + template)</th><td class="mono" id="tok-fingerprint">-</td></tr>
        <tr><th>Chat template</th><td class="mono" id="tok-template">-</td></tr>
        <tr><th>Render threads</th><td id="tok-threads">-</td></tr>
        <tr><th>Template engine</th><td id="tok-engine">-</td></tr>
        <tr><th>Routed without token ids</th><td id="tok-untokenized">0</td></tr>
      </tbody>
    </table>
  </section>
  <section>
    <h2>Tokenizers per model <span class="count">(--models_file; an adapter uses its parent's)</span></h2>
    <table id="model-tokenizers">
      <thead><tr><th>Model</th><th>Directory</th><th class="num">Vocabulary</th><th>Fingerprint</th><th>Chat template</th><th>Template engine</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
  <section>
    <h2>KV event streams <span class="count" id="stream-count"></span></h2>
    <table id="streams">
      <thead><tr><th>Instance</th><th class="num">DP rank</th><th>Sync</th><th class="num">Sequence</th><th class="num">Device blocks</th><th class="num">Host blocks</th><th class="num">Block size</th><th>Error</th></tr></thead>
      <tbody></tbody>
    </table>
  </section>
</main>
<footer>Polls <code>/v1/status</code> every second. Updated <span id="updated">never</span>.</footer>
`;

function sha256(s: string): string {
  return `'sha256-${createHash('sha256').update(s, 'utf8').digest('base64')}'`;
}

/** The page, byte for byte as served. */
export const STATUS_PAGE_HTML = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>router-svc status</title>
<style>${STYLE}</style>
</head>
<body>${BODY}<script>${SCRIPT}</script>
</body>
</html>
`;

/**
 * Only this page's own script and style (by hash) run; it may fetch its own origin and load
 * nothing else.
 */
export const STATUS_PAGE_CSP = [
  "default-src 'none'",
  `script-src ${sha256(SCRIPT)}`,
  `style-src ${sha256(STYLE)}`,
  "connect-src 'self'",
  "img-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');
