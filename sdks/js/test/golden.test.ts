import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { connect } from '../src/client.js';
import { type Call, render } from '../scripts/chain.js';
import { GOLDEN, golden } from '../scripts/golden.js';

interface Case {
  name: string;
  chain: Call[];
  query?: string;
  params?: unknown[];
  error?: string;
}

const text = readFileSync(GOLDEN, 'utf8');
const { cases } = JSON.parse(text) as { cases: Case[] };
const db = connect('http://golden.invalid');

test('builder-golden.json is what scripts/golden.ts writes', () => {
  assert.equal(text, golden(), 'stale: run make generate');
});

test('builder-golden.json has the cases it must', () => {
  assert.ok(cases.length >= 60, `${cases.length} cases`);
  for (const name of ['worker claim', 'worker ack', 'worker fail with backoff']) {
    assert.ok(cases.some((c) => c.name === name), name);
  }
});

for (const c of cases) {
  test(`golden: ${c.name}`, () => {
    if (c.error !== undefined) {
      assert.throws(() => render(db, c.chain), (err: Error) => err.message.includes(c.error!));
    } else {
      assert.deepEqual(render(db, c.chain), { query: c.query, params: c.params });
    }
  });
}
