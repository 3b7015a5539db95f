/**
 * The queue worker of docs/queues.md ("A worker"): claim a batch — held at
 * the server until there is one — run each job, and ack it or fail it with
 * a backoff.
 *
 *   FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN=… node dist/examples/worker.js
 *
 * The loop is `work`; the test runs four of them against a real server.
 */

import { connect, type Db, expr, inc, raw, type Row } from '@fenecdb/web/client';
import { fileURLToPath } from 'node:url';

/** Runs one job; a job whose send throws is failed, and claimed again after a backoff. */
export type Send = (job: Row) => Promise<void>;

/**
 * Claims jobs from `jobs` and runs them until `signal` is aborted. Each claim
 * takes up to ten ready jobs, each leased for 30 s under an owner token of
 * its own; a job is acked by deleting it, or failed by giving it back to the
 * queue `2^attempts` seconds later.
 */
export async function work(db: Db, send: Send, signal?: AbortSignal): Promise<void> {
  const jobs = db.from('jobs');
  const me = `w-${crypto.randomUUID()}`;
  while (!signal?.aborted) {
    const owner = `${me}:${Date.now()}`;
    let claimed: Row[];
    try {
      claimed = await jobs
        .where(raw('run_at <= now()'))
        .order('run_at')
        .limit(10)
        .update(
          { owner, run_at: expr('now() + ?', 30000), attempts: inc(1) },
          { returning: true, wait: 30000, signal },
        );
    } catch (err) {
      if (signal?.aborted) return;
      throw err;
    }
    for (const job of claimed) {
      try {
        await send(job);
        await jobs.where('id', job.id).where('owner', owner).delete({ require: 1 });
      } catch {
        const backoff = 1000 * 2 ** Number(job.attempts);
        await jobs.where('id', job.id).where('owner', owner).update(
          { owner: null, run_at: expr('now() + ?', backoff) },
          { require: 1 },
        ).catch(() => {});
      }
    }
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const env = process.env;
  const db = connect(env['FENEC_URL'] ?? 'http://127.0.0.1:8080', env['FENEC_TOKEN'] ? { token: env['FENEC_TOKEN'] } : {});
  const stop = new AbortController();
  process.once('SIGINT', () => stop.abort());
  await work(db, async (job) => console.log('job', job.id, JSON.stringify(job.payload)), stop.signal);
}
