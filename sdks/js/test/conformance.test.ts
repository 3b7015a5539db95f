/**
 * Every case file of conformance/cases/, replayed through `db.query` against
 * a fresh `fenec serve --clock manual`, as conformance/README.md says.
 */

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { test } from 'node:test';
import { connect, FenecError, type Result } from '../src/client.js';
import { moveClock } from '../src/generated/transport.js';
import { startServer } from './server.js';

interface Step {
  line: number;
  query?: string;
  params?: unknown[];
  advance_ms?: number;
  expect?: { value?: unknown; no_row?: true; refused?: number };
}

interface Page {
  page: string;
  source: string;
  steps: Step[];
}

const CASES = new URL('../../../../conformance/cases/', import.meta.url);

const FILES = readdirSync(CASES).filter((f) => f.endsWith('.json')).sort();

test('conformance/cases/ holds case files', () => {
  assert.ok(FILES.length >= 2, `${FILES.length} case files in ${CASES.pathname}`);
});

for (const file of FILES) {
  const page = JSON.parse(readFileSync(new URL(file, CASES), 'utf8')) as Page;
  test(`conformance: ${page.source}`, async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const db = connect(server.url);
    for (const step of page.steps) {
      const at = `${page.source}:${step.line}: ${step.query ?? `advance ${step.advance_ms} ms`}`;
      if (step.advance_ms !== undefined) {
        const reply = await moveClock({ baseUrl: server.url, fetch }, { advance_ms: step.advance_ms });
        assert.ok(reply.ok, `${at}: ${reply.status}`);
        continue;
      }
      let answer: Result | undefined;
      let refused: FenecError | undefined;
      try {
        answer = await db.query(step.query ?? '', step.params ?? []);
      } catch (err) {
        if (!(err instanceof FenecError) || err.status === 0) throw err;
        refused = err;
      }
      check(at, step.expect, answer, refused);
    }
  });
}

function check(at: string, expect: Step['expect'], result: Result | undefined, refused: FenecError | undefined): void {
  const answer = result?.rows ?? (result === undefined ? undefined : { affected: result.affected });
  if (expect?.refused !== undefined) {
    assert.equal(refused?.status, expect.refused, `${at}: answered ${JSON.stringify(answer)}, not refused ${expect.refused}`);
    return;
  }
  assert.equal(refused, undefined, `${at}: refused ${refused?.status}: ${refused?.message}`);
  if (expect?.no_row) {
    assert.deepEqual(answer, [], `${at}: answered ${JSON.stringify(answer)}, not no row`);
  } else if (expect && 'value' in expect) {
    assert.ok(answer !== undefined && !(Array.isArray(answer) && answer.length === 0), `${at}: answered no row`);
    const first = Array.isArray(answer) ? Object.values(answer[0] ?? {})[0] : answer?.affected;
    assert.equal(first, expect.value, `${at}: answered ${JSON.stringify(answer)}`);
  }
}
