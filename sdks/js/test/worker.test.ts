/**
 * examples/worker.ts against a real server: four workers, holding their
 * claims with `wait`, drain 500 jobs put while they wait; each is acked once.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { connect, expr, type Row } from '../src/client.js';
import { work } from '../examples/worker.js';
import { startServer } from './server.js';

const JOBS = 500;

test('four waiting workers drain 500 jobs, each acked once', { timeout: 60_000 }, async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection jobs (payload json, run_at timestamp @sorted, owner text, attempts int, error text)');

  const runs = new Map<number, number>();
  const send = async (job: Row) => {
    const n = (job.payload as { n: number }).n;
    runs.set(n, (runs.get(n) ?? 0) + 1);
  };
  const stop = new AbortController();
  const workers = Array.from({ length: 4 }, () => work(db, send, stop.signal));
  await sleep(200); // every worker's first claim is held by now

  const jobs = db.from('jobs');
  for (let n = 0; n < JOBS; n += 25) {
    const batch = Array.from({ length: 25 }, (_, i) => ({ payload: { n: n + i }, run_at: expr('now()'), attempts: 0 }));
    await jobs.insert(batch);
  }
  const deadline = Date.now() + 30_000;
  while ((await jobs.count()) > 0 && Date.now() < deadline) await sleep(50);

  stop.abort();
  await Promise.all(workers);
  assert.equal(await jobs.count(), 0, 'jobs left in the queue');
  assert.equal(runs.size, JOBS, 'jobs run');
  assert.deepEqual([...runs.values()].filter((c) => c !== 1), [], 'jobs run more than once');
});
