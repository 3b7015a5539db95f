/**
 * The User-Agent every request carries under Node, read where it lands (an
 * HTTP server on loopback); VERSION kept equal to package.json's; and
 * connect() with no URL reading FENEC_URL and FENEC_TOKEN, against a real
 * `fenec serve`.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import { test } from 'node:test';
import { connect, FenecError, VERSION } from '../src/client.js';
import { startServer } from './server.js';

test('every request names the SDK and Node in its User-Agent, through a fetch of the caller too', async (t) => {
  const seen: (string | undefined)[] = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.headers['user-agent']);
    req.resume();
    req.on('end', () => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"affected":0}'));
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.after(() => srv.close());
  const url = `http://127.0.0.1:${(srv.address() as AddressInfo).port}`;
  await connect(url).query('del jobs');
  await connect(url, { fetch: (input, init) => fetch(input, init) }).query('del jobs');
  const want = `fenecdb-js/${VERSION} node/${process.versions.node}`;
  assert.deepEqual(seen, [want, want]);
});

test("VERSION is package.json's", () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { version: string };
  assert.equal(VERSION, pkg.version);
});

test('connect() with no URL reads FENEC_URL and FENEC_TOKEN', async (t) => {
  const server = await startServer('--token', 'sekret');
  t.after(() => server.stop());
  const saved = { url: process.env['FENEC_URL'], token: process.env['FENEC_TOKEN'] };
  t.after(() => {
    for (const [k, v] of [['FENEC_URL', saved.url], ['FENEC_TOKEN', saved.token]] as const) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  });
  process.env['FENEC_URL'] = server.url;
  process.env['FENEC_TOKEN'] = 'sekret';
  assert.equal((await connect().query('create collection notes (body text)')).affected, 0);
  await assert.rejects(connect(undefined, { token: 'wrong' }).query('get notes'), (e: unknown) => e instanceof FenecError && e.status === 401);
  delete process.env['FENEC_URL'];
  assert.throws(() => connect(), /FENEC_URL is not set/);
});

test('each header goes once: the request\'s own win over the client\'s, Host and Content-Length are the transport\'s', async (t) => {
  const seen: string[][] = [];
  const srv = http.createServer((req, res) => {
    seen.push(req.rawHeaders);
    req.resume();
    req.on('end', () => res.writeHead(200, { 'Content-Type': 'application/json' }).end('{"affected":0}'));
  });
  await new Promise<void>((resolve) => srv.listen(0, '127.0.0.1', resolve));
  t.after(() => srv.close());
  const port = (srv.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${port}`;
  // A client's Content-Type and Content-Length give way to the request's own; its X-Trace is sent.
  const body = 'del jobs where note = "çé ✓"';
  await connect(url, { token: 'sekret', headers: { 'X-Trace': 'abc', 'Content-Type': 'text/plain', 'Content-Length': '1' } }).query(body, [], { wait: 100 });
  const raw = seen[0]!;
  const names = raw.filter((_, i) => i % 2 === 0).map((n) => n.toLowerCase());
  assert.deepEqual(names.filter((n, i) => names.indexOf(n) !== i), [], `a header sent twice: ${JSON.stringify(raw)}`);
  const get = (name: string) => raw[names.indexOf(name) * 2 + 1];
  assert.equal(get('host'), `127.0.0.1:${port}`);
  assert.equal(get('content-type'), 'application/json');
  assert.equal(Number(get('content-length')), Buffer.byteLength(JSON.stringify({ query: body, params: [] })));
  assert.equal(get('x-trace'), 'abc');
  assert.equal(get('authorization'), 'Bearer sekret');
  assert.equal(get('fenec-wait'), '100');
});
