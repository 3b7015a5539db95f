// A web page of another origin, in a real headless Chromium, against a
// real `fenec serve` run without a token (docs/http.md, "Browsers"): it
// can neither write nor read through fetch, a form's post or
// navigator.sendBeacon; a page of an origin given with --cors-origin can,
// and so can the server's own console page.

import { createServer } from 'node:http';
import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { chromium } from 'playwright-core';
import { servers, startFenec } from './fenec.mjs';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';

let browser;

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox'] });
});

after(async () => {
  await browser?.close();
  await Promise.all(servers.map((s) => s.stop()));
});

/** POSTs a statement without a token (from node: no Origin). */
async function query(s, query) {
  const r = await fetch(`${s.url}/query`, { method: 'POST', body: JSON.stringify({ query, params: [] }) });
  const body = await r.json();
  assert.equal(r.status, 200, `${query}: ${JSON.stringify(body)}`);
  return body;
}

/** The count of answers the server gave with status 403 origin refusals. */
async function refusals(s) {
  const text = await (await fetch(`${s.url}/_metrics`)).text();
  const m = /^fenec_http_requests_total\{route="unknown",status="403"\} (\d+)$/m.exec(text);
  return m ? Number(m[1]) : 0;
}

/** Waits until the server has refused want requests on their Origin. */
async function awaitRefusals(s, want) {
  const deadline = Date.now() + 10_000;
  for (;;) {
    const n = await refusals(s);
    if (n >= want) return n;
    if (Date.now() > deadline) throw new Error(`${n} refusals, want ${want}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The collection nums is there, with its one document. */
async function untouched(s, what) {
  assert.deepEqual(await query(s, 'get nums count'), [{ count: 1 }], what);
}

// What the attacks send: a /batch that drops nums. As a form's text/plain
// post the body is name=value: the "=" and the value land in a FenecQL
// comment, so the body is the same statement.
const DROP = JSON.stringify({ statements: [{ query: 'drop collection if exists nums' }] });
const FORM_NAME = '{"statements":[{"query":"drop collection if exists nums --';
const FORM_VALUE = '"}]}';

test('a page of another origin can neither write nor read a server without a token; an allowed origin can', async () => {
  const app = createServer((req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html' });
    res.end('<!doctype html><title>page</title>');
  });
  await new Promise((resolve) => app.listen(0, '127.0.0.1', resolve));
  const port = app.address().port;
  const allowed = `http://127.0.0.1:${port}`;
  const evil = `http://localhost:${port}`; // another origin, the same page server
  const s = await startFenec('--cors-origin', allowed);
  const context = await browser.newContext();
  try {
    await query(s, 'create collection nums (n int)');
    await query(s, 'put nums {n: 1}');
    const page = await context.newPage();
    await page.goto(`${evil}/`);
    let want = await refusals(s);

    // fetch, without a preflight: text/plain, no-cors (the answer unread).
    await page.evaluate(async ([url, body]) => {
      await fetch(`${url}/batch`, { method: 'POST', mode: 'no-cors', headers: { 'Content-Type': 'text/plain' }, body });
    }, [s.url, DROP]);
    want = await awaitRefusals(s, want + 1);
    await untouched(s, 'after a no-cors fetch');

    // fetch that would read: refused by the server, and the page is given
    // nothing (no CORS header).
    const read = await page.evaluate(async (url) => {
      try {
        const r = await fetch(`${url}/query`, { method: 'POST', headers: { 'Content-Type': 'text/plain' }, body: '{"query":"get nums"}' });
        return `read: ${r.status} ${await r.text()}`;
      } catch (e) {
        return `refused: ${e}`;
      }
    }, s.url);
    assert.match(read, /^refused: TypeError/);
    want = await awaitRefusals(s, want + 1);

    // A form's post, the navigation's answer shown in a frame.
    await page.evaluate(([url, name, value]) => {
      const frame = document.createElement('iframe');
      frame.name = 'out';
      document.body.append(frame);
      const form = document.createElement('form');
      form.method = 'POST';
      form.enctype = 'text/plain';
      form.action = `${url}/batch`;
      form.target = 'out';
      const input = document.createElement('input');
      input.type = 'hidden';
      input.name = name;
      input.value = value;
      form.append(input);
      document.body.append(form);
      form.submit();
    }, [s.url, FORM_NAME, FORM_VALUE]);
    want = await awaitRefusals(s, want + 1);
    await untouched(s, 'after a form post');

    // navigator.sendBeacon (text/plain, no preflight).
    const queued = await page.evaluate(([url, body]) => navigator.sendBeacon(`${url}/batch`, body), [s.url, DROP]);
    assert.equal(queued, true);
    want = await awaitRefusals(s, want + 1);
    await untouched(s, 'after a beacon');

    // The same form, posted from the server's own console page (same
    // origin), is run: the body is a real drop, and the refusals above
    // were the origin's.
    const own = await context.newPage();
    await own.goto(`${s.url}/console`);
    const ran = await own.evaluate(async (url) => {
      const r = await fetch(`${url}/query`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{"query":"get nums count"}' });
      return [r.status, await r.json()];
    }, s.url);
    assert.deepEqual(ran, [200, [{ count: 1 }]]);

    // A page of the allowed origin reads and writes (its JSON post is
    // preflighted, and allowed).
    const ok = await context.newPage();
    await ok.goto(`${allowed}/`);
    const wrote = await ok.evaluate(async ([url, body]) => {
      const r = await fetch(`${url}/batch`, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body });
      return [r.status, await r.json()];
    }, [s.url, JSON.stringify({ statements: [{ query: 'put nums {n: 2}' }, { query: 'get nums count' }] })]);
    assert.deepEqual(wrote, [200, { results: [{ affected: 1 }, [{ count: 2 }]] }]);
    assert.equal(await refusals(s), want, 'the allowed page was refused');
  } finally {
    await context.close();
    app.close();
  }
});
