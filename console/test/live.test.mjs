// The console's live view in a real headless Chromium against a real
// `fenec serve`: a collection's rows appear, change and disappear as the
// test writes them through HTTP, with no reload; a condition narrows them;
// and after the server restarts under the page, the view resumes
// (Last-Event-ID) and shows the writes made after.

import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
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

async function q(s, query, params = []) {
  const r = await fetch(s.url + '/query', { method: 'POST', headers: { Authorization: 'Bearer admin' }, body: JSON.stringify({ query, params }) });
  const body = await r.json();
  assert.equal(r.status, 200, `${query}: ${JSON.stringify(body)}`);
  return body;
}

async function openLive(s, collection, where) {
  const context = await browser.newContext({ viewport: { width: 1400, height: 820 }, locale: 'en-US', timezoneId: 'UTC' });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(`uncaught: ${e.message}`));
  await page.goto(`${s.url}/console`);
  await page.fill('#token', 'admin');
  await page.click('#token-form button[type=submit]');
  await page.click('#collections summary');
  await page.click(`tr[data-collection="${collection}"] button.live`);
  if (where !== undefined) {
    await page.fill('#live-where', where);
    await page.click('#live-where-form button');
  }
  // Marked: a reload would lose it.
  await page.evaluate(() => { window.sameLoad = true; });
  return { page, errors, close: () => context.close() };
}

/** Waits until the live view shows exactly these rows: id → the field's text. */
async function waitRows(page, field, want) {
  const expected = JSON.stringify(want);
  try {
    await page.waitForFunction(
      ([f, w]) => JSON.stringify(Object.fromEntries([...document.querySelectorAll('#live-body tr[data-id]')]
        .map((tr) => [tr.dataset.id, tr.querySelector(`td[data-field="${f}"]`)?.textContent ?? null]))) === w,
      [field, expected], { timeout: 15_000 });
  } catch (err) {
    const shown = await page.$$eval('#live-body tr', (trs) => trs.map((t) => t.textContent));
    throw new Error(`the live view shows ${JSON.stringify(shown)}, not ${expected} (${await page.textContent('#live-status')}; error: ${await page.textContent('#error')})`, { cause: err });
  }
}

test('the live view shows rows appear, change and disappear as they are written, with no reload', async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'create collection msgs (room text, body text)');
  await q(s, 'insert msgs [{room: "lobby", body: "one"}, {room: "attic", body: "two"}]');
  const { page, errors, close } = await openLive(s, 'msgs');
  await waitRows(page, 'body', { 1: 'one', 2: 'two' });

  await q(s, 'insert msgs {room: "lobby", body: "three"}');
  await waitRows(page, 'body', { 1: 'one', 2: 'two', 3: 'three' });
  await q(s, 'set msgs {body: "ONE"} where id = 1');
  await waitRows(page, 'body', { 1: 'ONE', 2: 'two', 3: 'three' });
  await q(s, 'del msgs where id = 2');
  await waitRows(page, 'body', { 1: 'ONE', 3: 'three' });

  // A condition: only the lobby's rows, and a row that leaves it goes.
  await page.fill('#live-where', 'room = "lobby"');
  await page.click('#live-where-form button');
  await waitRows(page, 'body', { 1: 'ONE', 3: 'three' });
  await q(s, 'insert msgs {room: "attic", body: "four"}');
  await q(s, 'set msgs {room: "attic"} where id = 3');
  await waitRows(page, 'body', { 1: 'ONE' });
  await q(s, 'set msgs {room: "lobby"} where id = 4');
  await waitRows(page, 'body', { 1: 'ONE', 4: 'four' });

  assert.equal(await page.evaluate(() => window.sameLoad), true, 'the page was reloaded');
  await page.click('#live-close');
  assert.equal(await page.isHidden('#live'), true);
  assert.deepEqual(errors, []);
  await close();
});

test('the live view resumes after the server restarts under it, and shows the writes made after', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'fenec-console-live-')), 'live.db');
  const first = await startFenec('--token', 'admin', '--file', file, '--sync', 'always');
  await q(first, 'create collection msgs (room text, body text)');
  await q(first, 'insert msgs [{room: "lobby", body: "one"}, {room: "lobby", body: "two"}]');
  const { page, errors, close } = await openLive(first, 'msgs');
  await waitRows(page, 'body', { 1: 'one', 2: 'two' });

  await first.stop();
  const addr = new URL(first.url).host;
  const second = await startFenec('--token', 'admin', '--file', file, '--sync', 'always', '--http', addr);
  await q(second, 'insert msgs {room: "lobby", body: "three"}');
  await q(second, 'del msgs where id = 1');
  await waitRows(page, 'body', { 2: 'two', 3: 'three' });
  await q(second, 'set msgs {body: "TWO"} where id = 2');
  await waitRows(page, 'body', { 2: 'TWO', 3: 'three' });
  assert.equal(await page.evaluate(() => window.sameLoad), true, 'the page was reloaded');
  assert.deepEqual(errors, []);
  await close();
});

test('a big collection (1 200 rows: more than one rows event of up to 1 000): the first 500 by id are shown, and a delete moves the page', async () => {
  const s = await startFenec('--token', 'admin');
  await q(s, 'create collection msgs (room text, body text)');
  const docs = Array.from({ length: 1200 }, (_, i) => `{room: "r", body: "m${i + 1}"}`);
  await q(s, `insert msgs [${docs.join(', ')}]`);
  const { page, errors, close } = await openLive(s, 'msgs');
  const ids = () => page.$$eval('#live-body tr[data-id]', (trs) => trs.map((t) => Number(t.dataset.id)));
  await page.waitForFunction(() => document.querySelectorAll('#live-body tr[data-id]').length === 500, null, { timeout: 15_000 });
  assert.deepEqual(await ids(), Array.from({ length: 500 }, (_, i) => i + 1));
  assert.match(await page.textContent('#live-body'), /1,200 rows: the first 500 by id are shown/);
  await q(s, 'del msgs where id = 1');
  await page.waitForFunction(() => document.querySelector('#live-body tr[data-id]')?.dataset.id === '2', null, { timeout: 15_000 });
  assert.deepEqual(await ids(), Array.from({ length: 500 }, (_, i) => i + 2));
  assert.deepEqual(errors, []);
  await close();
});
