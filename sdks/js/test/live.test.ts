/**
 * Live queries (docs/changes.md) against a real `fenec serve`: the first
 * rows, then inserts, updates and deletes as they are written; a refusal;
 * the caller's AbortSignal; and a server restarted mid-stream, after which
 * the iterator reconnects with Last-Event-ID and goes on.
 */

import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';
import { connect, FenecError, type LiveEvent } from '../src/client.js';
import { launch, type Server, startServer } from './server.js';

const stops: Server[] = [];
after(() => Promise.all(stops.map((s) => s.stop())));

/** The next event of it, or a failure after `ms` (the machine may be loaded: generous). */
async function next(it: AsyncIterator<LiveEvent>, ms = 15_000): Promise<LiveEvent> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no event in ${ms} ms`)), ms);
  });
  try {
    const r = await Promise.race([it.next(), late]);
    assert.equal(r.done, false, 'the live query ended');
    return r.value as LiveEvent;
  } finally {
    clearTimeout(timer);
  }
}

test('a builder watches its rows: the first rows, then each insert, update and delete it matches', async () => {
  const server = await startServer('--token', 'sekret');
  stops.push(server);
  const db = connect(server.url, { token: 'sekret' });
  await db.query('create collection msgs (room text, body text)');
  await db.query('insert msgs [{room: "lobby", body: "a"}, {room: "lobby", body: "b"}, {room: "attic", body: "c"}]');

  const ac = new AbortController();
  const it = db.from('msgs').where('room', 'lobby').select('body').watch({ signal: ac.signal });
  const first = await next(it);
  assert.equal(first.name, 'rows');
  assert.equal(first.data['last'], true);
  assert.deepEqual((first.data['rows'] as unknown[]).map((r) => (r as { body: string }).body).sort(), ['a', 'b']);
  assert.ok(first.position > 0);

  const put = await db.query('insert msgs {room: "lobby", body: "d"}');
  const id = (await db.query('get msgs where body = "d" select id')).rows![0]!['id'];
  const ins = await next(it);
  assert.deepEqual([ins.name, ins.data['row']], ['insert', { id, body: 'd' }]);
  assert.equal(ins.position, put.seq);

  await db.query('insert msgs {room: "attic", body: "not seen"}'); // matches not: no event
  const upd = await db.query('set msgs {body: "d2"} where id = $1', [id]);
  const ev = await next(it);
  assert.deepEqual([ev.name, ev.data['row'], ev.position], ['update', { id, body: 'd2' }, upd.seq]);

  await db.query('set msgs {room: "attic"} where id = $1', [id]); // no longer matches: a delete
  const gone = await next(it);
  assert.deepEqual([gone.name, gone.data['id']], ['delete', id]);

  ac.abort(new Error('enough'));
  await assert.rejects(it.next(), /enough/);

  // The same as text with params; leaving the loop closes it.
  for await (const ev of db.watch('get msgs where room = $1 select body', ['lobby'])) {
    assert.deepEqual([ev.name, (ev.data['rows'] as { body: string }[]).map((r) => r.body).sort()], ['rows', ['a', 'b']]);
    break;
  }
  // Both given up: the server holds no live query open (fenec_changes_subscribers).
  const open = async () => {
    const text = await (await fetch(`${server.url}/_metrics`, { headers: { Authorization: 'Bearer sekret' } })).text();
    return Number(/^fenec_changes_subscribers (\S+)$/m.exec(text)?.[1]);
  };
  let n = await open();
  for (const deadline = Date.now() + 10_000; n !== 0 && Date.now() < deadline; n = await open()) await new Promise((r) => setTimeout(r, 50));
  assert.equal(n, 0, 'live queries still open at the server');
});

test('a query that cannot be live, or a wrong token, is refused at once with the server\'s error', async () => {
  const server = await startServer('--token', 'sekret');
  stops.push(server);
  const db = connect(server.url, { token: 'sekret' });
  await db.query('create collection msgs (room text, body text)');
  const ordered = db.from('msgs').order('body').watch();
  await assert.rejects(ordered.next(), (e: unknown) => e instanceof FenecError && e.status === 400 && e.code === 'bad_request');
  const wrong = connect(server.url, { token: 'nope' }).from('msgs').watch();
  await assert.rejects(wrong.next(), (e: unknown) => e instanceof FenecError && e.status === 401);
  const missing = db.from('nothere').watch();
  await assert.rejects(missing.next(), (e: unknown) => e instanceof FenecError && e.status === 404);
});

test('a server restarted mid-stream: the iterator reconnects with Last-Event-ID and sees the writes after', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'fenec-live-')), 'live.db');
  let server = await launch({ file, args: ['--token', 'sekret', '--sync', 'always'] });
  stops.push(server);
  const sent: (string | null)[] = []; // each live request's Last-Event-ID
  const recording: typeof fetch = (input, init) => {
    if (new Headers(init?.headers).get('Accept') === 'text/event-stream') sent.push(new Headers(init?.headers).get('Last-Event-ID'));
    return fetch(input, init);
  };
  let db = connect(server.url, { token: 'sekret' });
  await db.query('create collection jobs (owner text, n int)');
  await db.query('insert jobs {owner: "w1", n: 1}');

  const live = connect(server.url, { token: 'sekret', fetch: recording });
  const it = live.from('jobs').where('owner', 'w1').watch({ retryDelay: 100, retries: 100 });
  const first = await next(it);
  assert.equal(first.name, 'rows');
  const put = await db.query('insert jobs {owner: "w1", n: 2}');
  const ins = await next(it);
  assert.equal(ins.name, 'insert');
  assert.equal(ins.position, put.seq);

  // Stopped: the server says so (closing, shutdown) before it goes.
  await server.stop();
  const closing = await next(it);
  assert.deepEqual([closing.name, closing.data['reason']], ['closing', 'shutdown']);

  server = await launch({ file, http: server.addr, args: ['--token', 'sekret', '--sync', 'always'] });
  stops.push(server);
  db = connect(server.url, { token: 'sekret' });
  await db.query('insert jobs {owner: "w1", n: 3}');
  const id = (await db.query('get jobs where n = 3 select id')).rows![0]!['id'];
  // Whatever order the reconnect and the write came in, the row is seen:
  // in a reset (the rows as they are now) or as an insert after it.
  let seen = false;
  for (let i = 0; i < 10 && !seen; i++) {
    const ev = await next(it);
    assert.ok(['reset', 'gap', 'insert'].includes(ev.name), `after the restart: ${ev.name}`);
    if (ev.name === 'reset') seen = (ev.data['rows'] as { id: unknown }[]).some((r) => r.id === id);
    if (ev.name === 'insert') seen = (ev.data['row'] as { id: unknown }).id === id;
  }
  assert.ok(seen, 'the row written after the restart was never seen');
  assert.equal(sent[0], null);
  assert.ok(sent.length >= 2, 'no reconnect');
  assert.equal(sent.at(-1), String(closing.position > 0 ? closing.position : ins.position));
  await it.return();
});

test('a live query that meets a server unable to answer yet (503 unavailable, as while it shuts down) tries again and goes on', async () => {
  const http = await import('node:http');
  const server = await startServer();
  stops.push(server);
  const upstream = new URL(server.url);
  let refused = 0;
  // A loopback proxy that answers the first two requests 503, as a
  // server shutting down does, and streams every later one through.
  const proxy = http.createServer((req, res) => {
    if (refused < 2) {
      refused++;
      req.resume();
      res.writeHead(503, { 'Content-Type': 'application/json' }).end(JSON.stringify({ error: 'the server is shutting down', code: 'unavailable' }));
      return;
    }
    const forward = http.request({ host: upstream.hostname, port: upstream.port, path: req.url, method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  const db = connect(server.url);
  await db.query('create collection msgs (body text)');
  await db.query('insert msgs {body: "a"}');
  const address = proxy.address() as { port: number };
  const ac = new AbortController();
  try {
    const through = connect(`http://127.0.0.1:${address.port}`);
    const it = through.from('msgs').watch({ signal: ac.signal, retryDelay: 10 });
    const first = await next(it);
    assert.equal(first.name, 'rows');
    assert.deepEqual((first.data['rows'] as { body: string }[]).map((r) => r.body), ['a']);
    assert.equal(refused, 2, 'both 503s were met before the rows');
  } finally {
    ac.abort();
    proxy.closeAllConnections();
    await new Promise((resolve) => proxy.close(resolve));
  }
});

test('a request sent on a kept-alive connection that the server end resets before reading it goes again, once, on a new connection', async () => {
  const net = await import('node:net');
  const server = await startServer();
  stops.push(server);
  const upstream = new URL(server.url);
  // A loopback proxy in front of the real server: on the first connection
  // it passes the first request and its answer, then resets the
  // connection as the second request arrives, before the server reads any
  // of it (a node that died with the connection kept alive); every later
  // connection passes through.
  let connections = 0;
  const open = new Set<import('node:net').Socket>();
  const proxy = net.createServer((client) => {
    const first = connections++ === 0;
    open.add(client);
    const to = net.connect(Number(upstream.port), upstream.hostname);
    open.add(to);
    let requests = 0;
    client.on('data', (chunk: Buffer) => {
      if (first && chunk.includes('POST ') && ++requests === 2) {
        client.resetAndDestroy();
        to.destroy();
        return;
      }
      to.write(chunk);
    });
    to.on('data', (chunk: Buffer) => client.write(chunk));
    client.on('error', () => to.destroy());
    to.on('error', () => client.destroy());
    client.on('close', () => to.destroy());
  });
  await new Promise<void>((resolve) => proxy.listen(0, '127.0.0.1', resolve));
  try {
    const db = connect(`http://127.0.0.1:${(proxy.address() as { port: number }).port}`);
    await db.query('create collection c (n int)'); // the first connection, kept alive
    await db.query('insert c {n: 1}'); // reset on it: sent again on a new one
    const counted = await db.query('get c count');
    assert.deepEqual(counted.rows, [{ count: 1 }]);
    assert.ok(connections >= 2, `${connections} connections`);
  } finally {
    for (const socket of open) socket.destroy();
    await new Promise((resolve) => proxy.close(resolve));
  }
});
