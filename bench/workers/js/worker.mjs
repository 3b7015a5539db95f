// make worker-bench's JS worker: worker() on the collection jobs with a
// handler that does nothing, at the concurrency given. It prints "ready"
// as it starts the worker and closes it (a graceful stop) when its stdin
// is closed.
//
// Before "ready" it warms V8, as a worker that has run for a while is warm
// (its hot code compiled, as the Kotlin program warms its JVM): a worker of
// the same concurrency runs rounds of 10 000 empty jobs of a collection of
// its own (dropped afterwards) until a round's CPU per job is not 5 %
// under the best round's before it, or for at most a minute. Node has no JIT counter
// the JVM's way: on a cold start V8 spends about a third of a 10 000-job
// run's client CPU compiling and warming its inline caches.
// FENEC_BENCH_WARM=0 skips it. The harness says so in the results' header.
//
//   node worker.mjs URL CONCURRENCY
import { connect, expr, worker } from '@fenecdb/web/client';
import { setTimeout as sleep } from 'node:timers/promises';

const [url, concurrency] = process.argv.slice(2);
const db = connect(url);
await warm(Number(concurrency), Number(process.env.FENEC_BENCH_WARM ?? 10_000));
console.log('ready');
const w = worker(db.from('jobs'), async () => {}, { concurrency: Number(concurrency) });
process.stdin.resume();
process.stdin.on('end', async () => {
  await w.close();
  process.exit(0);
});

/** Rounds of `jobs` empty jobs of the collection `warmup` through a worker, until the CPU per job has settled; then it is dropped. */
async function warm(concurrency, jobs) {
  if (!(jobs > 0)) return;
  await db.query('create collection warmup (payload json, run_at timestamp @sorted, owner text, attempts int, error text)');
  const queue = db.from('warmup');
  const since = Date.now();
  let best = Infinity;
  for (let round = 1; Date.now() - since < 60_000; round++) {
    for (let start = 0; start < jobs; start += 1000) {
      const docs = [];
      for (let i = start; i < Math.min(jobs, start + 1000); i++) docs.push({ payload: { to: `user${i}@example.com` }, run_at: expr('now()'), attempts: 0 });
      await queue.insert(docs);
    }
    const cpu = process.cpuUsage();
    const started = Date.now();
    // Not runUntilEmpty(): the measured worker's held claims.
    const w = worker(queue, async () => {}, { concurrency });
    while ((await queue.count()) > 0) await sleep(50);
    await w.close();
    const used = process.cpuUsage(cpu);
    const perJob = (used.user + used.system) / jobs;
    console.error(`warm-up round ${round}: ${jobs} jobs in ${Date.now() - started} ms, ${perJob.toFixed(1)} µs CPU/job`);
    if (perJob > best * 0.95) break;
    best = perJob;
  }
  await db.query('drop collection warmup');
}
