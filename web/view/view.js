// view.js - the live page of `onigpu run --view` (docs/view.md). One
// event stream (/events): "hello" (the run, the probes, the trace channels),
// "tick" every 100 ms (trace points, spikes, stimuli, rates, latency,
// status), "end" (the run's summary). Charts are uPlot's; the probe and the
// raster are plain canvases. With #token=... in the address (and a server
// started with a token) the threshold and the trace channels may change.
'use strict';

const UV_PER_BIT = 0.195;   // NP2.0e: uV a bit (src/record/onix.c)
const TRACE_S = 2;          // seconds of trace shown
const RASTER_S = 5;         // seconds of raster shown
const TRACE_GAP_MIN_UV = 20; // vertical distance between traces at least

const S = {                 // the page's state; tests read it (window.onigpuView)
  hello: null, ticks: 0, spikes: 0, stims: 0, tracePoints: 0, lastT: 0, rasterMode: 'channel', units: 0,
  status: null, lat: null, ended: false, summary: null, errors: [],
};
window.onigpuView = S;

const $ = (id) => document.getElementById(id);
const token = (() => {
  const m = /(?:^#|&)token=([^&]+)/.exec(location.hash);
  if (m) history.replaceState(null, '', location.pathname); // keep it out of the address bar
  return m ? decodeURIComponent(m[1]) : null;
})();

// --- traces: min/max of each point, spikes and stimuli drawn on top --------
let tr = { ch: [], t: [], lo: [], hi: [], flo: [], fhi: [] };
let filtered = false;       // the traces shown: raw, or through the detector's band-pass
let recentSpikes = [];      // [t, ch] of the last RASTER_S
let recentStims = [];       // t of the last RASTER_S

function resetTraces(ch) {
  tr = { ch: ch.slice(), t: [], lo: ch.map(() => []), hi: ch.map(() => []), flo: ch.map(() => []), fhi: ch.map(() => []) };
  $('traces').textContent = '';
  tracePlot = makeTracePlot(ch);
}

// the traces' spacing: 1.5 x the largest peak-to-peak in the window
let traceGap = TRACE_GAP_MIN_UV;
function traceOffset(i) { return -i * traceGap; }

function drawMarks(u) {
  const ctx = u.ctx;
  const [x0, x1] = [u.scales.x.min, u.scales.x.max];
  ctx.save();
  ctx.strokeStyle = '#d00';
  ctx.lineWidth = 2 * devicePixelRatio;
  for (const t of recentStims) { // a tick along the top edge
    if (t < x0 || t > x1) continue;
    const x = u.valToPos(t, 'x', true);
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + 12 * devicePixelRatio);
    ctx.stroke();
  }
  ctx.fillStyle = '#000';
  for (const [t, ch] of recentSpikes) {
    const i = tr.ch.indexOf(ch);
    if (i < 0 || t < x0 || t > x1) continue;
    const x = u.valToPos(t, 'x', true), y = u.valToPos(traceOffset(i) - traceGap * 0.45, 'y', true);
    ctx.beginPath();
    ctx.moveTo(x, y);
    ctx.lineTo(x - 4 * devicePixelRatio, y + 7 * devicePixelRatio);
    ctx.lineTo(x + 4 * devicePixelRatio, y + 7 * devicePixelRatio);
    ctx.fill();
  }
  ctx.restore();
}

const COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#9467bd', '#8c564b', '#17becf'];
let tracePlot = null;
function makeTracePlot(ch) {
  const series = [{ label: 's' }];
  ch.forEach((c, i) => {
    series.push({ label: chanName(c) + ' min', stroke: COLORS[i % COLORS.length], width: 1 });
    series.push({ label: chanName(c) + ' max', stroke: COLORS[i % COLORS.length], width: 1 });
  });
  const opts = {
    width: Math.min(900, $('charts').clientWidth || 900), height: 300, series,
    scales: { x: { time: false } },
    axes: [{ label: 's' }, { label: 'uV (offset per channel)', size: 70 }],
    legend: { show: false },
    hooks: { draw: [drawMarks] },
  };
  return new uPlot(opts, [[], ...series.slice(1).map(() => [])], $('traces'));
}

function addTraces(points) {
  for (const [t, chans] of points) {
    const ch = chans.map((c) => c[0]);
    if (ch.join() !== tr.ch.join()) resetTraces(ch);
    tr.t.push(t);
    chans.forEach((c, i) => {
      tr.lo[i].push(c[1] * UV_PER_BIT);
      tr.hi[i].push(c[2] * UV_PER_BIT);
      tr.flo[i].push(c[3] * UV_PER_BIT);
      tr.fhi[i].push(c[4] * UV_PER_BIT);
    });
    S.tracePoints++;
  }
  const tmax = tr.t.length ? tr.t[tr.t.length - 1] : 0;
  let k = 0;
  while (k < tr.t.length && tr.t[k] < tmax - TRACE_S) k++;
  if (k) {
    tr.t.splice(0, k);
    for (const arr of [tr.lo, tr.hi, tr.flo, tr.fhi]) arr.forEach((a) => a.splice(0, k));
  }
  if (!tracePlot) return;
  const lo = filtered ? tr.flo : tr.lo, hi = filtered ? tr.fhi : tr.hi;
  let pp = 0;
  tr.ch.forEach((_, i) => {
    for (let k = 0; k < tr.t.length; k++) pp = Math.max(pp, hi[i][k] - lo[i][k]);
  });
  traceGap = Math.max(TRACE_GAP_MIN_UV, Math.ceil((pp * 1.5) / 10) * 10);
  const data = [tr.t];
  tr.ch.forEach((_, i) => {
    const off = traceOffset(i);
    data.push(lo[i].map((v) => v + off), hi[i].map((v) => v + off));
  });
  tracePlot.setData(data, false);
  tracePlot.setScale('x', { min: Math.max(0, tmax - TRACE_S), max: Math.max(TRACE_S, tmax) });
}

$('trace-mode').addEventListener('change', (e) => {
  filtered = e.target.value === 'filtered';
  addTraces([]);
  S.filtered = filtered;
});

// --- probes: sites coloured by spikes/s -------------------------------------------
// Each probe of the loop in a panel of its own (its real columns and rows);
// the loop's channel of probe p's site c is p * 384 + c (hello's "first").
const PROBE_W = 150;         // canvas pixels a probe's panel
let rates = [];
let siteXY = [];             // canvas position of each of the loop's channels
function nchan() { return S.hello ? S.hello.probes.reduce((n, p) => n + p.sites.length, 0) : 384; }
function probeOf(ch) {       // [the probe, its own channel] of one of the loop's channels
  const ps = S.hello ? S.hello.probes : [];
  for (const p of ps) if (ch >= p.first && ch < p.first + p.sites.length) return [p, ch - p.first];
  return [null, ch];
}
function chanName(ch) {
  const [p, c] = probeOf(ch);
  return p && S.hello.probes.length > 1 ? `${p.name} CH${c + 1}` : `CH${c + 1}`;
}
function probeLayout() {
  const ps = S.hello ? S.hello.probes : [];
  const c = $('probe');
  c.width = PROBE_W * Math.max(1, ps.length);
  siteXY = [];
  ps.forEach((p, k) => {
    const xs = p.sites.map((s) => s[0]), ys = p.sites.map((s) => s[1]);
    const xmax = Math.max(1, ...xs), ymax = Math.max(1, ...ys);
    p.sites.forEach(([x, y], i) => {
      siteXY[p.first + i] = [k * PROBE_W + 30 + (x / xmax) * (PROBE_W - 60), c.height - 10 - (y / ymax) * (c.height - 30)];
    });
  });
}
function heat(r) {
  const v = Math.min(1, Math.log10(1 + r) / 2);  // 0 .. 100 spikes/s
  return `rgb(${255},${Math.round(255 * (1 - v))},${Math.round(255 * (1 - v))})`;
}
function drawProbe() {
  const c = $('probe'), ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  const ps = S.hello ? S.hello.probes : [];
  ps.forEach((p, k) => {
    ctx.fillStyle = '#eee';
    ctx.fillRect(k * PROBE_W + 20, 14, PROBE_W - 40, c.height - 14);
    ctx.fillStyle = '#333';
    ctx.fillText(p.name, k * PROBE_W + 22, 10);
  });
  siteXY.forEach(([x, y], ch) => {
    ctx.fillStyle = heat(rates[ch] || 0);
    ctx.fillRect(x - 8, y - 1.5, 16, 3);
    if (tr.ch.includes(ch)) {
      ctx.strokeStyle = '#000';
      ctx.strokeRect(x - 9, y - 2.5, 18, 5);
    }
  });
  S.probesDrawn = ps.length;
}
$('probe').addEventListener('click', (e) => {
  const r = e.target.getBoundingClientRect();
  const x = (e.clientX - r.left) * (e.target.width / r.width), y = (e.clientY - r.top) * (e.target.height / r.height);
  let best = -1, bd = 1e9;
  siteXY.forEach(([sx, sy], ch) => {
    const d = (sx - x) ** 2 + (sy - y) ** 2;
    if (d < bd) { bd = d; best = ch; }
  });
  if (best < 0) return;
  const [p, c] = probeOf(best);
  const s = p.sites[c];
  let msg = `${chanName(best)} (channel ${best}) at x ${s[0]} um, y ${s[1]} um: ${(rates[best] || 0).toFixed(1)} spikes/s`;
  if (tr.ch.includes(best)) {
    msg += ' - traced above';
  } else if (canControl()) {
    const ch = [best, ...tr.ch.filter((c) => c !== best)].slice(0, 6);
    send('channels=' + ch.join(','));
    msg += ' - trace asked for';
  } else {
    msg += ' - not traced (the trace channels change with the token)';
  }
  $('site').textContent = msg;
});

// --- raster: by channel, or by unit when a sorting stage labels the spikes ----------
let rasterMode = 'channel';
const UNIT_COLORS = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b', '#e377c2', '#17becf'];
function drawRaster(tnow) {
  const c = $('raster'), ctx = c.getContext('2d');
  ctx.clearRect(0, 0, c.width, c.height);
  const t0 = tnow - RASTER_S, xs = (t) => ((t - t0) / RASTER_S) * c.width;
  ctx.strokeStyle = 'rgba(220,0,0,0.25)';
  for (const t of recentStims) {
    ctx.beginPath();
    ctx.moveTo(xs(t), 0);
    ctx.lineTo(xs(t), c.height);
    ctx.stroke();
  }
  if (rasterMode === 'unit') {
    // a row per unit seen in the window (lowest id at the bottom); unlabelled spikes not drawn
    const units = [...new Set(recentSpikes.filter((s) => s.length > 2).map((s) => s[2]))].sort((a, b) => a - b);
    const row = new Map(units.map((u, i) => [u, i]));
    const h = c.height / Math.max(1, units.length);
    for (const [t, , u] of recentSpikes) {
      if (u === undefined) continue;
      ctx.fillStyle = UNIT_COLORS[u % UNIT_COLORS.length];
      ctx.fillRect(xs(t) - 0.5, c.height - (row.get(u) + 0.5) * h - 1, 2, Math.max(2, Math.min(h * 0.8, 8)));
    }
    S.rasterUnits = units.length;
    $('raster-note').textContent = units.length ? `(${units.length} units, last 5 s; red: stimuli)`
      : '(no labelled spikes: units come from a sorting stage)';
    return;
  }
  ctx.fillStyle = '#000';
  const n = nchan();
  for (const [t, ch] of recentSpikes) ctx.fillRect(xs(t) - 0.5, c.height - (ch / n) * c.height - 1, 2, 2);
  $('raster-note').textContent = '(all channels, last 5 s; red: stimuli)';
}
$('raster-mode').addEventListener('change', (e) => {
  rasterMode = e.target.value;
  S.rasterMode = rasterMode;
  drawRaster(S.lastT);
});

// the most active units of the last second: [unit, spikes/s, channel]
function showUnits(units) {
  const body = $('units').tBodies[0];
  body.textContent = '';
  for (const [u, r, ch] of units || []) {
    const tr_ = body.insertRow();
    tr_.insertCell().textContent = u;
    tr_.insertCell().textContent = Number(r).toFixed(1);
    tr_.insertCell().textContent = `${chanName(ch)} (${ch})`;
  }
  $('units-note').hidden = !!(units && units.length);
  S.units = units ? units.length : 0;
}

// --- rates and latency (uPlot bars) ---------------------------------------------
function bars(el, xlabel, ylabel, draw) {
  return new uPlot({
    width: 440, height: 200,
    series: [{ label: xlabel }, { label: ylabel, stroke: '#555', fill: 'rgba(80,80,160,0.5)',
      paths: uPlot.paths.bars({ size: [0.9, 50] }), points: { show: false } }],
    scales: { x: { time: false } },
    axes: [{ label: xlabel }, { label: ylabel, size: 50 }],
    legend: { show: false },
    hooks: draw ? { draw: [draw] } : {},
  }, [[], []], el);
}
const ratePlot = bars($('rates'), 'channel', 'spikes/s');
function drawPercentiles(u) {
  if (!S.lat) return;
  const ctx = u.ctx;
  ctx.save();
  [['p50', '#080'], ['p99', '#c60'], ['p999', '#c00']].forEach(([k, col]) => {
    const x = u.valToPos(S.lat[k], 'x', true);
    ctx.strokeStyle = col;
    ctx.lineWidth = 2;
    ctx.beginPath();
    ctx.moveTo(x, u.bbox.top);
    ctx.lineTo(x, u.bbox.top + u.bbox.height);
    ctx.stroke();
  });
  ctx.restore();
}
const latPlot = bars($('lat'), 'us', 'echoes', drawPercentiles);

// --- status ---------------------------------------------------------------------
const fmt = (x, d) => (x === null || x === undefined ? '-' : Number(x).toFixed(d));
function showStatus(st) {
  S.status = st;
  if (st.t !== undefined) $('st-t').textContent = fmt(st.t, 1);
  if (st.fps !== undefined) $('st-fps').textContent = fmt(st.fps, 0);
  if (st.keeping_up !== undefined) {
    $('st-keep').textContent = st.keeping_up ? 'yes' : 'NO';
    $('st-keep').className = st.keeping_up ? '' : 'bad';
  }
  if (st.fifo_pct !== undefined) $('st-fifo').textContent = fmt(st.fifo_pct, 1);
  if (st.behind_ms !== undefined) $('st-behind').textContent = fmt(st.behind_ms, 1);
  if (st.drops !== undefined) {
    $('st-drops').textContent = st.drops;
    $('st-drops').className = st.drops ? 'bad' : '';
  }
  if (st.stalls !== undefined) $('st-stalls').textContent = st.stalls;
  $('st-spikes').textContent = st.spikes;
  $('st-stims').textContent = st.stims_seen;
  $('st-k').textContent = fmt(st.k, 1);
  $('st-clients').textContent = st.clients;
  $('st-lost').textContent = st.view_lost;
}

function onHello(h) {
  S.hello = h;
  $('run').textContent = `backend ${h.backend}, block ${h.block} frames` +
    (h.fs_hz ? ` (${(h.block / h.fs_hz * 1e3).toFixed(2)} ms)` : '') +
    (h.gpu_stream ? ', GPU data stream' : ', default stream');
  $('traces-note').textContent = h.traces ? '(min/max per ' + h.decim + ' frames; triangles: spikes, red: stimuli)'
    : '(none: this backend reads the probe into GPU memory)';
  $('trace-mode').options[1].textContent = 'filtered (' + h.filter + ', as the detector)';
  if (h.channels.join() !== tr.ch.join()) resetTraces(h.channels);
  probeLayout();
  drawProbe();
  $('control').hidden = !canControl();
  if (canControl() && $('ctl-k').value === '' && h.k !== null) $('ctl-k').value = h.k;
}

function onTick(d) {
  S.ticks++;
  addTraces(d.traces);
  for (const s of d.spikes) recentSpikes.push(s);
  for (const t of d.stims) recentStims.push(t);
  S.spikes += d.spikes.length;
  S.stims += d.stims.length;
  let tnow = Math.max(S.lastT, tr.t.length ? tr.t[tr.t.length - 1] : 0);
  for (const s of d.spikes) tnow = Math.max(tnow, s[0]);
  for (const t of d.stims) tnow = Math.max(tnow, t);
  S.lastT = tnow;
  recentSpikes = recentSpikes.filter((s) => s[0] > tnow - RASTER_S);
  recentStims = recentStims.filter((t) => t > tnow - RASTER_S);
  rates = d.rate;
  ratePlot.setData([rates.map((_, i) => i), rates]);
  showUnits(d.units);
  if (d.lat) {
    S.lat = d.lat;
    const x = d.lat.hist.map((_, i) => (i + 0.5) * d.lat.bin_us);
    latPlot.setData([x, d.lat.hist]);
    $('lat-note').textContent = `${d.lat.n} echoes: p50 ${fmt(d.lat.p50, 1)} us, p99 ${fmt(d.lat.p99, 1)} us, ` +
      `p99.9 ${fmt(d.lat.p999, 1)} us, max ${fmt(d.lat.max, 1)} us` + (d.lat.over ? ` (${d.lat.over} past the axis)` : '');
  }
  showStatus(d.status);
  drawProbe();
  drawRaster(tnow);
  if (tracePlot) tracePlot.redraw(false, false);
}

function onEnd(sum) {
  S.ended = true;
  S.summary = sum;
  es.close();
  $('conn').textContent = 'run ended';
  $('conn').className = 'badge ended';
  const rows = [
    ['ran', sum.ran ? `${fmt(sum.seconds, 2)} s${sum.stopped ? ' (stopped early)' : ''}` : 'no'],
    ['frames', `${sum.frames} (${fmt(sum.fps, 0)} frames/s)`],
    ['keeping up', sum.keeping_up === null ? 'unknown' : sum.keeping_up ? 'yes' : 'NO'],
    ['spikes detected', sum.spikes],
    ['vs ground truth', `precision ${fmt(sum.precision, 3)}, recall ${fmt(sum.recall, 3)}, F1 ${fmt(sum.f1, 3)}`],
    ['stimulations', `${sum.stims} sent, ${sum.echoes} echoed`],
    ['latency', sum.latency && sum.latency.n ? `p50 ${fmt(sum.latency.p50_us, 1)} us, p99 ${fmt(sum.latency.p99_us, 1)} us, ` +
      `p99.9 ${fmt(sum.latency.p999_us, 1)} us, max ${fmt(sum.latency.max_us, 1)} us (${sum.latency.n} echoes)` : 'no echo'],
    ['dropped', `${sum.dropped} frames, ${sum.stalls} stalled reads`],
    ['results', sum.results || 'none written (run without --out)'],
  ];
  if (sum.error) rows.push(['error', sum.error]);
  const tab = $('summary-table');
  tab.textContent = '';
  for (const [k, v] of rows) {
    const tr_ = tab.insertRow();
    tr_.insertCell().textContent = k;
    tr_.insertCell().textContent = v;
  }
  $('summary').hidden = false;
}

// --- control (token) ------------------------------------------------------------
function canControl() { return !!(token && S.hello && S.hello.control); }
async function send(body) {
  try {
    const r = await fetch('control', { method: 'POST', headers: { 'X-Onigpu-Token': token, 'Content-Type': 'text/plain' }, body });
    const j = await r.json();
    $('ctl-msg').textContent = r.ok ? 'applied: ' + body : `refused (${r.status}): ${j.error}`;
  } catch (e) {
    $('ctl-msg').textContent = 'not sent: ' + e;
  }
}
$('ctl-apply').addEventListener('click', () => {
  const parts = [];
  if ($('ctl-k').value !== '') parts.push('k=' + $('ctl-k').value);
  if ($('ctl-ch').value.trim() !== '') parts.push('channels=' + $('ctl-ch').value.replace(/\s+/g, ''));
  if (parts.length) send(parts.join('&'));
});

// --- the stream -------------------------------------------------------------------
const es = new EventSource('events');
const parse = (f) => (ev) => {
  try {
    f(JSON.parse(ev.data));
  } catch (e) {
    S.errors.push(String(e));
    throw e;
  }
};
es.addEventListener('hello', parse(onHello));
es.addEventListener('tick', parse(onTick));
es.addEventListener('end', parse(onEnd));
es.onopen = () => { $('conn').textContent = 'live'; $('conn').className = 'badge live'; };
es.onerror = () => {
  if (S.ended) return;
  $('conn').textContent = 'connection lost: retrying';
  $('conn').className = 'badge lost';
};
