// make worker-bench's JS worker: worker() on the collection jobs with a
// handler that does nothing, at the concurrency given. It prints "ready"
// as it starts the worker and closes it (a graceful stop) when its stdin
// is closed.
//
//   node worker.mjs URL CONCURRENCY
import { connect, worker } from '@fenecdb/web/client';

const [url, concurrency] = process.argv.slice(2);
const db = connect(url);
console.log('ready');
const w = worker(db.from('jobs'), async () => {}, { concurrency: Number(concurrency) });
process.stdin.resume();
process.stdin.on('end', async () => {
  await w.close();
  process.exit(0);
});
