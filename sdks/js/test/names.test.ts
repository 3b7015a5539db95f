/**
 * docs/sdks.md, "One word per idea": the public API holds the table's
 * names, and the old names stay as deprecated aliases that still work,
 * marked `@deprecated` in the declarations a user's editor reads.
 */

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import * as api from '../src/client.js';

const dts = (file: string) => readFileSync(new URL(`../src/${file}.d.ts`, import.meta.url), 'utf8');

test("the public API holds docs/sdks.md's names", () => {
  for (const name of ['Query', 'Raw', 'Expr', 'Inc', 'raw', 'expr', 'inc', 'worker', 'Worker', 'WorkerError', 'connect', 'Client']) {
    assert.ok(name in api, `no export ${name}`);
  }
  for (const m of ['renderRows', 'renderFirst', 'renderCount', 'renderInsert', 'renderUpdate', 'renderDelete']) {
    assert.equal(typeof (api.Query.prototype as unknown as Record<string, unknown>)[m], 'function', `Query.${m}`);
  }
  for (const m of ['runUntilEmpty', 'close']) {
    assert.equal(typeof (api.Worker.prototype as unknown as Record<string, unknown>)[m], 'function', `Worker.${m}`);
  }
  assert.ok(api.raw('a = ?', 1) instanceof api.Raw);
  assert.ok(api.expr('now()') instanceof api.Expr);
  assert.ok(api.inc(1) instanceof api.Inc);
  const err = new api.WorkerError('lost_lease', 7, new Error('gone'));
  assert.deepEqual([err.step, err.jobId, err.message, err.name], ['lost_lease', 7, 'lost_lease of job 7: gone', 'WorkerError']);
});

test('the deprecated aliases still work, and are marked @deprecated', () => {
  const db = api.connect('http://127.0.0.1:1');
  const jobs = db.from('jobs').where('id', 1);
  assert.deepEqual(jobs.toQuery(), jobs.renderRows());
  assert.deepEqual(jobs.toQuery('first'), jobs.renderFirst());
  assert.deepEqual(jobs.toQuery('count'), jobs.renderCount());
  assert.deepEqual(db.from('jobs').toQuery('insert', { a: 1 }), db.from('jobs').renderInsert({ a: 1 }));
  assert.deepEqual(jobs.toQuery('update', { a: 1 }, { require: 1 }), jobs.renderUpdate({ a: 1 }, { require: 1 }));
  assert.deepEqual(jobs.toQuery('delete', { returning: ['id'] }), jobs.renderDelete({ returning: ['id'] }));
  assert.ok(new api.Db('http://127.0.0.1:1') instanceof api.Client);

  // The owner option names the prefix, as ownerPrefix does.
  const w = api.worker(db.from('jobs'), () => undefined, { owner: 'old-name', wait: 0 });
  assert.equal(w.owner, 'old-name');
  const v = api.worker(db.from('jobs'), () => undefined, { ownerPrefix: 'new-name', wait: 0 });
  assert.equal(v.owner, 'new-name');
  void w.close();
  void v.close();

  assert.match(dts('query'), /@deprecated Use `renderRows\(\)`[^]*?\*\/\s*toQuery\(\): Statement;/);
  assert.match(dts('worker'), /@deprecated Use `ownerPrefix`[^]*?\*\/\s*owner\?: string \| undefined;/);
  assert.match(dts('client'), /@deprecated Use `Client`[^]*?\*\/\s*export declare const Db/);
});

test('the shortest lease is 100 ms', () => {
  const db = api.connect('http://127.0.0.1:1');
  assert.throws(() => api.worker(db.from('jobs'), () => undefined, { lease: 99 }), /lease must be a whole number from 100, not 99/);
  void api.worker(db.from('jobs'), () => undefined, { lease: 100, wait: 0 }).close();
});
