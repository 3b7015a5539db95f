/**
 * A queue worker (docs/workers.md): claims jobs from `jobs` — held at the
 * server until there is one — runs each, and acks it, fails it with a
 * backoff, or dead-letters it after five attempts; stops on SIGINT/SIGTERM.
 *
 *   FENEC_URL=http://127.0.0.1:8080 FENEC_TOKEN=… node dist/examples/worker.js
 */

import { type Client, connect, worker, type Worker } from '@fenecdb/web/client';
import { fileURLToPath } from 'node:url';

/** A job of the queue page's `jobs` collection. */
export interface Job {
  id: number;
  payload: { to: string };
  run_at: Date | null;
  owner: string | null;
  attempts: number;
  error: string | null;
}

/** Sends the mail a job asks for; gives up when `signal` aborts. */
export type Send = (to: string, signal: AbortSignal) => Promise<void>;

/** Starts a worker that sends each job's mail, eight at a time. */
export function start(db: Client, send: Send): Worker<Job> {
  return worker(db.from<Job>('jobs'), (job, signal) => send(job.payload.to, signal), { concurrency: 8 });
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const db = connect(process.env['FENEC_URL'] ?? 'http://127.0.0.1:8080', { token: process.env['FENEC_TOKEN'] });
  const w = start(db, async (to) => console.log('mail to', to));
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => void w.close());
}
