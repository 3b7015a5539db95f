/**
 * What a user configures on connect() (docs/sdks.md): headers on every
 * request, opt-in retries that never apply a write twice (an
 * Idempotency-Key on every write sent again), errors that name the
 * request, and one JS type for int fields — against a real `fenec serve`,
 * behind a loopback proxy the test controls.
 */

import assert from 'node:assert/strict';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { connect, FenecError } from '../src/client.js';
import { launch, type Server } from './server.js';

interface Seen {
  method: string;
  url: string;
  headers: http.IncomingHttpHeaders;
  body: string;
}

/**
 * A proxy to `server`: each request is recorded, then `act` decides —
 * `forward` it, `cut` (forward it, let the server answer, and close the
 * client's connection without the answer), or answer `503` itself.
 */
async function proxy(t: { after(fn: () => void): void }, server: Server, act: (seen: Seen, n: number) => 'forward' | 'cut' | '503') {
  const upstream = new URL(server.url);
  const seen: Seen[] = [];
  const p = http.createServer((req, res) => {
    let body = '';
    req.on('data', (b: Buffer) => (body += b.toString()));
    req.on('end', () => {
      const s: Seen = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      seen.push(s);
      const what = act(s, seen.length);
      if (what === '503') {
        res.writeHead(503, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: 'the node is starting', code: 'unavailable' }));
        return;
      }
      const forward = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
        const chunks: Buffer[] = [];
        answer.on('data', (b: Buffer) => chunks.push(b));
        answer.on('end', () => {
          // The server has answered, so the write is applied: the client never hears of it.
          if (what === 'cut') return void req.socket.destroy();
          res.writeHead(answer.statusCode ?? 502, answer.headers).end(Buffer.concat(chunks));
        });
      });
      forward.on('error', () => res.destroy());
      forward.end(body);
    });
  });
  await new Promise<void>((resolve) => p.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    p.closeAllConnections();
    p.close();
  });
  return { url: `http://127.0.0.1:${(p.address() as AddressInfo).port}`, seen };
}

const queries = (seen: Seen[]) => seen.filter((s) => s.url === '/query');

test('a write whose answer is lost after the server applied it is retried under one key and applied once', { timeout: 30_000 }, async (t) => {
  const server = await launch();
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection notes (body text)');
  let cuts = 0;
  const { url, seen } = await proxy(t, server, (s) => (s.body.includes('insert notes') && cuts++ === 0 ? 'cut' : 'forward'));
  const client = connect(url, { maxRetries: 2 });
  const r = await client.query('insert notes {body: $1}', ['once']);
  assert.deepEqual([r.affected, r.replayed], [1, true], 'the retry is answered the first answer, replayed');
  assert.equal(await db.from('notes').count(), 1, 'the insert applied once');
  const sent = queries(seen).filter((s) => s.body.includes('insert notes'));
  assert.equal(sent.length, 2);
  const keys = sent.map((s) => s.headers['idempotency-key']);
  assert.ok(typeof keys[0] === 'string' && keys[0].length > 0, 'the first try carries a key');
  assert.equal(keys[1], keys[0], 'the retry carries the same key');

  // A read is sent again as it is, with no key.
  cuts = 0;
  const reads = await proxy(t, server, (s, n) => (n === 1 ? 'cut' : 'forward'));
  const reader = connect(reads.url, { maxRetries: 1 });
  assert.equal((await reader.query('get notes count')).rows?.[0]?.['count'], 1);
  assert.deepEqual(queries(reads.seen).map((s) => s.headers['idempotency-key']), [undefined, undefined]);
});

test('without retries the lost answer is an error that names the request, retryable', { timeout: 30_000 }, async (t) => {
  const server = await launch();
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection notes (body text)');
  const { url } = await proxy(t, server, (s) => (s.url === '/query' ? 'cut' : 'forward'));
  const long = `insert notes {body: $1} ${' '.repeat(300)}`;
  const err = await connect(url).query(long, ['x'], { idempotencyKey: 'k-1' }).then(() => assert.fail('answered'), (e: unknown) => e);
  assert.ok(err instanceof FenecError, String(err));
  assert.deepEqual([err.code, err.retryable, err.method, err.node, err.idempotencyKey], ['network', true, 'POST /query', new URL(url).host, 'k-1']);
  assert.equal(err.statement, `${long.slice(0, 200)}…`);
  assert.equal(await db.from('notes').count(), 1, 'applied once, and not sent again');

  // A refusal is not retryable, and is not sent again.
  let n = 0;
  const counted = await proxy(t, server, () => (n++, 'forward'));
  const refused = await connect(counted.url, { maxRetries: 3 }).query('get nothing_here').then(() => assert.fail('answered'), (e: unknown) => e);
  assert.ok(refused instanceof FenecError && !refused.retryable && refused.code === 'not_found', String(refused));
  assert.equal(queries(counted.seen).length, 1);
});

test("an unavailable answer is retried with backoff; the client's headers go on every request", { timeout: 30_000 }, async (t) => {
  const server = await launch();
  t.after(() => server.stop());
  await connect(server.url).query('create collection notes (body text)');
  const { url, seen } = await proxy(t, server, (s, n) => (s.url === '/query' && n <= 3 ? '503' : 'forward'));
  const client = connect(url, { maxRetries: 3, headers: { 'X-Trace': 'abc', 'User-Agent': 'my-app/2' } });
  const started = Date.now();
  await client.from('notes').insert({ body: 'after three 503s' });
  const sent = queries(seen);
  assert.equal(sent.length, 4);
  assert.ok(sent.every((s) => s.headers['x-trace'] === 'abc' && s.headers['user-agent'] === 'my-app/2'), JSON.stringify(sent.map((s) => s.headers)));
  assert.equal(new Set(sent.map((s) => s.headers['idempotency-key'])).size, 1, 'one key for every try');
  assert.ok(Date.now() - started < 10_000);
  // Without headers of its own, the SDK's User-Agent.
  const plain = await proxy(t, server, () => 'forward');
  await connect(plain.url).query('get notes count');
  assert.match(String(plain.seen[0]?.headers['user-agent']), /^fenecdb-js\/\S+ node\//);
  assert.throws(() => connect(url, { maxRetries: -1 }), /maxRetries must be a whole number from 0/);
});

test('int fields read as one JS type, chosen at connect()', { timeout: 30_000 }, async (t) => {
  const server = await launch();
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection counts (n int, f float)');
  await db.from('counts').insert([{ n: 7, f: 1.5 }, { n: 9223372036854775807n, f: 2 }]);
  const small = db.from('counts').where('n', 7);
  assert.deepEqual(await small.select('id', 'n', 'f').first(), { id: 1, n: 7, f: 1.5 });
  await assert.rejects(db.from('counts').rows(), /field n: 9223372036854775807 is beyond ±2\^53, which a number cannot hold exactly: connect with \{ int64: 'bigint' \}/);
  const big = connect(server.url, { int64: 'bigint' });
  assert.deepEqual(await big.from('counts').order('id').rows(), [{ id: 1n, n: 7n, f: 1.5 }, { id: 2n, n: 9223372036854775807n, f: 2 }]);
  const text = connect(server.url, { int64: 'string' });
  assert.deepEqual(await text.from('counts').order('id').rows(), [{ id: '1', n: '7', f: 1.5 }, { id: '2', n: '9223372036854775807', f: 2 }]);
  assert.throws(() => connect(server.url, { int64: 'double' as 'number' }), /int64 must be 'number', 'bigint' or 'string'/);
});

test('after: read-your-writes, sent as Fenec-After', { timeout: 30_000 }, async (t) => {
  const server = await launch();
  t.after(() => server.stop());
  const db = connect(server.url);
  await db.query('create collection notes (body text)');
  const { url, seen } = await proxy(t, server, () => 'forward');
  const client = connect(url);
  const { seq } = await client.query('insert notes {body: $1}', ['x']);
  assert.equal(await client.from('notes').count({ after: seq }), 1);
  assert.equal(queries(seen).at(-1)?.headers['fenec-after'], String(seq));
  // A lone server has no other node to wait for: a write it has not made is refused at once.
  const err = await client.from('notes').count({ after: seq + 1000 }).then(() => assert.fail('answered'), (e: unknown) => e);
  assert.ok(err instanceof FenecError && err.status === 400, String(err));
  await assert.rejects(client.from('notes').count({ after: -1 }), /after must be a whole number from 0/);
});
