/**
 * conformance/builder-golden.json (docs/sdks.md): it is what
 * scripts/golden.ts writes, it holds the cases the contract asks for, and
 * every case renders — or is refused — as it says, through scripts/steps.ts.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { connect } from '../src/client.js';
import { parse, stringify } from '../src/json.js';
import { GOLDEN, golden } from '../scripts/golden.js';
import { type Case, render } from '../scripts/steps.js';

const text = readFileSync(GOLDEN, 'utf8');
const file = parse(text) as { format: number; cases: Case[] };
const db = connect('http://golden.invalid');

test('builder-golden.json is what scripts/golden.ts writes', () => {
  assert.equal(text, golden(), 'stale: run make generate-sdks');
});

test('builder-golden.json is format 2 with the cases the contract asks for', () => {
  assert.equal(file.format, 2);
  assert.ok(file.cases.length >= 150, `${file.cases.length} cases`);
  const names = new Set(file.cases.map((c) => c.name));
  for (const name of [
    'worker claim', 'worker claim with a where of its own', 'worker extend', 'worker ack', 'worker fail',
    'worker dead letter', 'worker release', 'select twice replaces', 'dotted insert key', 'dotted patch key',
    'inc NaN', 'where NaN', 'empty in list', 'raw marks and args differ', 'raw with its own parameter',
    'where null is null', 'where op = null is a parameter', 'where int64 beyond a double',
  ]) {
    assert.ok(names.has(name), name);
  }
  for (const word of ['identifier', 'finite', 'empty', 'marks', '$']) {
    assert.ok(file.cases.some((c) => c.refuse === word), `no case refused with "${word}"`);
  }
});

for (const c of file.cases) {
  test(`golden: ${c.name}`, () => {
    if (c.refuse !== undefined) {
      assert.throws(() => render(db, c), (err: Error) => err.message.toLowerCase().includes(c.refuse!));
      return;
    }
    const s = render(db, c);
    assert.equal(s.query, c.query);
    // Exactly as the request body carries them: compared as JSON text, so an int64 is compared digit by digit.
    assert.equal(stringify(s.params), stringify(c.params));
  });
}
