// The queue console in a real headless Chromium (Debian's chromium, driven
// by playwright-core) against a real `fenec serve --clock manual`
// (bin/fenec, or FENEC_BIN): counts by state, a redrive through the page,
// a scoped token, a wrong token, 100 000 jobs, and CORS from pages of
// other origins through the JS SDK. It writes docs/console.png.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createServer } from 'node:http';
import { createInterface } from 'node:readline';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium } from 'playwright-core';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const FENEC_BIN = process.env.FENEC_BIN ?? here('../../bin/fenec');
const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const SCREENSHOT = here('../../docs/console.png');
const SECRET = '0123456789abcdef0123456789abcdef';
const QUEUE = 'create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)';

let browser;
const servers = [];

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  await Promise.all(servers.map((s) => s.stop()));
});

/** Starts `fenec serve --clock manual` on a free port with more flags. */
async function startFenec(...args) {
  if (!existsSync(FENEC_BIN)) throw new Error(`no fenec binary at ${FENEC_BIN}: set FENEC_BIN=/path/to/fenec, or install Go and run make build (make dist writes dist/fenec)`);
  const child = spawn(FENEC_BIN, ['serve', '--clock', 'manual', '--http', '127.0.0.1:0', '--file', ':memory:', '--sync', 'off', ...args], {
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const stderr = [];
  child.stderr.on('data', (b) => stderr.push(b.toString()));
  const addr = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`fenec did not start: ${stderr.join('')}`)), 15_000);
    child.once('exit', (code) => reject(new Error(`fenec exited (${code}): ${stderr.join('')}`)));
    createInterface({ input: child.stdout }).on('line', (line) => {
      const m = /^listening on (\S+)/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[1]);
      }
    });
  });
  const s = {
    url: `http://${addr}`,
    stop: () =>
      child.exitCode !== null || child.signalCode !== null
        ? Promise.resolve()
        : new Promise((resolve) => {
            child.once('exit', resolve);
            child.kill('SIGTERM');
          }),
  };
  servers.push(s);
  return s;
}

/** POSTs to the server as `token`; answers the status and the parsed body. */
async function post(s, token, path, body) {
  const r = await fetch(s.url + path, {
    method: 'POST',
    headers: { Authorization: `Bearer ${token}` },
    body: JSON.stringify(body),
  });
  return { status: r.status, body: await r.json() };
}

async function q(s, token, query, params = []) {
  const r = await post(s, token, '/query', { query, params });
  assert.equal(r.status, 200, `${query}: ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Puts n jobs, doc(i) the i-th FenecQL object, 10 000 a statement. */
async function put(s, token, coll, n, doc) {
  for (let i = 0; i < n; i += 10_000) {
    const docs = [];
    for (let k = i; k < Math.min(n, i + 10_000); k++) docs.push(doc(k));
    await q(s, token, `put ${coll} [${docs.join(', ')}]`);
  }
}

/** A fresh page whose console errors and uncaught exceptions are kept. */
async function newPage() {
  const context = await browser.newContext({ viewport: { width: 1400, height: 820 }, locale: 'en-US', timezoneId: 'UTC' });
  const page = await context.newPage();
  const errors = [];
  page.on('console', (m) => {
    if (m.type() === 'error') errors.push(`${m.text()} (${m.location().url})`);
  });
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  return { page, errors, close: () => context.close() };
}

/** Opens the console and gives it the token. */
async function login(page, s, token) {
  await page.goto(`${s.url}/console`);
  await page.fill('#token', token);
  await page.click('#token-form button[type=submit]');
}

/** Waits until the page shows each state's count of the queue. */
async function waitCounts(page, queue, want) {
  for (const [state, n] of Object.entries(want)) {
    await page.waitForSelector(`tr[data-queue="${queue}"] td[data-state="${state}"][data-count="${n}"]`, { timeout: 10_000 });
  }
}

test('the console shows each state\'s count, and a redrive through it makes the dead letter ready', async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'admin', QUEUE);
  await q(s, 'admin', 'create collection mail (payload json, run_at timestamp @sorted, owner text, attempts int, error text)');
  await q(s, 'admin', 'create collection notes (body text)'); // no run_at: no queue
  await put(s, 'admin', 'jobs', 3, (i) => `{payload: {"to": "r${i}@example.com"}, run_at: now() - ${5000 + i}, attempts: 0}`);
  await put(s, 'admin', 'jobs', 4, (i) => `{payload: {"to": "d${i}@example.com"}, run_at: now() + 3600000, attempts: 0}`);
  await put(s, 'admin', 'jobs', 5, (i) => `{payload: {"to": "k${i}@example.com"}, run_at: null, attempts: 1}`);
  await put(s, 'admin', 'jobs', 2, (i) => `{payload: {"to": "x${i}@example.com"}, run_at: now(), attempts: 4}`);
  await put(s, 'admin', 'jobs', 2, (i) => `{payload: {"to": "l${i}@example.com"}, run_at: now(), attempts: 0}`);
  await put(s, 'admin', 'mail', 7, (i) => `{payload: {"n": ${i}}, run_at: now(), attempts: 0}`);
  // Two claimed and failed to death, two claimed and held: the queue page's statements.
  await q(s, 'admin', 'set jobs {owner: "w1", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() and attempts = 4 order run_at limit 2');
  await q(s, 'admin', 'set jobs {owner: null, error: "smtp timeout", run_at: case when attempts >= 5 then null else now() + 1000 end} where owner = "w1"');
  await q(s, 'admin', 'set jobs {owner: "w2", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at desc limit 2');
  const moved = await post(s, 'admin', '/_clock', { advance_ms: 20000 });
  assert.equal(moved.status, 200);

  const { page, errors, close } = await newPage();
  // The page's clock shows the server's, so the picture is the same each run.
  await page.clock.setFixedTime(new Date('2026-05-03T09:20:20Z'));
  await login(page, s, 'admin');
  await waitCounts(page, 'jobs', { ready: 3, leased: 2, delayed: 4, dead: 2, kept: 5 });
  await waitCounts(page, 'mail', { ready: 7, leased: 0, delayed: 0, dead: 0, kept: 0 });
  assert.deepEqual(await page.$$eval('tr[data-queue]', (trs) => trs.map((t) => t.dataset.queue)), ['jobs', 'mail']);
  // The oldest ready job was put 5.002 s before the start and the clock moved 20 s.
  assert.equal(await page.textContent('tr[data-queue="jobs"] td.age'), '25.0 s');
  assert.equal(await page.evaluate(() => sessionStorage.getItem('fenec.console.token')), 'admin');
  assert.ok(!page.url().includes('admin'), 'the token is in the URL');

  // The dead letters, then one redriven.
  await page.click('tr[data-queue="jobs"] td[data-state="dead"] button');
  await page.waitForSelector('#jobs-body tr[data-id]');
  const dead = await page.$$eval('#jobs-body tr[data-id]', (trs) => trs.map((t) => Number(t.dataset.id)));
  assert.equal(dead.length, 2);
  await page.click(`#jobs-body tr[data-id="${dead[0]}"]`);
  assert.match(await page.textContent('#detail-json'), /"error": "smtp timeout"/);
  await page.click('#act-redrive');
  await waitCounts(page, 'jobs', { ready: 4, dead: 1 });
  const [job] = await q(s, 'admin', 'get jobs select run_at <= now() as ready, attempts, error where id = $1', [dead[0]]);
  assert.deepEqual(job, { ready: true, attempts: 0, error: null });
  assert.deepEqual(await q(s, 'admin', 'get jobs where run_at <= now() count'), [{ count: 4 }]);

  // The ready jobs, newest first, filtered, one shown: the README's picture.
  await page.click('tr[data-queue="jobs"] td[data-state="ready"] button');
  await page.selectOption('#order', 'desc');
  await page.fill('#where', 'attempts = 0');
  await page.click('#where-form button');
  await page.waitForFunction(() => document.querySelectorAll('#jobs-body tr[data-id]').length === 4);
  await page.click('#jobs-body tr[data-id]');
  await page.waitForSelector('#detail:not([hidden])');
  mkdirSync(here('../../docs'), { recursive: true });
  await page.screenshot({ path: SCREENSHOT });
  assert.deepEqual(errors, []);
  await close();
});

test('run now, release, delete and redrive all, each through the page, do what their statements say; the destructive ones ask first', async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'admin', QUEUE);
  await q(s, 'admin', `put jobs [{payload: {"n": 1}, run_at: now() + 3600000, attempts: 0},
    {payload: {"n": 2}, run_at: now() + 30000, owner: "w1:7", attempts: 1},
    {payload: {"n": 3}, run_at: now() - 1000, attempts: 0},
    {payload: {"n": 4}, run_at: null, error: "boom", attempts: 5},
    {payload: {"n": 5}, run_at: null, error: "boom", attempts: 5}]`);
  const job = async (id) => (await q(s, 'admin', 'get jobs select run_at <= now() as ready, owner, attempts, error where id = $1', [id]))[0];
  const { page, errors, close } = await newPage();
  await login(page, s, 'admin');
  await waitCounts(page, 'jobs', { ready: 1, leased: 1, delayed: 1, dead: 2, kept: 0 });
  const open = async (state, id) => {
    await page.click(`tr[data-queue="jobs"] td[data-state="${state}"] button`);
    await page.click(`#jobs-body tr[data-id="${id}"]`);
    await page.waitForSelector('#detail:not([hidden])');
  };

  await open('delayed', 1);
  await page.click('#act-run');
  await waitCounts(page, 'jobs', { ready: 2, delayed: 0 });
  assert.deepEqual(await job(1), { ready: true, owner: null, attempts: 0, error: null });

  await open('leased', 2);
  await page.click('#act-release');
  await waitCounts(page, 'jobs', { ready: 3, leased: 0 });
  assert.deepEqual(await job(2), { ready: true, owner: null, attempts: 1, error: null });

  // Declined, a delete deletes nothing; confirmed, the job is gone.
  await open('ready', 3);
  const asked = [];
  page.once('dialog', (d) => { asked.push(d.message()); void d.dismiss(); });
  await page.click('#act-delete');
  assert.equal((await q(s, 'admin', 'get jobs where id = 3 count'))[0].count, 1);
  page.once('dialog', (d) => { asked.push(d.message()); void d.accept(); });
  await page.click('#act-delete');
  await waitCounts(page, 'jobs', { ready: 2 });
  assert.deepEqual(await q(s, 'admin', 'get jobs where id = 3 count'), [{ count: 0 }]);

  await page.click('tr[data-queue="jobs"] td[data-state="dead"] button');
  await page.waitForSelector('#redrive-all:not([hidden])');
  page.once('dialog', (d) => { asked.push(d.message()); void d.dismiss(); });
  await page.click('#redrive-all');
  assert.deepEqual(await q(s, 'admin', 'get jobs where run_at is null count'), [{ count: 2 }]);
  page.once('dialog', (d) => { asked.push(d.message()); void d.accept(); });
  await page.click('#redrive-all');
  await waitCounts(page, 'jobs', { ready: 4, leased: 0, delayed: 0, dead: 0, kept: 0 });
  assert.deepEqual(await job(4), { ready: true, owner: null, attempts: 0, error: null });
  assert.deepEqual(asked, [
    'Delete this job? It cannot be undone.', 'Delete this job? It cannot be undone.',
    'Redrive every dead letter of jobs? Each is made ready now, its attempts set to 0.',
    'Redrive every dead letter of jobs? Each is made ready now, its attempts set to 0.',
  ]);
  // Each action asked for a refresh; still one loop refreshes, once a second.
  const scrapes = [];
  page.on('request', (r) => r.url().endsWith('/_metrics') && scrapes.push(r));
  await page.waitForTimeout(3500);
  assert.ok(scrapes.length >= 2 && scrapes.length <= 4, `${scrapes.length} refreshes in 3.5 s`);
  assert.deepEqual(errors, []);
  await close();
});

test('a token held to a policy sees only its queue, and a refused action shows the server\'s message', async () => {
  const policy = join(mkdtempSync(join(tmpdir(), 'fenec-console-')), 'policy.txt');
  writeFileSync(policy, 'mail read for mailops\nmail update(run_at, attempts, error) for mailops\n');
  const s = await startFenec('--token', 'admin', '--jwt-secret', SECRET, '--policy', policy);
  await q(s, 'admin', QUEUE);
  await q(s, 'admin', 'create collection mail (payload json, run_at timestamp @sorted, owner text, attempts int, error text)');
  await put(s, 'admin', 'jobs', 6, () => '{run_at: now(), attempts: 0}');
  await put(s, 'admin', 'mail', 3, () => '{run_at: now(), attempts: 0}');
  await put(s, 'admin', 'mail', 1, () => '{run_at: null, error: "boom", attempts: 5}');
  const token = await new Promise((resolve, reject) => {
    const c = spawn(FENEC_BIN, ['token', '--secret', SECRET, '--claims', '{"sub":"ops","role":"mailops"}']);
    let out = '';
    c.stdout.on('data', (b) => (out += b));
    c.on('exit', (code) => (code === 0 ? resolve(out.trim()) : reject(new Error(`fenec token: ${code}`))));
  });

  const { page, errors, close } = await newPage();
  await login(page, s, token);
  await waitCounts(page, 'mail', { ready: 3, leased: 0, delayed: 0, dead: 1, kept: 0 });
  assert.deepEqual(await page.$$eval('tr[data-queue]', (trs) => trs.map((t) => t.dataset.queue)), ['mail']);
  // Rates come from /_metrics, which is the operator's.
  assert.equal(await page.textContent('tr[data-queue="mail"] td.rate'), '—');

  // The policy lets it redrive but not delete: the server's 403 is shown.
  await page.click('tr[data-queue="mail"] td[data-state="ready"] button');
  await page.click('#jobs-body tr[data-id]');
  page.once('dialog', (d) => d.accept());
  await page.click('#act-delete');
  await page.waitForSelector('#error:not([hidden])');
  assert.equal(await page.textContent('#error'), '403: position 1: no policy rule lets this token delete from mail');
  assert.deepEqual(await q(s, 'admin', 'get mail count'), [{ count: 4 }]);
  // The only errors logged are the refusals: /_metrics asked once, and the delete.
  assert.equal(errors.length, 2, errors.join('\n'));
  assert.ok(errors.every((e) => /status of 403/.test(e)), errors.join('\n'));
  await close();
});

test('a wrong token shows the server\'s 401 message', async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'admin', QUEUE);
  const { page, errors, close } = await newPage();
  await login(page, s, 'not-the-token');
  await page.waitForSelector('#error:not([hidden])');
  assert.equal(await page.textContent('#error'), '401: invalid bearer token');
  assert.equal(await page.locator('tr[data-queue]').count(), 0);
  assert.ok(errors.length > 0 && errors.every((e) => /status of 401/.test(e)), errors.join('\n'));
  await close();
});

// CONSOLE_JOBS=1000000 runs it over a million.
const JOBS = Number(process.env.CONSOLE_JOBS ?? 100_000);

test(`${JOBS.toLocaleString('en-US')} jobs load and refresh with no error in the browser console`, async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'admin', QUEUE);
  const n = JOBS;
  await put(s, 'admin', 'jobs', n, (i) =>
    i % 10 < 6 ? `{payload: {"n": ${i}}, run_at: now() - ${i}, attempts: 0}`
    : i % 10 < 8 ? `{payload: {"n": ${i}}, run_at: now() + 60000, attempts: 0}`
    : i % 10 < 9 ? `{payload: {"n": ${i}}, run_at: now() + 30000, owner: "w1", attempts: 1}`
    : `{payload: {"n": ${i}}, run_at: null, error: "boom", attempts: 5}`);
  const { page, errors, close } = await newPage();
  const t0 = Date.now();
  await login(page, s, 'admin');
  await waitCounts(page, 'jobs', { ready: n * 0.6, delayed: n * 0.2, leased: n * 0.1, dead: n * 0.1, kept: 0 });
  const loaded = Date.now() - t0;
  await page.click('tr[data-queue="jobs"] td[data-state="ready"] button');
  await page.waitForFunction(() => document.querySelectorAll('#jobs-body tr[data-id]').length === 50);
  await page.click('#next');
  await page.waitForSelector('#page:text("page 2")');
  const paged = Date.now() - t0;
  // Refreshes keep coming: jobs acked on the server show within seconds.
  const status = await page.textContent('#status');
  await q(s, 'admin', 'del jobs where run_at <= now() order run_at limit 1000');
  await waitCounts(page, 'jobs', { ready: n * 0.6 - 1000 });
  // The thousand deleted are acks: the refresh that saw them shows a rate.
  assert.match(await page.textContent('tr[data-queue="jobs"] td.rate:nth-last-child(1)'), /^[1-9][\d.]*\/s$/);
  await page.waitForFunction((before) => document.getElementById('status').textContent !== before, status);
  await page.waitForTimeout(2500);
  assert.equal(await page.locator('#jobs-body tr[data-id]').count(), 50);
  assert.deepEqual(errors, []);
  console.log(`# ${n} jobs: counts shown ${loaded} ms after the token was given, the ready jobs' second page ${paged} ms after`);
  await close();
});

test('CORS: a page on an allowed origin calls /query through the SDK; another origin is refused by the browser', async () => {
  // The SDK, bundled for the pages of the other origins.
  const sdk = await build({
    entryPoints: [here('../../sdks/js/src/client.ts')],
    bundle: true, format: 'esm', write: false, target: 'es2022',
  });
  const app = createServer((req, res) => {
    if (req.url === '/sdk.js') {
      res.writeHead(200, { 'Content-Type': 'text/javascript' });
      res.end(sdk.outputFiles[0].contents);
      return;
    }
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><title>app</title>');
  });
  await new Promise((resolve) => app.listen(0, '127.0.0.1', resolve));
  const port = app.address().port;
  try {
    const allowed = `http://127.0.0.1:${port}`;
    const other = `http://localhost:${port}`; // another origin, the same page
    const s = await startFenec('--token', 'admin', '--cors-origin', allowed);
    await q(s, 'admin', QUEUE);

    const call = (page) => page.evaluate(async (url) => {
      const { connect, FenecError } = await import('/sdk.js');
      const db = connect(url, { token: 'admin' });
      try {
        const put = await db.query('put jobs {run_at: now(), attempts: 0}', [], { idempotencyKey: 'k1' });
        // The SDK does not hand back headers: fetch sends the put again, with the SDK's body.
        const seq = await fetch(`${url}/query`, {
          method: 'POST', headers: { Authorization: 'Bearer admin', 'Content-Type': 'application/json', 'Idempotency-Key': 'k1' },
          body: JSON.stringify({ query: 'put jobs {run_at: now(), attempts: 0}', params: [] }),
        });
        const held = await db.query('set jobs {owner: "w", run_at: now() + 30000, attempts: attempts + 1} where run_at <= now() order run_at limit 1 returning id', [], { wait: 100 });
        const batch = await db.batch([{ query: 'get jobs count', params: [] }]);
        return { ok: true, put: put.affected, putRows: put.rows ?? null, replayed: seq.headers.get('Idempotent-Replayed'), seq: seq.headers.get('Fenec-Seq'), held: held.rows, batch: batch.map((r) => r.rows) };
      } catch (e) {
        return { ok: false, code: e instanceof FenecError ? e.code : String(e), message: e.message };
      }
    }, s.url);

    const a = await newPage();
    await a.page.goto(`${allowed}/`);
    const got = await call(a.page);
    assert.equal(got.ok, true, JSON.stringify(got));
    assert.equal(got.put, 1);
    assert.equal(got.putRows, null);
    assert.equal(got.replayed, 'true'); // an exposed header, read by the page
    assert.match(got.seq, /^\d+$/);
    assert.deepEqual(got.held, [{ id: 1 }]);
    assert.deepEqual(got.batch, [[{ count: 1 }]]);
    assert.deepEqual(a.errors, []);
    await a.close();

    const b = await newPage();
    await b.page.goto(`${other}/`);
    const refused = await call(b.page);
    assert.deepEqual({ ok: refused.ok, code: refused.code }, { ok: false, code: 'network' }, JSON.stringify(refused));
    assert.ok(b.errors.some((e) => /CORS/.test(e)), b.errors.join('\n'));
    await b.close();
    // The preflight was refused, so the put was never sent.
    assert.deepEqual(await q(s, 'admin', 'get jobs count'), [{ count: 1 }]);
  } finally {
    app.close();
  }
});
