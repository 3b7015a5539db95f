/**
 * https: the client against `fenec serve --tls-cert`, trusting the test's
 * own CA (made with the openssl CLI) through an undici Agent.
 */

import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { test } from 'node:test';
import { Agent } from 'undici';
import { connect, FenecError } from '../src/client.js';
import { launch } from './server.js';

interface Certs {
  ca: string;
  cert: string;
  key: string;
}

/** A CA and a certificate it signed for 127.0.0.1 and localhost, as PEM files. */
function makeCerts(dir: string, name: string): Certs {
  const f = (x: string) => join(dir, x);
  const openssl = (...args: string[]) => execFileSync('openssl', args, { stdio: 'pipe' });
  const ec = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];
  openssl('req', '-x509', ...ec, '-days', '1', '-subj', `/CN=${name} CA`, '-keyout', f(`${name}-ca-key.pem`), '-out', f(`${name}-ca.pem`));
  openssl('req', ...ec, '-subj', `/CN=${name}`, '-keyout', f(`${name}-key.pem`), '-out', f(`${name}.csr`));
  writeFileSync(f(`${name}.ext`), 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n');
  openssl('x509', '-req', '-in', f(`${name}.csr`), '-CA', f(`${name}-ca.pem`), '-CAkey', f(`${name}-ca-key.pem`),
    '-CAcreateserial', '-days', '1', '-extfile', f(`${name}.ext`), '-out', f(`${name}.pem`));
  return { ca: f(`${name}-ca.pem`), cert: f(`${name}.pem`), key: f(`${name}-key.pem`) };
}

test('https with a CA of its own, and refused without it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fenec-tls-'));
  const c = makeCerts(dir, 'server');
  const server = await launch({ args: ['--tls-cert', c.cert, '--tls-key', c.key] });
  try {
    assert.match(server.url, /^https:\/\//);
    const agent = new Agent({ connect: { ca: readFileSync(c.ca) } });
    const db = connect(server.url, { dispatcher: agent });
    await db.query('create collection notes (s text)');
    await db.from('notes').insert({ s: 'over tls' });
    assert.deepEqual(await db.from('notes').select('s').rows(), [{ s: 'over tls' }]);
    await agent.close();

    await assert.rejects(connect(server.url, { timeout: 5000 }).from('notes').select('s').rows(), (err: unknown) => {
      assert.ok(err instanceof FenecError, String(err));
      assert.equal(err.code, 'network');
      assert.match(err.message, /TLS: the server's certificate failed the check \(UNABLE_TO_VERIFY_LEAF_SIGNATURE/);
      return true;
    });
  } finally {
    await server.stop();
  }
});

test('a client certificate for --tls-client-ca', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'fenec-tls-'));
  const c = makeCerts(dir, 'server');
  const clients = makeCerts(dir, 'clients');
  const server = await launch({ args: ['--tls-cert', c.cert, '--tls-key', c.key, '--tls-client-ca', clients.ca] });
  try {
    const ca = readFileSync(c.ca);
    const withCert = new Agent({ connect: { ca, cert: readFileSync(clients.cert), key: readFileSync(clients.key) } });
    const db = connect(server.url, { dispatcher: withCert });
    await db.query('create collection notes (s text)');
    assert.deepEqual(await db.from('notes').select('s').rows(), []);
    await withCert.close();
    const without = new Agent({ connect: { ca } });
    await assert.rejects(connect(server.url, { dispatcher: without, timeout: 5000 }).from('notes').select('s').rows(), (err: unknown) => {
      assert.ok(err instanceof FenecError && err.code === 'network', String(err));
      return true;
    });
    await without.close();
  } finally {
    await server.stop();
  }
});
