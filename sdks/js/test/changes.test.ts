/**
 * The change stream's consumer (docs/changes.md) against a real `fenec
 * serve`: a read hands out the writes in commit order and moves nothing;
 * an ack does; a second reader under the name is refused; batches()
 * acknowledges a batch when the next is asked for.
 */

import assert from 'node:assert/strict';
import { after, test } from 'node:test';
import { connect, FenecError } from '../src/client.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { launch, type Server } from './server.js';

/** A server with a file: on one with none (`:memory:`) a change carries no row (server/changes/hub.go). */
async function startServer(): Promise<Server> {
  const file = join(mkdtempSync(join(tmpdir(), 'fenec-changes-')), 'c.db');
  return launch({ file, args: ['--token', 'sekret', '--sync', 'always'] });
}

const stops: Server[] = [];
after(() => Promise.all(stops.map((s) => s.stop())));

test('a consumer reads the writes in commit order; only an ack moves it', async () => {
  const server = await startServer();
  stops.push(server);
  const db = connect(server.url, { token: 'sekret' });
  await db.query('create collection msgs (room text, body text)');
  await db.query('create collection other (n int)');
  const a = await db.query('insert msgs {room: "lobby", body: "a"}');
  await db.query('insert other {n: 1}');
  const b = await db.query('set msgs {body: "b"} where body = "a"');
  const c = await db.query('del msgs where body = "b"');

  const mailer = db.consumer('mailer', { collection: 'msgs' });
  const first = await mailer.read();
  assert.deepEqual(first.changes.map((x) => [x.op, x.position, x.row?.['body']]), [['put', a.seq, 'a'], ['put', b.seq, 'b'], ['delete', c.seq, undefined]]);
  assert.ok(first.changes.every((x) => x.collection === 'msgs' && x.id === first.changes[0]!.id));
  assert.equal(first.next, c.seq);
  // Not acknowledged: the same again.
  assert.deepEqual((await mailer.read()).changes, first.changes);
  await mailer.ack(first.next);
  const none = await mailer.read({ wait: 0 });
  assert.deepEqual(none.changes, []);

  // A held read answers the moment a write lands; a second reader meanwhile is refused.
  const held = mailer.read({ wait: 10_000 });
  let busy: unknown;
  for (let i = 0; i < 100 && busy === undefined; i++) {
    // Until the held read is at the server, this one may be the first: then it answers none.
    busy = await mailer.read({ wait: 0 }).then(() => undefined, (e: unknown) => e);
  }
  assert.ok(busy instanceof FenecError && busy.status === 409 && busy.code === 'consumer_busy', String(busy));
  const d = await db.query('insert msgs {room: "attic", body: "d"}');
  const woke = await held;
  assert.deepEqual(woke.changes.map((x) => x.position), [d.seq]);
});

test('batches() acknowledges a batch when the next is asked for, so a loop left early reads it again', async () => {
  const server = await startServer();
  stops.push(server);
  const db = connect(server.url, { token: 'sekret' });
  await db.query('create collection jobs (n int)');
  for (let i = 1; i <= 5; i++) await db.query('insert jobs {n: $1}', [i]);

  const worker = db.consumer('w', { collection: 'jobs' });
  const seen: unknown[] = [];
  for await (const batch of worker.batches({ limit: 2 })) {
    seen.push(...batch.changes.map((c) => c.row?.['n']));
    if (seen.length >= 4) break; // the second batch (3, 4) is not acknowledged
  }
  assert.deepEqual(seen, [1, 2, 3, 4]);
  const again = await worker.read();
  assert.deepEqual(again.changes.map((c) => c.row?.['n']), [3, 4, 5]);

  const ac = new AbortController();
  const it = worker.batches({ signal: ac.signal, wait: 10_000 });
  assert.deepEqual((await it.next()).value?.changes.map((c) => c.row?.['n']), [3, 4, 5]);
  const pending = it.next(); // acknowledges, then is held: nothing new
  await db.query('insert jobs {n: 6}');
  assert.deepEqual((await pending).value?.changes.map((c) => c.row?.['n']), [6]);
  ac.abort(new Error('done'));
  await assert.rejects(it.next(), /done/);
});
