/**
 * Several nodes (docs/sdks.md, "Several nodes"): the client against three
 * real `fenec serve` nodes on loopback — a follower listed first, a held
 * claim across a leadership transfer, the leader SIGKILLed — and, with a
 * fetch that answers as a test says, what a real server cannot produce (a
 * leader named over http to an https client).
 */

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { connect, FenecError, raw, worker } from '../src/client.js';
import { fakeFetch, json } from './fake.js';
import { type Cluster, type ClusterNode, startCluster, startServer } from './server.js';

const JOBS = 'create collection if not exists jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)';

/** The sum of a node's `fenec_http_requests_total` for `route`. */
async function requests(c: Cluster, node: ClusterNode, route: string): Promise<number> {
  const { text } = await c.get(node, '/_metrics');
  let n = 0;
  for (const m of text.matchAll(/^fenec_http_requests_total\{([^}]*)\} (\S+)$/gm)) {
    if (m[1]!.includes(`route="${route}"`)) n += Number(m[2]);
  }
  return n;
}

/** A node's `fenec_held_claims` gauge. */
async function held(c: Cluster, node: ClusterNode): Promise<number> {
  const { text } = await c.get(node, '/_metrics');
  const m = /^fenec_held_claims (\S+)$/m.exec(text);
  return m ? Number(m[1]) : Number.NaN;
}

describe('several nodes, a real cluster', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c?.stop());

  test('a follower listed first: the insert and the claim follow to the leader, later calls go there straight', async () => {
    const leader = await c.leader();
    const follower = c.nodes.find((n) => n !== leader)!;
    const other = c.nodes.find((n) => n !== leader && n !== follower)!;
    const db = connect([follower.url, other.url, leader.url], { token: c.token });
    assert.equal(db.node, follower.url);
    await db.query(JOBS);
    assert.equal(db.node, leader.url, 'the write followed Fenec-Leader and the leader became the current node');
    const jobs = db.from('jobs');
    assert.equal(await jobs.insert({ payload: { n: 1 }, run_at: new Date(0), attempts: 0 }), 1);
    const claimed = await jobs.where(raw('run_at <= now()')).order('run_at').limit(1)
      .update({ owner: 'w1', attempts: 1 }, { returning: true });
    assert.equal(claimed.length, 1);

    const before = await requests(c, follower, '/query');
    for (let i = 0; i < 5; i++) await jobs.insert({ payload: { n: i }, run_at: new Date(0), attempts: 0 });
    await jobs.count();
    assert.equal(await requests(c, follower, '/query'), before, 'later calls went straight to the leader');
  });

  test('a held claim on the leader while leadership is handed on is answered by the new leader', async () => {
    const leader = await c.leader();
    const db = connect(c.nodes.map((n) => n.url), { token: c.token });
    await db.query(JOBS);
    await db.query('del jobs');
    assert.equal(db.node, leader.url);
    const claim = db.from('jobs').where(raw('run_at <= now()')).order('run_at').limit(1)
      .update({ owner: 'held' }, { returning: true, wait: 15_000 });
    claim.catch(() => {}); // awaited below; a rejection before then is not unhandled
    for (let i = 0; (await held(c, leader)) !== 1; i++) {
      assert.ok(i < 200, 'the claim was not held at the leader within 2 s');
      await new Promise((r) => setTimeout(r, 10));
    }
    const moved = await c.post(leader, '/_cluster/leader', {});
    assert.equal(moved.status, 200, moved.text);
    let next = await c.leader();
    for (let i = 0; next === leader; i++) {
      assert.ok(i < 100, 'leadership did not move');
      await new Promise((r) => setTimeout(r, 50));
      next = await c.leader();
    }
    const put = await c.post(next, '/query', { query: 'insert jobs {payload: $1, run_at: $2, attempts: 0}', params: [{ after: 'transfer' }, '1970-01-01T00:00:00.000Z'] });
    assert.equal(put.status, 200, put.text);
    const got = await claim;
    assert.equal(got.length, 1);
    assert.deepEqual(got[0]?.['payload'], { after: 'transfer' });
    assert.equal(db.node, next.url, 'the client follows the new leader');
  });

  test('the leader SIGKILLed: the next read and insert succeed on the others within 5 s', async (t) => {
    const leader = await c.leader();
    const db = connect(c.nodes.map((n) => n.url).reverse(), { token: c.token });
    await db.query(JOBS);
    const jobs = db.from('jobs');
    await jobs.insert({ payload: { before: 'kill' }, run_at: new Date(0), attempts: 0 });
    assert.equal(db.node, leader.url);
    await leader.kill('SIGKILL');
    const killed = performance.now();
    const n = await jobs.where('payload.before', 'kill').count();
    const read = performance.now() - killed;
    assert.ok(n >= 0); // a follower's read may not have applied the last write yet (docs/cluster.md, "Reads")
    assert.notEqual(db.node, leader.url);
    assert.equal(await jobs.insert({ payload: { after: 'kill' }, run_at: new Date(0), attempts: 0 }), 1);
    const write = performance.now() - killed;
    const next = await c.leader();
    assert.equal(db.node, next.url, 'the insert found the new leader');
    t.diagnostic(`after SIGKILL of the leader: read answered in ${read.toFixed(0)} ms, insert in ${write.toFixed(0)} ms`);
    assert.ok(write < 5000, `the insert took ${write.toFixed(0)} ms after the kill`);
  });
});

describe('a worker on a cluster', () => {
  let c: Cluster;
  before(async () => {
    c = await startCluster();
  });
  after(() => c?.stop());

  test('runs every job across the leader SIGKILLed (docs/workers.md over several nodes)', { timeout: 40_000 }, async (t) => {
    const leader = await c.leader();
    const db = connect(c.nodes.map((n) => n.url), { token: c.token });
    await db.query(JOBS);
    const jobs = db.from('jobs');
    const put = (n: number, from: number) => jobs.insert(Array.from({ length: n }, (_, i) => ({ payload: { n: from + i }, run_at: new Date(0), attempts: 0 })));
    await put(20, 0);
    const done = new Set<number>();
    const errors: string[] = [];
    const w = worker(db.from('jobs'), async (job) => {
      await new Promise((r) => setTimeout(r, 20));
      done.add((job['payload'] as { n: number }).n);
    }, { concurrency: 4, lease: 2000, wait: 1000, backoff: () => 0.1, onError: (err, step) => errors.push(`${step}: ${String(err)}`) });
    try {
      for (let i = 0; done.size < 5; i++) {
        assert.ok(i < 500, 'the worker ran 5 jobs in 10 s');
        await new Promise((r) => setTimeout(r, 20));
      }
      await leader.kill('SIGKILL');
      const killed = performance.now();
      await put(20, 20);
      for (let i = 0; done.size < 40; i++) {
        assert.ok(i < 1000, `the worker ran ${done.size} of the 40 jobs 20 s after the kill; its errors: ${errors.join('; ')}`);
        await new Promise((r) => setTimeout(r, 20));
      }
      t.diagnostic(`the worker ran all 40 jobs ${(performance.now() - killed).toFixed(0)} ms after the leader's SIGKILL (${errors.length} faults reported)`);
      for (let i = 0; (await jobs.count()) !== 0; i++) {
        assert.ok(i < 250, 'every job acked');
        await new Promise((r) => setTimeout(r, 20));
      }
    } finally {
      await w.close();
    }
  });
});

describe('several nodes, the rules', () => {
  // What a cluster's node answers a write it refuses unrun: a follower 403
  // naming the leader; a node that knows no leader, or was just elected and
  // applies the earlier terms' writes first, 503 no_leader (docs/cluster.md).
  const refusal = (leader: string) => json(403, {
    error: `this node is not the cluster's leader: send writes to the leader at ${leader}`,
    code: 'forbidden',
  }, { 'Fenec-Leader': leader });
  const noLeader = () => json(503, { error: 'no leader is elected now: send the write again shortly, to any node', code: 'no_leader' });

  test('a bad URL among several is refused at connect, named by its place', () => {
    assert.throws(() => connect('http://a:8080,ftp://b:8080,http://c:8080'), /^TypeError: node 2 of 3: url "ftp:\/\/b:8080" needs the scheme http or https and a host$/);
    assert.throws(() => connect(['http://a:8080', 'http://b:8080', '']), /node 3 of 3: url "" is not a URL/);
    assert.throws(() => connect([]), /connect needs a URL/);
    assert.equal(connect(' http://a:8080 , http://b:8080').node, 'http://a:8080');
  });

  test('an https client does not follow a leader named over http', async () => {
    const { fetch, sent } = fakeFetch(() => refusal('http://10.0.0.3:8080'));
    const db = connect('https://a.test', { fetch });
    const err = await db.query('insert jobs {}').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError);
    assert.deepEqual([err.status, err.code, err.leader], [403, 'forbidden', 'http://10.0.0.3:8080']);
    assert.deepEqual(sent.map((s) => s.url), ['https://a.test/query']);
    assert.equal(db.node, 'https://a.test');
  });

  test('the same request follows the leader, at most 3 times between pauses', async () => {
    const { fetch, sent } = fakeFetch((req) => req.url.startsWith('https://c.test') ? json(200, { affected: 1 }) : refusal('https://c.test'));
    const db = connect('https://a.test', { fetch, token: 't' });
    await db.query('insert jobs {n: $1}', [1], { idempotencyKey: 'k1', wait: 100 });
    assert.deepEqual(sent.map((s) => s.url), ['https://a.test/query', 'https://c.test/query']);
    assert.deepEqual(sent[1], { ...sent[0], url: 'https://c.test/query' }, 'same method, headers, body');
    assert.equal(sent[1]?.headers['idempotency-key'], 'k1');
    assert.equal(db.node, 'https://c.test');

    // Two nodes that name each other: 1 + 3 requests, then the 403.
    const loop = fakeFetch((req) => refusal(req.url.startsWith('http://a.test') ? 'http://b.test' : 'http://a.test'));
    const err = await connect('http://a.test', { fetch: loop.fetch }).query('insert jobs {}').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError && err.code === 'forbidden');
    assert.equal(loop.sent.length, 4);
  });

  test('no_leader with one URL: the same node again after each pause until it answers; at the deadline the 503 is raised', async () => {
    let calls = 0;
    const one = fakeFetch(() => (++calls <= 2 ? noLeader() : json(200, { affected: 1 })));
    const db = connect('http://a.test', { fetch: one.fetch });
    const began = performance.now();
    assert.deepEqual((await db.query('insert jobs {}')).affected, 1);
    const took = performance.now() - began;
    assert.deepEqual(one.sent.map((s) => s.url), ['http://a.test/query', 'http://a.test/query', 'http://a.test/query']);
    assert.ok(took >= 50 + 100, `two pauses (50 + 100 ms), took ${took.toFixed(0)} ms`);

    const never = fakeFetch(() => noLeader());
    const start = performance.now();
    const err = await connect('http://a.test', { fetch: never.fetch, timeout: 300 }).query('insert jobs {}').catch((e: unknown) => e);
    const waited = performance.now() - start;
    assert.ok(err instanceof FenecError, String(err));
    assert.deepEqual([err.status, err.code], [503, 'no_leader']);
    assert.ok(waited >= 250 && waited < 1500, `raised at the deadline (300 ms), took ${waited.toFixed(0)} ms`);
    assert.ok(never.sent.length >= 3 && never.sent.length <= 5, `50, 100 ms pauses within 300 ms: ${never.sent.length} requests`);
  });

  test('no_leader with several URLs: the next node after each pause, round robin, until one answers', async () => {
    let calls = 0;
    const several = fakeFetch((req) => (++calls >= 4 && req.url.startsWith('http://b.test') ? json(200, { affected: 1 }) : noLeader()));
    const db = connect('http://a.test,http://b.test,http://c.test', { fetch: several.fetch });
    const began = performance.now();
    await db.query('insert jobs {}');
    const took = performance.now() - began;
    assert.deepEqual(several.sent.map((s) => new URL(s.url).host), ['a.test', 'b.test', 'c.test', 'a.test', 'b.test']);
    assert.ok(took >= 50 + 100 + 200 + 400, `a pause before each resend (50, 100, 200, 400 ms), took ${took.toFixed(0)} ms`);
    assert.equal(db.node, 'http://b.test');
  });

  test('mid-election: followers name a leader that answers no_leader; the follows count since the last pause', async () => {
    // Two followers name l.test, which answers no_leader four times (taking
    // office) before it serves: 1 + 4 follows in all, never more than 1
    // between two pauses, so the limit of 3 follows between pauses does not end it.
    let office = 0;
    const { fetch, sent } = fakeFetch((req) => {
      if (!req.url.startsWith('http://l.test')) return refusal('http://l.test');
      return ++office <= 4 ? noLeader() : json(200, { affected: 1 });
    });
    const db = connect('http://a.test,http://b.test', { fetch });
    await db.query('insert jobs {}');
    assert.deepEqual(sent.map((s) => new URL(s.url).host), ['a.test', 'l.test', 'b.test', 'l.test', 'a.test', 'l.test', 'b.test', 'l.test', 'a.test', 'l.test']);
    assert.equal(db.node, 'http://l.test');
  });

  test('any 503 other than no_leader is raised at once: an outcome unknown is the caller\'s to retry', async () => {
    const lost = fakeFetch(() => json(503, { error: "the write's outcome in the cluster is unknown (leadership lost)", code: 'unavailable' }));
    const err = await connect('http://a.test,http://b.test', { fetch: lost.fetch }).query('insert jobs {}').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError && err.code === 'unavailable');
    assert.equal(lost.sent.length, 1);
  });

  test('a token refused by its rules (403 without Fenec-Leader) is raised at once even with several URLs', async () => {
    const { fetch, sent } = fakeFetch(() => json(403, { error: 'the token may not write jobs', code: 'forbidden' }));
    const err = await connect('http://a.test,http://b.test', { fetch }).query('insert jobs {}').catch((e: unknown) => e);
    assert.ok(err instanceof FenecError && err.code === 'forbidden');
    assert.equal(sent.length, 1);
  });

  test('several URLs all refusing the connection: the last error at the deadline; duplicates are one URL', async () => {
    const refused = () => Promise.reject(new TypeError('fetch failed', { cause: Object.assign(new Error('connect ECONNREFUSED'), { code: 'ECONNREFUSED' }) }));
    const dup = fakeFetch(refused);
    const err1 = await connect('http://a.test,http://a.test/', { fetch: dup.fetch, timeout: 300 }).query('get jobs').catch((e: unknown) => e);
    assert.ok(err1 instanceof FenecError && err1.code === 'network');
    assert.equal(dup.sent.length, 1, 'one URL after duplicates are dropped: raised as today');

    const two = fakeFetch(refused);
    const began = performance.now();
    const err2 = await connect('http://a.test,http://b.test', { fetch: two.fetch, timeout: 300 }).query('get jobs').catch((e: unknown) => e);
    const took = performance.now() - began;
    assert.ok(err2 instanceof FenecError && err2.code === 'network', String(err2));
    assert.match(err2.message, /connection refused/);
    assert.ok(took >= 250 && took < 1500, `gave up at the deadline (300 ms), took ${took.toFixed(0)} ms`);
    assert.ok(two.sent.length >= 4 && two.sent.length <= 12, `rounds with pauses, ${two.sent.length} requests`);
  });
});

// The client sends the highest Fenec-Seq it was answered as Fenec-After, so
// a node it moves to answers only once it has applied those writes. Two lone
// servers stand in for a node and one that has not applied the client's
// writes (a lone server refuses at once, with a 400, a Fenec-After beyond its
// own last write): moved to the second, the client is refused rather than
// answered as if its writes were not there.
test('read-your-writes: Fenec-After goes with the client to the next node', async () => {
  const first = await startServer();
  const second = await startServer();
  try {
    const db = connect([first.url, second.url]);
    await db.query(JOBS);
    assert.equal(await db.from('jobs').insert({ payload: {}, run_at: new Date(0), attempts: 0 }), 1);
    assert.equal(await db.from('jobs').count(), 1); // sent with Fenec-After: the first node made the write
    await first.stop();
    const err = await db.from('jobs').count().then(() => undefined, (e: unknown) => e);
    assert.ok(err instanceof FenecError, String(err));
    assert.equal(err.status, 400, err.message);
    assert.match(err.message, /Fenec-After/);
    assert.equal(db.node, second.url);
  } finally {
    await first.stop().catch(() => undefined);
    await second.stop();
  }
});
