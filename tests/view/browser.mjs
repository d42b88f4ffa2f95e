// browser.mjs ONIGPU OUTDIR - the live view in a real browser (CTest
// view_browser, docs/view.md): starts `onigpu run --view 127.0.0.1:0` with a
// token, drives Debian's headless chromium through the DevTools protocol
// (playwright-core, tests/view/package.json; no browser of its own) and
// checks: the page loads without console errors, the counters and traces
// update, a stimulus appears, the threshold changes from the page (and the
// run says so), bad control requests get 4xx, the summary comes at the end.
// Screenshots go to OUTDIR. Exit 0 passed, 1 failed, 77 skipped (no
// chromium, or playwright-core not installed: tools/deps.sh does both).
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const [onigpu, outdir] = process.argv.slice(2);
if (!onigpu || !outdir) {
  console.error('usage: browser.mjs ONIGPU OUTDIR');
  process.exit(2);
}
const chromiumPath = process.env.CHROMIUM || '/usr/bin/chromium';
if (!existsSync(chromiumPath)) {
  console.log(`SKIP: no chromium at ${chromiumPath} (Debian: apt-get install chromium; tools/deps.sh does it)`);
  process.exit(77);
}
let chromium;
try {
  ({ chromium } = createRequire(path.join(here, 'package.json'))('playwright-core'));
} catch (e) {
  console.log('SKIP: playwright-core is not installed in tests/view (tools/deps.sh runs npm ci there)');
  process.exit(77);
}

let failed = 0;
function check(ok, what) {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failed++;
}
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

mkdirSync(outdir, { recursive: true });
const token = 'view-test-' + process.pid + '-' + Date.now();
const tokenFile = path.join(outdir, 'token');
writeFileSync(tokenFile, token + '\n', { mode: 0o600 });

// the run: long enough for the checks below, on the CPU backend (no GPU in CI)
// two probes: the page draws both and traces across them
const run = spawn(onigpu, ['run', '--backend', 'cpu', '--block', '30', '--seconds', '24', '--probes', '2',
  '--view', '127.0.0.1:0', '--view-token', tokenFile], { stdio: ['ignore', 'pipe', 'pipe'] });
let out = '';
run.stdout.on('data', (d) => { out += d; });
run.stderr.on('data', (d) => { out += d; });
const exited = new Promise((r) => run.on('exit', (code) => r(code)));

let url = null;
for (let i = 0; i < 300 && !url; i++) {
  const m = /live view at (http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
  if (m) url = m[1];
  else await sleep(100);
}
if (!url) {
  console.log('FAIL the run printed no address of its view:\n' + out);
  run.kill('SIGTERM');
  process.exit(1);
}
console.log('view at ' + url);

// requests the page never makes: they must be refused and change nothing
async function post(body, tok) {
  const headers = { 'Content-Type': 'text/plain' };
  if (tok !== undefined) headers['X-Onigpu-Token'] = tok;
  const r = await fetch(url + 'control', { method: 'POST', headers, body });
  return r.status;
}
check(await post('k=6') === 403, 'POST /control without a token: 403');
check(await post('k=6', token + 'x') === 403, 'POST /control with a wrong token: 403');
check(await post('k=1000', token) === 400, 'POST /control k=1000: 400');
check(await post('colour=red', token) === 400, 'POST /control with an unknown key: 400');
check((await fetch(url + '../etc/passwd')).status === 404, 'GET a path that is no page: 404');
check((await fetch(url, { method: 'PUT', body: 'x' })).status === 405, 'PUT: 405');

const browser = await chromium.launch({ executablePath: chromiumPath, chromiumSandbox: false,
  args: ['--disable-gpu', '--disable-dev-shm-usage'] });
const page = await browser.newPage({ viewport: { width: 1280, height: 1000 } });
const errors = [];
page.on('console', (m) => { if (m.type() === 'error') errors.push('console: ' + m.text()); });
page.on('pageerror', (e) => errors.push('page: ' + e.message));
await page.goto(url + '#token=' + encodeURIComponent(token));

const state = () => page.evaluate(() => {
  const v = window.onigpuView;
  return { ticks: v.ticks, points: v.tracePoints, spikes: v.spikes, stims: v.stims, lat: v.lat ? v.lat.n : 0,
    t: document.getElementById('st-t').textContent, fps: document.getElementById('st-fps').textContent,
    stimsText: document.getElementById('st-stims').textContent, k: document.getElementById('st-k').textContent };
});
try {
  await page.waitForFunction(() => window.onigpuView.ticks >= 5 && window.onigpuView.tracePoints > 0,
    null, { timeout: 30000 });
} catch (e) {
  check(false, 'the page got ticks with trace points within 30 s');
}
const a = await state();
await sleep(2000);
const b = await state();
console.log('page state', JSON.stringify(a), '->', JSON.stringify(b));
check(b.ticks > a.ticks, 'ticks keep coming');
check(b.points > a.points, 'trace points keep coming');
check(b.t !== a.t && b.t !== '-', 'the time counter updates');
check(b.fps !== '-', 'frames/s shown');
try {
  await page.waitForFunction(() => window.onigpuView.stims > 0 && window.onigpuView.spikes > 0, null,
    { timeout: 20000 });
  check(true, 'a stimulus and spikes appear');
} catch (e) {
  check(false, 'a stimulus and spikes appear within 20 s');
}
check(Number((await state()).stimsText) > 0, 'the stimuli counter is above 0');
check(await page.evaluate(() => window.onigpuView.hello.probes.length === 2 && window.onigpuView.probesDrawn === 2 &&
  document.getElementById('probe').width === 300), 'two probes drawn side by side');
check(await page.evaluate(() => window.onigpuView.hello.probes[1].first === 384 &&
  Math.max(...window.onigpuView.hello.channels) < 768 && window.onigpuView.status !== null), 'the second probe\'s channels from 384');
// a click on the second probe's panel traces that site (the token is in the address)
await page.click('#probe', { position: { x: 180, y: 300 } });
try {
  await page.waitForFunction(() => /^applied: channels=(\d+)/.test(document.getElementById('ctl-msg').textContent),
    null, { timeout: 5000 });
} catch (e) { /* checked below */ }
const asked = await page.evaluate(() => {
  const m = /^applied: channels=(\d+)/.exec(document.getElementById('ctl-msg').textContent);
  return { ch: m ? Number(m[1]) : -1, site: document.getElementById('site').textContent };
});
check(asked.ch >= 384 && asked.ch < 768 && /^ProbeB CH/.test(asked.site),
  `a click on ProbeB traces its site (${asked.ch}: ${asked.site})`);
// the raster by unit and back (no sorting stage runs here: no unit rows, and the note says why)
await page.selectOption('#raster-mode', 'unit');
await sleep(300);
check(await page.evaluate(() => window.onigpuView.rasterMode === 'unit' && window.onigpuView.rasterUnits === 0 &&
  /no labelled spikes/.test(document.getElementById('raster-note').textContent)), 'raster by unit: none labelled, said so');
await page.selectOption('#raster-mode', 'channel');
check(await page.evaluate(() => window.onigpuView.rasterMode === 'channel'), 'raster by channel again');
// the filtered traces: chosen on the page, drawn without errors, still coming
await page.selectOption('#trace-mode', 'filtered');
const f0 = await state();
await sleep(1000);
const f1 = await state();
check(await page.evaluate(() => window.onigpuView.filtered) === true && f1.points > f0.points,
  'filtered traces chosen and still coming');
await page.screenshot({ path: path.join(outdir, 'view-live.png') });

// the threshold from the page (the token is in the address): k = 20 noise
// SDs leaves few of the emulated units' spikes (their SNR is mostly 5-12)
check(await page.isVisible('#control'), 'the control panel is shown with the token');
const rate = async () => {
  const s0 = await state();
  await sleep(2000);
  const s1 = await state();
  return (s1.spikes - s0.spikes) / 2;
};
const before = await rate();
await page.fill('#ctl-k', '20');
await page.click('#ctl-apply');
try {
  await page.waitForFunction(() => document.getElementById('st-k').textContent === '20.0', null, { timeout: 10000 });
  check(true, 'the threshold shows k = 20.0 after the change');
} catch (e) {
  check(false, 'the threshold shows k = 20.0 within 10 s: ' + (await page.textContent('#ctl-msg')));
}
await sleep(500);
const after = await rate();
console.log(`spikes/s on the page: ${before} at k = 5, ${after} at k = 20`);
check(before > 0 && after < before / 2, 'the detector follows: spikes/s at k = 20 below half those at k = 5');

try {
  await page.waitForFunction(() => window.onigpuView.ended, null, { timeout: 40000 });
  check(true, 'the end of the run arrives');
  check(await page.isVisible('#summary'), 'the summary is shown');
  const sum = await page.textContent('#summary-table');
  check(/latency/.test(sum) && /stimulations/.test(sum), 'the summary lists latency and stimulations');
} catch (e) {
  check(false, 'the end of the run arrives within 40 s');
}
await page.screenshot({ path: path.join(outdir, 'view-end.png'), fullPage: true });
await browser.close();

const code = await Promise.race([exited, sleep(20000).then(() => 'timeout')]);
check(code === 0, `the run exited 0 (${code})`);
check(/view: threshold k=20 /.test(out), 'the run reported the threshold change');
for (const e of errors) console.log('  ' + e);
check(errors.length === 0, `no console errors (${errors.length})`);
if (code === 'timeout') run.kill('SIGKILL');
console.log(failed ? `${failed} checks failed` : 'all checks passed');
console.log('--- the run said:\n' + out);
process.exit(failed ? 1 : 0);
