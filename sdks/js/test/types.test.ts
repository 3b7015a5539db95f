/**
 * The types a user compiles against, checked by `tsc` when this file is
 * built (strict, exactOptionalPropertyTypes, noUncheckedIndexedAccess): each
 * `@ts-expect-error` below fails the build if its line compiles. The test
 * then runs the lines that should compile.
 */

import assert from 'node:assert/strict';
import { test } from 'node:test';
import { connect, expr, inc, path, raw } from '../src/client.js';

/** A row type written as an interface (no index signature). */
interface Job {
  id: number;
  payload: { to: string };
  run_at: Date | null;
  owner: string | null;
  attempts: number;
  error: string | null;
}

test('a row type checks field names; options take undefined', () => {
  const env: Record<string, string | undefined> = {};
  const db = connect('http://127.0.0.1:1', { token: env['FENEC_TOKEN'], timeout: undefined });
  const jobs = db.from<Job>('jobs');

  const ok = [
    jobs.where('owner', 'w1').where('attempts', '<', 5).order('run_at', 'desc').select('id', 'payload').renderRows(),
    jobs.where(path('payload.to'), 'ada@example.com').order(path('payload.to')).select(path('payload.to')).select('*').renderRows(),
    jobs.where(raw('run_at <= now()')).renderUpdate({ owner: 'w1', run_at: expr('now() + ?', 1000), attempts: inc(1), error: null }),
    jobs.renderInsert({ payload: { to: 'x' }, run_at: expr('now()'), attempts: 0 }),
  ];
  assert.equal(ok.length, 4);

  // Compiled, never run: each line is a mistake tsc must refuse.
  const mistakes = () => {
    // @ts-expect-error a field the row type lacks
    jobs.where('ownr', 'w1');
    // @ts-expect-error a dotted path needs path(…)
    jobs.where('payload.to', 'x');
    // @ts-expect-error order by a field the row type lacks
    jobs.order('runat');
    // @ts-expect-error select a field the row type lacks
    jobs.select('id', 'ownr');
    // @ts-expect-error a patch key the row type lacks
    jobs.renderUpdate({ ownr: 'w1' });
    // @ts-expect-error a patch value of the wrong type
    jobs.renderUpdate({ attempts: 'one' });
    // @ts-expect-error inc(…) is not a document value
    jobs.renderInsert({ attempts: inc(1) });
    // @ts-expect-error a where value of the wrong type for its field
    jobs.where('attempts', 'five');
    // @ts-expect-error an in list of the wrong type
    jobs.where('id', 'in', ['1']);
    // @ts-expect-error a comparison value of the wrong type
    jobs.where('owner', '=', 5);
    // @ts-expect-error rows typed by query<T> have T's fields only
    void db.query<Job>('get jobs').then((r) => r.rows?.[0]?.ownr);
  };
  void mistakes;

  // A where value typed by its field, an expr, null; a path takes any value.
  const typed = [
    jobs.where('attempts', 3).where('owner', null).where('run_at', '<=', expr('now()')).renderRows(),
    jobs.where('id', 'in', [1, 2]).where(path('payload.to'), 'in', ['a', 'b']).renderRows(),
  ];
  assert.equal(typed[1]?.query, 'get jobs where id in $1 and payload.to in $2');
  const result: Promise<Job[] | undefined> = db.query<Job>('get jobs').then((r) => r.rows).catch(() => undefined);
  void result;

  // Without a row type, any field name is taken (and checked at run time).
  db.from('jobs').where('anything', 1).order('payload.to').select('x.y');

  const rows: Promise<Job[]> = jobs.rows().catch(() => []);
  const first: Promise<Job | null> = jobs.first().catch(() => null);
  void rows;
  void first;
});
