/**
 * The client against a real `fenec serve --clock manual`: errors, idempotency,
 * held claims (`wait`) and their cancellation, and the golden statements.
 */

import assert from 'node:assert/strict';
import { createHmac } from 'node:crypto';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, beforeEach, describe, test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { type Client, connect, Db, expr, FenecError, inc, raw } from '../src/client.js';
import { moveClock } from '../src/generated/transport.js';
import { GOLDEN } from '../scripts/golden.js';
import { type Case } from '../scripts/steps.js';
import { parse, stringify } from '../src/json.js';
import { type Server, startServer } from './server.js';

const SCHEMA = [
  'create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)',
  'create collection tasks (payload json, run_at timestamp @sorted, priority int @sorted, owner text, attempts int)',
  'create collection users (name text @unique, active bool)',
];

let server: Server;
let db: Client;

before(async () => {
  server = await startServer('--token', 'sekret');
  db = connect(server.url, { token: 'sekret' });
});
after(() => server.stop());

/** A fresh schema for each test. */
async function fresh(): Promise<void> {
  for (const name of ['jobs', 'tasks', 'users']) await db.query(`drop collection if exists ${name}`);
  for (const s of SCHEMA) await db.query(s);
}

/** The FenecError a promise rejects with. */
async function refusal(p: Promise<unknown>): Promise<FenecError> {
  const err = await p.then(() => undefined, (e: unknown) => e);
  assert.ok(err instanceof FenecError, `not a FenecError: ${String(err)}`);
  return err;
}

/** An HS256 JWT, expiring an hour after the manual clock's start. */
function jwt(secret: string, claims: Record<string, unknown>): string {
  const part = (v: unknown) => Buffer.from(JSON.stringify(v)).toString('base64url');
  const body = `${part({ alg: 'HS256', typ: 'JWT' })}.${part({ ...claims, exp: 1777800000 + 3600 })}`;
  return `${body}.${createHmac('sha256', secret).update(body).digest('base64url')}`;
}

/** The claim of the seed page, sent with `wait`. */
function claim(owner: string, wait: number, signal?: AbortSignal) {
  return db.from('jobs').where(raw('run_at <= now()')).order('run_at').limit(10)
    .update({ owner, run_at: expr('now() + ?', 30000), attempts: inc(1) }, { returning: true, wait, signal });
}

describe('errors', () => {
  before(fresh);

  test('400 bad_request for a statement that does not parse', async () => {
    const err = await refusal(db.query('get jobs where'));
    assert.deepEqual([err.status, err.code], [400, 'bad_request']);
    assert.match(err.message, /position/);
  });

  test('401 unauthorized without the token, or with another', async () => {
    for (const opts of [{}, { token: 'wrong' }]) {
      const err = await refusal(connect(server.url, opts).from('jobs').rows());
      assert.deepEqual([err.status, err.code], [401, 'unauthorized']);
    }
  });

  test('403 forbidden for a schema change by a token held to a policy', async (t) => {
    const dir = mkdtempSync(join(tmpdir(), 'fenec-js-'));
    const policy = join(dir, 'policy.txt');
    writeFileSync(policy, 'jobs insert for producer\n');
    const secret = 'a-secret-of-at-least-thirty-two-bytes';
    const scoped = await startServer('--token', 'admin', '--jwt-secret', secret, '--policy', policy).catch((err: Error) => {
      if (/flag provided but not defined/.test(err.message)) return undefined;
      throw err;
    });
    if (!scoped) {
      t.skip('this fenec has no --jwt-secret yet (the fake-fetch test maps 403)');
      return;
    }
    t.after(() => scoped.stop());
    await connect(scoped.url, { token: 'admin' }).query(SCHEMA[0]!);
    const producer = connect(scoped.url, { token: jwt(secret, { sub: 'app', role: 'producer' }) });
    assert.equal(await producer.from('jobs').insert({ attempts: 0 }), 1);
    const err = await refusal(producer.query('drop collection jobs'));
    assert.deepEqual([err.status, err.code], [403, 'forbidden']);
  });

  test('404 not_found for an unknown collection or field', async () => {
    const err = await refusal(db.from('nope').rows());
    assert.deepEqual([err.status, err.code], [404, 'not_found']);
    assert.equal((await refusal(db.from('jobs').where('runat', 1).rows())).status, 404);
  });

  test('409 conflict for a taken @unique value', async () => {
    await db.from('users').insert({ name: 'ada', active: true });
    const err = await refusal(db.from('users').insert({ name: 'ada', active: false }));
    assert.deepEqual([err.status, err.code], [409, 'conflict']);
    assert.equal(await db.from('users').count(), 1);
  });

  test('412 unmet when require is not met', async () => {
    const err = await refusal(db.from('jobs').where('id', 999).delete({ require: 1 }));
    assert.deepEqual([err.status, err.code], [412, 'unmet']);
  });

  test('422 key_reused for an Idempotency-Key sent with another request', async () => {
    await db.from('jobs').insert({ attempts: 0 }, { idempotencyKey: 'key-422' });
    const err = await refusal(db.from('jobs').insert({ attempts: 1 }, { idempotencyKey: 'key-422' }));
    assert.deepEqual([err.status, err.code], [422, 'key_reused']);
  });

  test('a batch refusal names its statement with at', async () => {
    const jobs = db.from('jobs');
    const err = await refusal(db.batch([jobs.renderCount(), jobs.where('id', 999).renderDelete({ require: 1 })]));
    assert.deepEqual([err.status, err.code, err.at], [412, 'unmet', 1]);
  });
});

describe('errors a user can act on, from real sockets', () => {
  /** A tiny HTTP server on a free port, answering as `answer` does; closed after the test. */
  async function tiny(t: { after(fn: () => void): void }, answer: http.RequestListener): Promise<string> {
    const srv = http.createServer(answer);
    await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      srv.closeAllConnections();
      srv.close();
    });
    return `127.0.0.1:${(srv.address() as AddressInfo).port}`;
  }

  test("a proxy's 502 with an HTML body is unexpected, with the status and the start of the body", async (t) => {
    const page = '<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>';
    const addr = await tiny(t, (_req, res) => res.writeHead(502, { 'Content-Type': 'text/html' }).end(page));
    const err = await refusal(connect(`http://${addr}`).from('jobs').where('id', 1).delete());
    assert.deepEqual([err.status, err.code], [502, 'unexpected']);
    assert.equal(err.message, `unexpected answer from ${addr}: HTTP 502: ${page}`);
  });

  test('a connection refused is network, naming host:port and the cause', async (t) => {
    const addr = await tiny(t, () => {});
    const port = Number(addr.split(':')[1]);
    // The port of a server that is gone: nothing listens there now.
    const gone = http.createServer();
    await new Promise<void>((resolve) => gone.listen(0, '127.0.0.1', resolve));
    const free = (gone.address() as AddressInfo).port;
    await new Promise<void>((resolve) => gone.close(() => resolve()));
    assert.notEqual(free, port);
    const err = await refusal(connect(`http://127.0.0.1:${free}`).query('get jobs'));
    assert.deepEqual([err.status, err.code], [0, 'network']);
    assert.match(err.message, new RegExp(`^network: cannot reach 127\\.0\\.0\\.1:${free}: connection refused \\(ECONNREFUSED`));
  });

  test('a server that never answers is a timeout that says which timeout and how long', async (t) => {
    const addr = await tiny(t, () => {});
    const db2 = connect(`http://${addr}`, { timeout: 150 });
    const start = Date.now();
    const err = await refusal(db2.from('jobs').where('id', 1).delete({ wait: 100 }));
    assert.deepEqual([err.status, err.code], [0, 'timeout']);
    assert.equal(err.message, `timeout: no answer from ${addr} in 250 ms (the client's timeout of 150 ms plus the wait of 100 ms)`);
    assert.ok(Date.now() - start >= 240, `gave up after ${Date.now() - start} ms`);
    const err2 = await refusal(db2.query('get jobs', [], { timeout: 80 }));
    assert.equal(err2.message, `timeout: no answer from ${addr} in 80 ms (the request's timeout of 80 ms)`);
  });
});

test('Db, the old name of Client, still works', () => {
  const old: Db = new Db(server.url);
  assert.ok(old instanceof Db && db instanceof Db);
});

describe('results and rows', () => {
  before(fresh);

  test('a write answers seq; a retry with its key answers replayed and the same seq', async () => {
    const stmt = db.from('jobs').renderInsert({ attempts: 0 });
    const first = await db.query(stmt, { idempotencyKey: 'seq-1' });
    const again = await db.query(stmt, { idempotencyKey: 'seq-1' });
    assert.ok(first.seq > 0, `seq ${first.seq}`);
    assert.deepEqual([first.replayed, again.replayed, again.seq, again.affected], [false, true, first.seq, 1]);
    assert.equal((await db.query('get jobs count')).seq, 0);
  });

  test('rows decode by field type: a timestamp is a Date, text stays text, an int64 stays exact', async () => {
    await db.from('jobs').delete();
    await db.from('jobs').insert({ run_at: new Date('2026-05-03T09:20:20.250Z'), error: '2026-05-03T09:20:20.000Z', attempts: 9223372036854775807n });
    // An int beyond ±2^53 reads as a bigint on a client whose int64 type is bigint (a number would not be exact).
    const [row] = await connect(db.node, { token: 'sekret', int64: 'bigint' }).from('jobs').select('run_at', 'error', 'attempts').rows();
    assert.deepEqual(row, { run_at: new Date('2026-05-03T09:20:20.250Z'), error: '2026-05-03T09:20:20.000Z', attempts: 9223372036854775807n });
    const [claimed] = await db.from('jobs').update({ owner: 'w' }, { returning: ['run_at'] });
    assert.ok(claimed?.['run_at'] instanceof Date);
    // A statement sent as text has no collection: its rows are as the JSON says.
    assert.deepEqual((await db.query('get jobs select run_at')).rows, [{ run_at: '2026-05-03T09:20:20.250Z' }]);
    await db.from('jobs').delete();
  });

  test('a collection made again with a field more, after its types were loaded, is decoded by its new types', async () => {
    await db.from('jobs').rows();
    await sleep(1100);
    await db.query('drop collection jobs');
    await db.query('create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text, done_at timestamp)');
    await db.from('jobs').insert({ done_at: new Date(0) });
    const rows = await db.from('jobs').where('done_at', '=', new Date(0)).rows();
    assert.deepEqual(rows.map((r) => r['done_at']), [new Date(0)]);
  });
});

describe('idempotency', () => {
  before(fresh);

  test('a retry with the same key is answered the first answer and writes nothing', async () => {
    const jobs = db.from('jobs');
    const first = await jobs.insert([{ attempts: 0 }, { attempts: 0 }], { idempotencyKey: 'enqueue-1' });
    const again = await jobs.insert([{ attempts: 0 }, { attempts: 0 }], { idempotencyKey: 'enqueue-1' });
    assert.deepEqual([first, again], [2, 2]);
    assert.equal(await jobs.count(), 2);
  });
});

describe('held claims', () => {
  before(fresh);
  beforeEach(async () => {
    await db.from('jobs').delete();
  });

  test('a claim with wait is answered the moment a job is put', async () => {
    const start = Date.now();
    const held = claim('w-put', 5000);
    await sleep(300);
    await db.query('put jobs {payload: $1, run_at: now(), attempts: 0}', [{ to: 'ada@example.com' }]);
    const rows = await held;
    const took = Date.now() - start;
    assert.equal(rows.length, 1, `answered ${JSON.stringify(rows)} after ${took} ms`);
    assert.ok(took >= 250 && took < 4000, `answered after ${took} ms`);
  });

  test('a claim with wait is answered when a delayed job comes due', async () => {
    await db.query('put jobs {payload: $1, run_at: now() + 1000, attempts: 0}', ['later']);
    const held = claim('w-due', 5000);
    await sleep(200);
    await moveClock({ baseUrl: server.url, fetch, token: 'sekret' }, { advance_ms: 1000 });
    const rows = await held;
    assert.equal(rows.length, 1, `answered ${JSON.stringify(rows)}`);
  });

  test('a claim with wait on an empty queue is answered no row at the end of the wait', async () => {
    const start = Date.now();
    assert.deepEqual(await claim('w-empty', 400), []);
    assert.ok(Date.now() - start >= 380, `answered after ${Date.now() - start} ms`);
  });

  test('a held claim given up is dropped by the server, and takes no job', async () => {
    const stop = new AbortController();
    const held = claim('w-gone', 30000, stop.signal);
    await sleep(200);
    stop.abort();
    const err = await held.then((rows) => rows, (e: unknown) => e);
    assert.ok(err instanceof DOMException && err.name === 'AbortError', `answered ${JSON.stringify(err)} before it was given up`);
    await sleep(100);
    await db.query('put jobs {payload: $1, run_at: now(), attempts: 0}', ['after']);
    const rows = await claim('w-next', 0);
    assert.deepEqual(rows.map((r) => r.owner), ['w-next']);
  });
});

describe('instead of Redis (docs/redis.md)', () => {
  test('ifAbsent writes once; upsert and inc count from nothing; near answers nearest first', async () => {
    await db.query('drop collection if exists counters');
    await db.query('drop collection if exists places');
    await db.query('create collection counters (key text @unique, n int)');
    await db.query('create collection places (name text, at geo @geo)');
    const counters = db.from('counters');
    assert.equal(await counters.ifAbsent().insert({ key: 'a', n: 5 }), 1);
    assert.equal(await counters.ifAbsent().insert({ key: 'a', n: 9 }), 0);
    assert.equal((await counters.where('key', 'a').first())?.n, 5);
    const hit = counters.upsert({ n: inc(1) });
    assert.equal(await hit.insert({ key: 'b' }), 1); // absent: written as given, n null
    assert.equal(await hit.insert({ key: 'b' }), 1); // there: coalesce(null, 0) + 1
    assert.equal(await hit.insert({ key: 'b' }), 1);
    assert.equal((await counters.where('key', 'b').first())?.n, 2);
    await counters.upsert({ n: expr('n + new.n') }).insert({ key: 'a', n: 10 });
    assert.equal((await counters.where('key', 'a').first())?.n, 15);
    await db.query('put counters {key: "c"}');
    assert.deepEqual(await counters.where('key', 'c').update({ n: inc(3) }, { returning: ['n'] }), [{ n: 3 }]);

    const places = db.from('places');
    await places.insert([{ name: 'far', at: [10, 10] }, { name: 'near', at: [1, 1] }, { name: 'mid', at: [5, 5] }, { name: 'none' }]);
    const names = async (q: typeof places) => (await q.select('name').rows()).map((r) => r.name);
    assert.deepEqual(await names(places.near('at', [0, 0])), ['near', 'mid', 'far']);
    assert.deepEqual(await names(places.near('at', [9, 9], { exact: true }).limit(2)), ['far', 'mid']);
    assert.deepEqual(await places.near('at', [6, 6]).limit(1).update({ name: 'taken' }, { returning: ['name'] }), [{ name: 'taken' }]);
    assert.equal(await places.where('name', 'taken').near('at', [0, 0]).count(), 1);
  });
});

describe('golden statements', () => {
  // Every field a golden case names, so each statement runs rather than only parses.
  const GOLDEN_SCHEMA = [
    'create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text, score float, done bool, queue text, priority int, n int)',
    'create collection tasks (payload json, run_at timestamp @sorted, priority int @sorted, owner text, attempts int)',
    'create collection users (name text @unique, active bool)',
    'create collection posts (tags json)',
    'create collection stock (sku text, qty int, weight float)',
    'create collection locks (name text @unique, owner text, until timestamp)',
    'create collection counters (key text @unique, n int, seen timestamp)',
    'create collection cache (key text @unique, value text, hits int, until timestamp)',
    'create collection places (name text, kind text, owner text, at geo @geo)',
  ];

  test('every golden statement runs on the server: answered, or 412 unmet for a require on empty collections', async () => {
    const { cases } = parse(readFileSync(GOLDEN, 'utf8')) as { cases: Case[] };
    const statements = cases.filter((c) => c.query !== undefined);
    assert.ok(statements.length >= 100, `${statements.length} statements`);
    for (const c of statements) {
      for (const name of ['jobs', 'tasks', 'users', 'posts', 'stock', 'locks', 'counters', 'cache', 'places']) await db.query(`drop collection if exists ${name}`);
      for (const s of GOLDEN_SCHEMA) await db.query(s);
      const err = await db.query(c.query!, c.params).then(() => undefined, (e: unknown) => e);
      if (err === undefined) continue;
      const requires = 'require' in c.end && c.end.require !== undefined && c.end.require > 0;
      assert.ok(err instanceof FenecError && requires && err.code === 'unmet',
        `${c.name}: ${c.query} ${stringify(c.params)}: ${String(err)}`);
    }
  });
});
