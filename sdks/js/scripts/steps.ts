/**
 * The step interpreter of conformance/builder-golden.json (format 2, as
 * docs/sdks.md describes it): typed values to JS values, steps to builder
 * calls, the end to the statement it renders.
 */

import { type Client, expr, inc, type Query, raw, type Statement } from '../src/client.js';

/** A typed value: exactly one key. */
export type Typed =
  | { null: true }
  | { bool: boolean }
  | { int: string }
  | { float: number | 'NaN' | 'Infinity' | '-Infinity' }
  | { string: string }
  | { timestamp: string }
  | { json: unknown }
  | { list: Typed[] }
  | { expr: Fragment }
  | { inc: Typed };

/** The text and arguments of a raw condition or an expr. */
export interface Fragment {
  text: string;
  args: Typed[];
}

/** A builder step. */
export type Step =
  | { op: 'where'; field: string; value: Typed; cmp?: string }
  | { op: 'where'; raw: Fragment }
  | { op: 'order'; field: string; dir?: string }
  | { op: 'limit' | 'offset'; n: number }
  | { op: 'select'; fields: string[] }
  | { op: 'near'; field: string; point: Typed; exact?: boolean }
  | { op: 'ifAbsent' }
  | { op: 'upsert'; set: Record<string, Typed> };

/** What renders the statement. */
export type End =
  | { op: 'rows' | 'first' | 'count' }
  | { op: 'insert'; doc?: Record<string, Typed>; docs?: Record<string, Typed>[] }
  | { op: 'update'; patch: Record<string, Typed>; require?: number; returning?: string[] }
  | { op: 'delete'; require?: number; returning?: string[] };

/** One case: a statement (`query`, `params`) or a refusal (`refuse`, a word of the error). */
export interface Case {
  name: string;
  from: string;
  steps: Step[];
  end: End;
  query?: string;
  params?: unknown[];
  refuse?: string;
}

/** A typed value as the JS builder takes it: an int outside ±2^53 as a bigint. */
export function value(v: Typed): unknown {
  const [kind, x] = Object.entries(v)[0] as [string, never];
  switch (kind) {
    case 'null': return null;
    case 'int': return Number.isSafeInteger(Number(x)) ? Number(x) : BigInt(x);
    case 'float': return Number(x);
    case 'timestamp': return new Date(x);
    case 'list': return (x as Typed[]).map(value);
    case 'expr': return expr((x as Fragment).text, ...(x as Fragment).args.map(value));
    case 'inc': return inc(value(x) as number);
    default: return x; // bool, string, json
  }
}

const doc = (d: Record<string, Typed>) => Object.fromEntries(Object.entries(d).map(([k, v]) => [k, value(v)]));

/** Replays a case's steps on `db.from(c.from)` and renders its end, without sending. */
export function render(db: Client, c: Pick<Case, 'from' | 'steps' | 'end'>): Statement {
  let q: Query = db.from(c.from);
  for (const s of c.steps) {
    if (s.op === 'where' && 'raw' in s) q = q.where(raw(s.raw.text, ...s.raw.args.map(value)));
    else if (s.op === 'where' && s.cmp !== undefined) q = q.where(s.field, s.cmp as '=', value(s.value));
    else if (s.op === 'where') q = q.where(s.field, value(s.value));
    else if (s.op === 'order') q = q.order(s.field, s.dir as 'asc' | undefined);
    else if (s.op === 'select') q = q.select(...s.fields);
    else if (s.op === 'near') q = q.near(s.field, value(s.point) as [number, number], s.exact === undefined ? {} : { exact: s.exact });
    else if (s.op === 'ifAbsent') q = q.ifAbsent();
    else if (s.op === 'upsert') q = q.upsert(doc(s.set));
    else q = q[s.op](s.n);
  }
  const e = c.end;
  const clauses = () => ({
    ...('require' in e && e.require !== undefined ? { require: e.require } : {}),
    ...('returning' in e && e.returning !== undefined ? { returning: e.returning } : {}),
  });
  switch (e.op) {
    case 'insert': return q.renderInsert(e.docs ? e.docs.map(doc) : doc(e.doc ?? {}));
    case 'update': return q.renderUpdate(doc(e.patch), clauses());
    case 'delete': return q.renderDelete(clauses());
    case 'rows': return q.renderRows();
    case 'first': return q.renderFirst();
    default: return q.renderCount();
  }
}
