/**
 * The worker (docs/workers.md, "Tests every SDK has") against a real
 * `fenec serve` on the system clock: many jobs with seeded failures and a
 * dead letter, a slow job extended, a lost lease, a stop under load, a
 * server restarted mid-run; and the throughput of one worker.
 */

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { type Client, connect, expr, FenecError, type Handler, raw, worker as startWorker, type Worker, WorkerError, type WorkerOptions, type Query, type WorkerStep } from '../src/client.js';
import { ACK_WINDOW_OPTION, takesSignal } from '../src/worker.js';
import { start, type Job } from '../examples/worker.js';
import { launch, type Server } from './server.js';

/** Every worker a test starts, closed after the last test even when one fails (a running worker keeps the process up). */
const live = new Set<{ close(): Promise<void> }>();
after(() => Promise.all([...live].map((w) => w.close())).then(() => undefined));

function worker<T extends object>(jobs: Query<T>, handler: Handler<T>, opts: WorkerOptions = {}): Worker<T> {
  const w = startWorker(jobs, handler, { grace: 2000, ...opts });
  live.add(w);
  return w;
}

const QUEUE = 'create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)';

/** A fresh system-clock server with the queue, stopped after the test. */
async function queue(t: { after(fn: () => Promise<void>): void }, file?: string): Promise<{ server: Server; db: Client }> {
  const server = await launch({ clock: 'system', ...(file === undefined ? {} : { file }) });
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query(QUEUE);
  return { server, db };
}

/** Enqueues jobs `0…n-1` (`payload.n`), ready now, 250 to an insert. */
async function enqueue(db: Client, n: number, from = 0): Promise<void> {
  for (let i = 0; i < n; i += 250) {
    const docs = Array.from({ length: Math.min(250, n - i) }, (_, k) => ({ payload: { n: from + i + k }, run_at: expr('now()'), attempts: 0 }));
    await db.from('jobs').insert(docs);
  }
}

/** Polls `done` every 20 ms until it holds or `ms` pass. */
async function until(what: string, ms: number, done: () => boolean | Promise<boolean>): Promise<void> {
  const end = Date.now() + ms;
  while (!(await done())) {
    if (Date.now() > end) assert.fail(`${what}: not within ${ms} ms`);
    await sleep(20);
  }
}

/** A seeded PRNG (mulberry32), so a run's failures can be had again. */
function seeded(seed: number): () => number {
  return () => {
    seed = (seed + 0x6d2b79f5) | 0;
    let t = Math.imul(seed ^ (seed >>> 15), 1 | seed);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

interface Sent {
  query: string;
  params: unknown[];
}

/** A request a recording fetch sent: its statements, its `Fenec-Wait`, and for a claim the jobs its answer took. */
interface Sending {
  path: string;
  statements: Sent[];
  wait: string | undefined;
  claimed?: number;
}

const CLAIM = 'set jobs {owner: $1';
const ACK = 'del jobs where id in $1 and owner = $2 returning id';

/** A fetch that records each statement it sends (in `/query` and `/batch` requests) and each request. */
function recording(): { fetch: typeof fetch; sent: Sent[]; requests: Sending[] } {
  const sent: Sent[] = [];
  const requests: Sending[] = [];
  const f: typeof fetch = async (input, init) => {
    const path = new URL(String(input)).pathname;
    let req: Sending | undefined;
    if (typeof init?.body === 'string' && (path === '/query' || path === '/batch')) {
      const body = JSON.parse(init.body) as Sent & { statements: Sent[] };
      const statements = path === '/query' ? [body] : body.statements;
      sent.push(...statements);
      req = { path, statements, wait: new Headers(init.headers).get('fenec-wait') ?? undefined };
      requests.push(req);
    }
    const res = await fetch(input, init);
    if (req !== undefined && res.ok && req.statements.at(-1)!.query.startsWith(CLAIM)) {
      const body = await res.clone().json().catch(() => undefined) as unknown;
      const last = req.path === '/batch' ? (body as { results: unknown[] } | undefined)?.results.at(-1) : body;
      if (Array.isArray(last)) req.claimed = last.length;
    }
    return res;
  };
  return { fetch: f, sent, requests };
}

const quiet = (errors: [WorkerStep, unknown][]) => (err: WorkerError, step: WorkerStep) => {
  assert.ok(err instanceof WorkerError && err.step === step, `reported ${String(err)} as ${step}`);
  errors.push([step, err.cause]);
};

test('1 000 jobs, two workers of concurrency 8, a seeded tenth failing their first run: each succeeds once; a poison job is a dead letter', { timeout: 60_000 }, async (t) => {
  const { db } = await queue(t);
  await enqueue(db, 1000);
  await db.from('jobs').insert({ payload: { n: -1 }, run_at: expr('now()'), attempts: 0 });
  // A seeded tenth of the jobs fail their first run (decided up front, so a
  // run's order of handlers cannot make one job fail every attempt).
  const random = seeded(18);
  const failFirst = new Set(Array.from({ length: 1000 }, (_, n) => n).filter(() => random() < 0.1));
  const tried = new Set<number>();
  const succeeded = new Map<number, number>();
  let runs = 0;
  let inFlight = 0;
  let most = 0;
  const handler = async (job: Job) => {
    const n = (job.payload as unknown as { n: number }).n;
    runs++;
    most = Math.max(most, ++inFlight);
    try {
      await sleep(1);
      if (n === -1) throw new Error('poison: always fails');
      const first = !tried.has(n);
      tried.add(n);
      if (first && failFirst.has(n)) throw new Error(`seeded failure of job ${n}`);
      succeeded.set(n, (succeeded.get(n) ?? 0) + 1);
    } finally {
      inFlight--;
    }
  };
  const errors: [WorkerStep, unknown][] = [];
  const opts = { concurrency: 8, maxAttempts: 3, backoff: () => 20, onError: quiet(errors) };
  const workers = [worker(db.from<Job>('jobs'), handler, opts), worker(db.from<Job>('jobs'), handler, opts)];
  await until('every job acked but the poison one', 45_000, async () => (await db.from('jobs').count()) === 1
    && (await db.from('jobs').where('run_at', null).count()) === 1);
  await Promise.all(workers.map((w) => w.close()));

  assert.equal(succeeded.size, 1000, 'jobs that succeeded');
  assert.deepEqual([...succeeded].filter(([, c]) => c !== 1), [], 'jobs that succeeded more than once');
  assert.equal(runs, 1000 + failFirst.size + 3, 'runs: each job once, the seeded failures twice, the poison job three times');
  assert.ok(most <= 16 && most > 8, `${most} handlers at once`);
  const [dead] = await db.from<Job>('jobs').rows();
  assert.deepEqual([dead?.payload, dead?.owner, dead?.run_at, dead?.attempts, dead?.error],
    [{ n: -1 }, null, null, 3, 'poison: always fails']);
  assert.equal(await db.from('jobs').where(raw('owner is not null')).count(), 0, 'jobs left leased');
  // Each failed attempt is reported (the poison job's first two), the dead letter once; no fault.
  const steps = errors.map(([step]) => step);
  assert.equal(steps.filter((s) => s === 'handler').length, failFirst.size + 2, 'failed attempts reported');
  assert.deepEqual(steps.filter((s) => s !== 'handler'), ['dead_letter']);
});

test('a slow job (lease 1 s, 2.5 s of work) is extended and run once, never by the second worker', { timeout: 20_000 }, async (t) => {
  const { server, db } = await queue(t);
  const { fetch, sent } = recording();
  const client = connect(server.url, { fetch });
  const runs: string[] = [];
  const slow = (name: string) => async (job: Job, signal: AbortSignal) => {
    runs.push(`${name}:${job.id}`);
    await sleep(2500, undefined, { signal });
  };
  const a = worker(client.from<Job>('jobs'), slow('a'), { lease: 1000, wait: 500, concurrency: 1 });
  await enqueue(db, 1);
  await until('a runs the job', 5000, () => runs.length === 1);
  const b = worker(db.from<Job>('jobs'), slow('b'), { lease: 1000, wait: 500, concurrency: 1 });
  await until('the job is acked', 8000, async () => (await db.from('jobs').count()) === 0);
  await Promise.all([a.close(), b.close()]);
  assert.deepEqual(runs.map((r) => r.split(':')[0]), ['a']);
  const extends_ = sent.filter((s) => s.query === 'set jobs {run_at: now() + $1} where id in $2 and owner = $3 returning id');
  assert.ok(extends_.length >= 3, `${extends_.length} extensions in 2.5 s at a lease of 1 s`);
});

test('a handler gets an AbortSignal of its own unless it cannot read its second argument', () => {
  // No AbortSignal is made for these: arrow functions of at most one plain parameter have no `arguments`.
  for (const h of [async () => {}, async (job: unknown) => job, (job: unknown) => job, async(job: unknown) => job, (async: unknown) => async]) {
    assert.equal(takesSignal(h as Handler<never>), false, String(h));
  }
  // These could read it: a second parameter, rest or default parameters, destructuring, `arguments`, a bound or built-in function.
  const method = { handle(job: unknown) { return job; } };
  for (const h of [async (_job: unknown, signal: AbortSignal) => signal, (...args: unknown[]) => args[1], (job: unknown = 1) => job, ({ id }: { id: number }) => id,
    function (this: unknown) { return arguments[1]; }, async function (job: unknown) { return job; }, method.handle, (() => 1).bind(null), Math.max]) {
    assert.equal(takesSignal(h as Handler<never>), true, String(h));
  }
});

test('a lost lease cancels the handler, and no ack or fail is sent for the job', { timeout: 20_000 }, async (t) => {
  const { server, db } = await queue(t);
  const { fetch, sent } = recording();
  const client = connect(server.url, { fetch });
  let started = 0;
  let cancelled: unknown;
  const errors: [WorkerStep, unknown][] = [];
  const w = worker(client.from<Job>('jobs'), async (_job, signal) => {
    started = Date.now();
    await sleep(10_000, undefined, { signal }).catch((err: unknown) => {
      cancelled = signal.reason;
      throw err;
    });
  }, { lease: 1000, wait: 500, concurrency: 1, onError: quiet(errors) });
  t.after(() => w.close());
  await enqueue(db, 1);
  await until('the handler starts', 5000, () => started > 0);
  await db.query('set jobs {owner: $1}', ['the test']);
  const moved = Date.now();
  await until('the handler is cancelled', 3000, () => cancelled !== undefined);
  assert.ok(Date.now() - moved <= 1500, `cancelled ${Date.now() - moved} ms after the move`);
  assert.match(String(cancelled), /lease lost/);
  assert.deepEqual(errors.map(([step, err]) => [step, (err as { code?: string }).code]), [['lost_lease', 'unmet']]);
  await sleep(300);
  const settled = sent.filter((s) => s.query.startsWith('del jobs') || s.query.startsWith('set jobs {owner: null'));
  assert.deepEqual(settled, [], 'an ack or fail was sent');
  const [job] = await db.from<Job>('jobs').rows();
  assert.equal(job?.owner, 'the test');
});

test('stop under load: running handlers finish, and no job waits on the stopped worker', { timeout: 30_000 }, async (t) => {
  const { db } = await queue(t);
  await enqueue(db, 300);
  const running = new Set<number>();
  const finished = new Map<number, string>();
  const handler = (name: string) => async (job: Job) => {
    running.add(job.id);
    await sleep(40);
    running.delete(job.id);
    finished.set(job.id, name);
  };
  const a = worker(db.from<Job>('jobs'), handler('a'), { concurrency: 8 });
  const b = worker(db.from<Job>('jobs'), handler('b'), { concurrency: 8 });
  await until('a has run 40 jobs', 10_000, () => [...finished.values()].filter((n) => n === 'a').length >= 40);
  const runningInA = [...running];
  const stopped = Date.now();
  const closing = a.close();
  await sleep(200);
  // 200 ms after the stop, every job leased to a is one it is still running (or whose ack is on its way): none it did not start.
  const leased = (await db.from<Job>('jobs').where(raw('owner is not null')).rows()).filter((j) => j.owner?.startsWith(`${a.owner}:`));
  for (const j of leased) assert.ok(running.has(j.id) || finished.has(j.id), `job ${j.id} still leased to the stopped worker, not started`);
  await closing;
  for (const id of runningInA) assert.ok(finished.has(id), `job ${id}, running at the stop, did not finish`);
  await until('b drains the queue', 20_000, async () => (await db.from('jobs').count()) === 0);
  await b.close();
  assert.equal(finished.size, 300);
  assert.ok(Date.now() - stopped > 0);

  // An idle worker's held claim, given up at the stop, takes nothing: a job put after goes to the other worker at once.
  const idle = worker(db.from<Job>('jobs'), handler('idle'), { concurrency: 2 });
  const other = worker(db.from<Job>('jobs'), handler('other'), { concurrency: 2 });
  await sleep(200);
  await idle.close();
  const put = Date.now();
  await enqueue(db, 1, 1000);
  await until('the other worker takes the job within 200 ms', 2000, async () => (await db.from('jobs').count()) === 0);
  assert.ok(Date.now() - put < 250, `taken after ${Date.now() - put} ms`);
  await other.close();
  assert.equal([...finished.values()].filter((n) => n === 'idle').length, 0);
});

test('the server stopped for 2 s and started again on its file: the worker carries on', { timeout: 60_000 }, async (t) => {
  const dir = mkdtempSync(join(tmpdir(), 'fenec-js-worker-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const file = join(dir, 'queue.db');
  let server = await launch({ clock: 'system', file });
  t.after(() => server.stop());
  const db = connect(server.url, { timeout: 2000 });
  await db.query(QUEUE);
  await enqueue(db, 400);
  const runs = new Map<number, number>();
  const errors: [WorkerStep, unknown][] = [];
  const w = worker(db.from<Job>('jobs'), async (job) => {
    const n = (job.payload as unknown as { n: number }).n;
    runs.set(n, (runs.get(n) ?? 0) + 1);
    await sleep(5);
  }, { concurrency: 4, lease: 3000, onError: quiet(errors) });
  await until('100 jobs run', 20_000, () => runs.size >= 100);
  await server.stop();
  await sleep(2000);
  server = await launch({ clock: 'system', file, http: server.addr });
  await until('every job run and acked', 40_000, async () => runs.size === 400
    && (await db.from('jobs').count().catch(() => -1)) === 0);
  await w.close();
  assert.ok(errors.length > 0, 'the worker saw no fault');
  // Faults only — and a lost lease for an ack or fail whose first try went through before its answer was lost.
  const expected = ([step, err]: [WorkerStep, unknown]) => {
    const code = (err as { code?: string }).code ?? '';
    return ['network', 'timeout'].includes(code) || step === 'lost_lease';
  };
  assert.deepEqual(errors.filter((e) => !expected(e)).map(([s, e]) => `${s}: ${String(e)}`), []);
  const twice = [...runs].filter(([, c]) => c > 1).length;
  assert.ok(twice <= 8, `${twice} jobs run twice (at least once allows the ones in flight at the stop)`);
});

test("a proxy answering 5xx pages to every third statement of each kind: the worker retries and runs every job once", { timeout: 30_000 }, async (t) => {
  const { server, db } = await queue(t);
  await enqueue(db, 40);
  // A proxy in front of the server: of each kind of request (a claim, a
  // release, a batch of acks and a claim, …), every third answers a 503
  // page before it reaches the server — of the acks sent alone, which are
  // few (most go with a claim), every other one.
  const counts = new Map<string, number>();
  const upstream = new URL(server.url);
  const proxy = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      let kind = '';
      if (req.url === '/query' || req.url === '/batch') {
        const sent = JSON.parse(body.toString()) as { query?: string; statements?: { query: string }[] };
        kind = `${req.url} ${(sent.query ?? sent.statements?.[0]?.query ?? '').slice(0, 8)}`;
      }
      const n = (counts.get(kind) ?? 0) + 1;
      counts.set(kind, n);
      if (kind !== '' && n % (kind === '/query del jobs' ? 2 : 3) === 0) {
        res.writeHead(503, { 'Content-Type': 'text/html' }).end('<html><body>503 Service Temporarily Unavailable</body></html>');
        return;
      }
      const forward = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    proxy.closeAllConnections();
    proxy.close();
  });
  const runs = new Map<number, number>();
  const errors: [WorkerStep, unknown][] = [];
  const rec = recording();
  const w = worker(connect(`http://127.0.0.1:${(proxy.address() as AddressInfo).port}`, { fetch: rec.fetch }).from<Job>('jobs'), (job) => {
    const k = (job.payload as unknown as { n: number }).n;
    runs.set(k, (runs.get(k) ?? 0) + 1);
  }, { concurrency: 4, backoff: () => 0, onError: quiet(errors) });
  t.after(() => w.close());
  await until('every job acked', 25_000, async () => (await db.from('jobs').count()) === 0).catch(async (err: Error) => {
    const left = await db.from<Job>('jobs').rows();
    assert.fail(`${err.message}: ${runs.size} run, ${w.running} running, last sent ${JSON.stringify(rec.sent.slice(-4))}; left ${JSON.stringify(left.slice(0, 3))}; faults ${errors.slice(0, 5).map(([s, e]) => `${s}: ${String(e)}`).join('; ')}`);
  });
  await w.close();
  assert.equal(runs.size, 40);
  const steps = new Set(errors.map(([step]) => step));
  assert.ok(steps.has('claim') && steps.has('ack'), `faults reported: ${[...steps].join(', ')}`);
  for (const [, err] of errors) {
    assert.ok(err instanceof FenecError && err.code === 'unexpected' && err.status === 503, String(err));
  }
  // An ack refused by the proxy never reached the server, so no job ran twice.
  assert.deepEqual([...runs].filter(([, c]) => c !== 1), []);
});

test('throughput: one worker of concurrency 10, an empty handler', { timeout: 60_000 }, async (t) => {
  const { server, db } = await queue(t);
  const jobs = Number(process.env['FENEC_WORKER_JOBS'] ?? 3000);
  await enqueue(db, jobs);
  const { fetch, sent } = recording();
  let done = 0;
  const started = performance.now();
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), () => void done++, { concurrency: 10 });
  await until('every job acked', 50_000, async () => done === jobs && (await db.from('jobs').count()) === 0);
  const took = (performance.now() - started) / 1000;
  await w.close();
  const claims = sent.filter((s) => s.query.startsWith('set jobs {owner: $1')).length;
  t.diagnostic(`${jobs} jobs in ${took.toFixed(2)} s: ${Math.round(jobs / took)} jobs/s through one worker of concurrency 10 (${claims} claims)`);
});

test('examples/worker.ts runs its jobs', { timeout: 20_000 }, async (t) => {
  const { db } = await queue(t);
  await enqueue(db, 20);
  const sent: string[] = [];
  await db.query('set jobs {payload: {to: "ada@example.com"}}');
  const w = start(db, async (to) => void sent.push(to));
  live.add(w);
  await until('20 mails sent', 10_000, () => sent.length === 20);
  await w.close();
  assert.equal(await db.from('jobs').count(), 0);
});

test('an onError hook that throws is reported on stderr, and the worker goes on', { timeout: 30_000 }, async (t) => {
  const server = await launch({ clock: 'system' });
  t.after(() => server.stop());
  const db = connect(server.url);
  const rejections: unknown[] = [];
  const onRejection = (reason: unknown) => rejections.push(reason);
  process.on('unhandledRejection', onRejection);
  t.after(() => process.off('unhandledRejection', onRejection));
  const printed = t.mock.method(console, 'error', () => undefined);
  let told = 0;
  const ran: number[] = [];
  // No jobs collection yet: every claim is refused (404), and the hook throws on it.
  const w = worker(db.from<Job>('jobs'), (job) => {
    ran.push((job.payload as unknown as { n: number }).n);
  }, { wait: 200, onError: () => { told++; throw new Error('a broken hook'); } });
  t.after(() => w.close());
  await until('the hook told of a refused claim', 10_000, () => told > 0);
  await db.query(QUEUE);
  await enqueue(db, 3);
  await until('every job run', 20_000, async () => (await db.from('jobs').count()) === 0);
  await w.close();
  assert.deepEqual(ran.sort(), [0, 1, 2]);
  assert.deepEqual(rejections, []);
  assert.ok(printed.mock.calls.some((c) => String(c.arguments[0]).includes('the onError hook threw on claim: Error: a broken hook')),
    `printed: ${JSON.stringify(printed.mock.calls.map((c) => c.arguments))}`);
});

test('acks are batched (far fewer acks than jobs), and every claim asks for at least half the slots', { timeout: 60_000 }, async (t) => {
  const { server, db } = await queue(t);
  const jobs = 400;
  await enqueue(db, jobs);
  const { fetch, sent } = recording();
  let done = 0;
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), async () => {
    await sleep(1);
    done++;
  }, { concurrency: 10 });
  await until('every job acked', 45_000, async () => done === jobs && (await db.from('jobs').count()) === 0);
  await w.close();
  const acks = sent.filter((s) => s.query.startsWith('del jobs'));
  assert.ok(acks.every((s) => s.query === 'del jobs where id in $1 and owner = $2 returning id'), acks[0]?.query);
  const acked = acks.reduce((n, s) => n + (s.params[0] as unknown[]).length, 0);
  assert.equal(acked, jobs, 'ids acked');
  assert.ok(acks.length * 3 <= jobs, `${acks.length} acks for ${jobs} jobs`);
  const limits = sent.filter((s) => s.query.startsWith('set jobs {owner: $1')).map((s) => Number(/ limit (\d+) /.exec(s.query)?.[1]));
  assert.ok(limits.length > 0 && limits.every((n) => n >= 5 && n <= 10), `claim sizes ${limits.join(' ')}`);
  t.diagnostic(`${jobs} jobs: ${acks.length} acks, ${limits.length} claims`);
});

test('the ack window closes early once no handler runs: under a 60 s window a lone job is acked at once, a pair together', { timeout: 30_000 }, async (t) => {
  const { server, db } = await queue(t);
  const { fetch, sent } = recording();
  const acks = () => sent.filter((s) => s.query.startsWith('del jobs')).map((s) => (s.params[0] as number[]).length);
  const long = { concurrency: 4, wait: 200, [ACK_WINDOW_OPTION]: 60_000 } as WorkerOptions;
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const ended: number[] = [];
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), async (job) => {
    // Job 1 returns at once; job 2 (when it is there) waits for the gate.
    const n = (job.payload as unknown as { n: number }).n;
    if (n === 2) await gate;
    ended.push(n);
  }, long);
  // A lone job: its handler was the only one running, so its ack goes now, not after 60 s.
  await enqueue(db, 1, 0);
  await until('the lone job acked', 10_000, async () => (await db.from('jobs').count()) === 0);
  assert.deepEqual(acks(), [1]);
  // Two jobs claimed together: the first's ack waits while the second runs, then both go in one.
  await db.from('jobs').insert([{ payload: { n: 1 }, run_at: expr('now()'), attempts: 0 }, { payload: { n: 2 }, run_at: expr('now()'), attempts: 0 }]);
  await until('job 1 ended', 10_000, () => ended.includes(1));
  await sleep(300);
  assert.deepEqual(acks(), [1], 'no ack while job 2 runs');
  assert.equal(await db.from('jobs').count(), 2);
  open();
  await until('both acked', 10_000, async () => (await db.from('jobs').count()) === 0);
  assert.deepEqual(acks(), [1, 2]);
  await w.close();
});

test('a lost lease inside an ack batch is reported, and the others of the batch are acked', { timeout: 20_000 }, async (t) => {
  const { server, db } = await queue(t);
  await enqueue(db, 3);
  const { fetch, sent } = recording();
  let open!: () => void;
  const gate = new Promise<void>((resolve) => (open = resolve));
  const started: number[] = [];
  const errors: [WorkerStep, unknown][] = [];
  const reported: WorkerError[] = [];
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), async (job) => {
    started.push(job.id);
    await gate;
  }, { concurrency: 3, onError: (err, step) => { reported.push(err); quiet(errors)(err, step); } });
  await until('three handlers run', 5000, () => started.length === 3);
  const [a, b, c] = [...started].sort((x, y) => x - y) as [number, number, number];
  await db.query('set jobs {owner: $1} where id = $2', ['the test', b]);
  open();
  await until('two jobs acked', 5000, async () => (await db.from('jobs').count()) === 1);
  await w.close();
  const acks = sent.filter((s) => s.query.startsWith('del jobs'));
  assert.equal(acks.length, 1, 'one ack for the batch');
  assert.deepEqual((acks[0]!.params[0] as number[]).slice().sort((x, y) => x - y), [a, b, c]);
  assert.deepEqual(reported.map((e) => [e.step, e.jobId]), [['lost_lease', b]]);
  const [left] = await db.from<Job>('jobs').rows();
  assert.deepEqual([left?.id, left?.owner], [b, 'the test']);
});

test('acks go in the request of the next claim: with instant handlers at concurrency 10, about one request per ten jobs', { timeout: 60_000 }, async (t) => {
  const { server, db } = await queue(t);
  const jobs = 500;
  await enqueue(db, jobs);
  const { fetch, requests } = recording();
  let done = 0;
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), () => void done++, { concurrency: 10, wait: 500 });
  await until('every job acked', 45_000, async () => done === jobs && (await db.from('jobs').count()) === 0);
  await w.close();
  const batches = requests.filter((r) => r.path === '/batch');
  const lone = requests.filter((r) => r.path === '/query' && r.statements[0]!.query.startsWith('del jobs'));
  // A carried batch: the acks' statements (golden text), then the claim, not held.
  for (const b of batches) {
    assert.ok(b.statements.length > 1 && b.statements.at(-1)!.query.startsWith(CLAIM), JSON.stringify(b.statements));
    assert.ok(b.statements.slice(0, -1).every((s) => s.query === ACK), JSON.stringify(b.statements));
    assert.equal(b.wait, '0');
  }
  const acked = [...batches.flatMap((b) => b.statements.slice(0, -1)), ...lone.flatMap((r) => r.statements)]
    .reduce((n, s) => n + (s.params[0] as unknown[]).length, 0);
  assert.equal(acked, jobs, 'ids acked');
  // Up to the claim and the ack apart, every round was two requests (0.2 a job).
  const perJob = requests.length / jobs;
  assert.ok(perJob <= 0.15, `${requests.length} requests for ${jobs} jobs (${batches.length} batches, ${lone.length} acks alone)`);
  assert.ok(lone.length * 20 <= jobs, `${lone.length} acks alone`);
  t.diagnostic(`${jobs} jobs: ${requests.length} requests (${perJob.toFixed(3)} a job), ${batches.length} claims with acks, ${lone.length} acks alone`);
});

test('a lost lease inside the acks a claim carries is reported, and no ack is sent for the job again', { timeout: 20_000 }, async (t) => {
  const { server, db } = await queue(t);
  await enqueue(db, 2);
  const { fetch, requests } = recording();
  const reported: WorkerError[] = [];
  const ran: number[] = [];
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), async (job) => {
    // The first job's owner is moved while it runs: its ack finds nothing.
    if (ran.length === 0) await db.query('set jobs {owner: $1} where id = $2', ['the test', job.id]);
    ran.push(job.id);
  }, { concurrency: 1, wait: 500, onError: (err) => void reported.push(err) });
  await until('the second job acked', 10_000, async () => ran.length === 2 && (await db.from('jobs').count()) === 1);
  await until('a claim held', 10_000, () => requests.some((r) => r.wait === '500'));
  await w.close();
  const [first, second] = ran as [number, number];
  assert.deepEqual(reported.map((e) => [e.step, e.jobId]), [['lost_lease', first]]);
  const carried = requests.filter((r) => r.path === '/batch').map((r) => r.statements.slice(0, -1).map((s) => s.params[0]));
  assert.deepEqual(carried, [[[first]], [[second]]]);
  assert.deepEqual(requests.filter((r) => r.path === '/query' && r.statements[0]!.query.startsWith('del jobs')), [], 'an ack sent alone');
  const [left] = await db.from<Job>('jobs').rows();
  assert.deepEqual([left?.id, left?.owner], [first, 'the test']);
});

test('an ack refused inside the request of a claim is reported, and the claim is sent again alone', { timeout: 20_000 }, async (t) => {
  // A policy that lets the worker's token claim and read jobs but delete
  // none (docs/access.md): every ack is refused, 403 at statement 0.
  const dir = mkdtempSync(join(tmpdir(), 'fenec-js-worker-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const policy = join(dir, 'policy.txt');
  writeFileSync(policy, 'jobs read for worker\njobs update(owner, run_at, attempts) for worker\n');
  const secret = 'a-secret-of-at-least-thirty-two-bytes';
  const server = await launch({ clock: 'system', args: ['--token', 'admin', '--jwt-secret', secret, '--policy', policy] });
  t.after(() => server.stop());
  const db = connect(server.url, { token: 'admin' });
  await db.query(QUEUE);
  await enqueue(db, 1);
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ sub: 'w', role: 'worker', exp: Math.floor(Date.now() / 1000) + 3600 })}`;
  const token = `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
  const { fetch, requests } = recording();
  const reported: WorkerError[] = [];
  const ran: number[] = [];
  const w = worker(connect(server.url, { fetch, token }).from<Job>('jobs'), (job) => void ran.push(job.id), { concurrency: 1, wait: 500, onError: (err) => void reported.push(err) });
  await until('a claim held', 10_000, () => requests.some((r) => r.wait === '500'));
  await w.close();
  assert.deepEqual(reported.map((e) => [e.step, e.jobId]), [['ack', ran[0]]]);
  const cause = reported[0]!.cause;
  assert.ok(cause instanceof FenecError && cause.status === 403 && cause.code === 'forbidden' && cause.at === 0, String(cause));
  // The first claim; the ack and the next claim in one /batch, refused; that claim again alone, not held; then held.
  const held = requests.findIndex((r) => r.wait === '500');
  assert.deepEqual(requests.slice(0, held + 1).map((r) => [r.path, r.statements.map((s) => s.query.slice(0, 8)), r.wait]), [
    ['/query', ['set jobs'], '0'],
    ['/batch', ['del jobs', 'set jobs'], '0'],
    ['/query', ['set jobs'], '0'],
    ['/query', ['set jobs'], '500'],
  ]);
  assert.deepEqual(requests.filter((r) => r.statements.some((s) => s.query.startsWith('del jobs'))).length, 1, 'a refused ack is not sent again');
  assert.deepEqual(ran.length, 1);
});

test('a claim is held only once the last claim found no job; while claims take jobs they go with Fenec-Wait 0', { timeout: 30_000 }, async (t) => {
  const { server, db } = await queue(t);
  await enqueue(db, 60);
  const { fetch, requests } = recording();
  let done = 0;
  const w = worker(connect(server.url, { fetch }).from<Job>('jobs'), async () => {
    await sleep(1);
    done++;
  }, { concurrency: 5, wait: 2000 });
  const claims = () => requests.filter((r) => r.statements.at(-1)!.query.startsWith(CLAIM));
  await until('every job acked', 20_000, async () => done === 60 && (await db.from('jobs').count()) === 0);
  await until('a claim held', 10_000, () => claims().some((c) => c.wait === '2000'));
  // A job for the idle worker: the held claim takes it at once.
  const started = Date.now();
  await enqueue(db, 1, 60);
  await until('the late job acked', 10_000, async () => done === 61 && (await db.from('jobs').count()) === 0);
  assert.ok(Date.now() - started < 1500, `the late job took ${Date.now() - started} ms`);
  await w.close();
  const seen = claims();
  assert.equal(seen[0]!.wait, '0', 'the first claim is not held');
  for (let i = 1; i < seen.length; i++) {
    const last = seen[i - 1]!;
    if (last.claimed === undefined) continue; // given up or failed: no answer to go by
    assert.equal(seen[i]!.wait, last.claimed > 0 ? '0' : '2000', `claim ${i + 1} after a claim of ${last.claimed}: ${JSON.stringify(seen.map((c) => [c.wait, c.claimed]))}`);
  }
  assert.ok(seen.filter((c) => c.wait === '0').length >= 12, 'at most 5 jobs a claim');
});

test('by default a failed attempt is a warning and a dead letter an error on the console; the stored error is the message alone', { timeout: 20_000 }, async (t) => {
  const { db } = await queue(t);
  const warned = t.mock.method(console, 'warn', () => undefined);
  const erred = t.mock.method(console, 'error', () => undefined);
  class Oops extends Error {}
  await db.from('jobs').insert([{ payload: { n: 1 }, run_at: expr('now()'), attempts: 0 }, { payload: { n: 2 }, run_at: expr('now()'), attempts: 0 }]);
  const w = startWorker(db.from<Job>('jobs'), (job) => {
    if ((job.payload as unknown as { n: number }).n === 1) throw new Error('boom');
    throw new Oops();
  }, { maxAttempts: 2, backoff: () => 0, wait: 200, grace: 2000 });
  live.add(w);
  await until('both dead letters', 10_000, async () => (await db.from('jobs').where('run_at', null).count()) === 2);
  await w.close();
  const dead = await db.from<Job>('jobs').order('id').rows();
  assert.deepEqual(dead.map((j) => [j.error, j.attempts]), [['boom', 2], ['Oops', 2]]);
  const lines = (calls: { arguments: unknown[] }[]) => calls.map((c) => String(c.arguments[0])).sort();
  assert.deepEqual(lines(warned.mock.calls), [
    `fenec worker ${w.owner}: handler of job ${dead[0]!.id}: boom`,
    `fenec worker ${w.owner}: handler of job ${dead[1]!.id}: Oops`,
  ]);
  assert.deepEqual(lines(erred.mock.calls), [
    `fenec worker ${w.owner}: dead_letter of job ${dead[0]!.id}: boom`,
    `fenec worker ${w.owner}: dead_letter of job ${dead[1]!.id}: Oops`,
  ]);
});

test('close() from inside a handler resolves at once; the worker stops when the handler returns, its other jobs released', { timeout: 20_000 }, async (t) => {
  const { db } = await queue(t);
  await enqueue(db, 5);
  let w!: Worker<Job>;
  let closedIn = -1;
  const ran: number[] = [];
  w = worker(db.from<Job>('jobs'), async (job) => {
    ran.push(job.id);
    if (ran.length === 1) {
      const at = Date.now();
      await w.close();
      closedIn = Date.now() - at;
      await sleep(100);
    } else {
      await sleep(5000);
    }
  }, { concurrency: 2, grace: 30_000 });
  await until('the handler asked for the stop', 5000, () => closedIn >= 0);
  assert.ok(closedIn < 500, `close() inside the handler took ${closedIn} ms`);
  const stopping = Date.now();
  await w.close();
  // The other running handler sleeps 5 s: the stop waits for it, not for the 30 s grace.
  assert.ok(Date.now() - stopping < 8000, `stopped ${Date.now() - stopping} ms after`);
  assert.equal(await db.from('jobs').where(raw('owner is not null')).count(), 0, 'jobs left leased');
  assert.equal(await db.from('jobs').count(), 5 - ran.length, 'jobs left');
});

test('runUntilEmpty() returns once no job is ready and no handler runs; a later job is left', { timeout: 30_000 }, async (t) => {
  const { db } = await queue(t);
  await enqueue(db, 50);
  await db.from('jobs').insert({ payload: { n: 99 }, run_at: expr('now() + ?', 3_600_000), attempts: 0 });
  let ran = 0;
  const w = worker(db.from<Job>('jobs'), async () => {
    await sleep(1);
    ran++;
  }, { concurrency: 4 });
  const started = Date.now();
  await w.runUntilEmpty();
  // The claim is not held at the server (its wait is 30 s here).
  assert.ok(Date.now() - started < 15_000, `took ${Date.now() - started} ms`);
  assert.equal(ran, 50);
  assert.equal(await db.from('jobs').count(), 1);
  assert.equal(w.running, 0);

  // Asked of an idle worker whose claim is held: the claim is given up and sent again unheld.
  const idle = worker(db.from<Job>('jobs'), () => undefined, { concurrency: 2 });
  await sleep(300);
  const asked = Date.now();
  await idle.runUntilEmpty();
  assert.ok(Date.now() - asked < 5000, `took ${Date.now() - asked} ms`);
  assert.equal(await db.from('jobs').where(raw('owner is not null')).count(), 0, 'jobs left leased');
});
