/**
 * Rendering a builder's state to FenecQL text and `$n` parameters. Every
 * Fenec SDK renders the same text for the same chain; the cases are in
 * conformance/builder-golden.json.
 */

import { Expr, fieldName, Inc, keyName, nonNegative, paramValue, Params, Raw } from './values.js';

/** One FenecQL statement and its parameters: what `POST /query` is sent. */
export interface Statement {
  query: string;
  params: unknown[];
  /**
   * For a statement that answers rows (a read, a write with `returning`),
   * the collection a builder rendered it on: the rows decode by that
   * collection's declared field types (docs/sdks.md, "Rows").
   */
  collection?: string;
}

/** The comparison operators of `where(field, op, value)`. */
export type Operator = '=' | '!=' | '<' | '<=' | '>' | '>=' | 'in' | 'not in';

const OPERATORS: ReadonlySet<string> = new Set(['=', '!=', '<', '<=', '>', '>=', 'in', 'not in']);

/** A direction of `order`. */
export type Direction = 'asc' | 'desc';

/** One `where` condition. */
export type Condition =
  | { readonly field: string; readonly op: Operator | 'is null'; readonly value?: unknown }
  | { readonly raw: Raw };

/** What a builder holds: everything but the endpoint. */
export interface State {
  readonly collection: string;
  readonly where: readonly Condition[];
  readonly order: readonly { readonly field: string; readonly dir: Direction }[];
  readonly select?: readonly string[];
  readonly limit?: number;
  readonly offset?: number;
  /** `near <field> <point> [exact]`: nearest first over a `@geo` field. */
  readonly near?: { readonly field: string; readonly point: readonly [number, number]; readonly exact: boolean };
  /** `ifAbsent()` (no `set`) or `upsert(set)`: an insert renders `put c {…} if absent [else set {…}]`. */
  readonly absent?: { readonly set?: unknown };
}

/** The options that change a write's text. */
export interface WriteClauses {
  /** `true` answers every field (`returning *`); a list answers those fields. */
  returning?: boolean | readonly string[] | undefined;
  /** Refuse (412, nothing written) unless exactly this many rows are written. */
  require?: number | undefined;
}

/** Makes the condition of `where(field, value)`, `where(field, op, value)` or `where(raw(…))`. */
export function condition(args: readonly unknown[]): Condition {
  const [first, second, third] = args;
  if (args.length === 1) {
    if (!(first instanceof Raw)) throw new TypeError('where with one argument takes raw(…)');
    return { raw: first };
  }
  const field = fieldName(first);
  if (args.length === 2) {
    if (second === null) return { field, op: 'is null' };
    return { field, op: '=', value: whereValue(field, second) };
  }
  if (args.length !== 3) throw new TypeError(`where takes 1 to 3 arguments, not ${args.length}`);
  if (typeof second !== 'string' || !OPERATORS.has(second)) {
    throw new TypeError(`operator ${JSON.stringify(second)} is not one of ${[...OPERATORS].join(', ')}`);
  }
  const op = second as Operator;
  if (op === 'in' || op === 'not in') {
    if (!Array.isArray(third)) throw new TypeError(`${op} needs a list of values for ${field}`);
    if (third.length === 0) throw new TypeError(`${field} ${op}: an empty list (it would match ${op === 'in' ? 'nothing' : 'everything'})`);
  }
  return { field, op, value: whereValue(field, third) };
}

function whereValue(field: string, v: unknown): unknown {
  if (v instanceof Expr) return v;
  if (v instanceof Raw || v instanceof Inc) {
    throw new TypeError(`where ${field}: ${v instanceof Raw ? 'raw' : 'inc'} is not a value (use expr)`);
  }
  return paramValue(`where ${field}`, v);
}

/** `get c [select …] [where …] [order …] [limit n] [offset n]`. */
export function renderRows(s: State): Statement {
  const p = new Params();
  const select = s.select ? ` select ${s.select.join(', ')}` : '';
  refuse(s, 'a read', ['absent']);
  const query = `get ${s.collection}${select}${where(s, p)}${near(s, p)}${order(s)}${limits(s, true)}`;
  return { query, params: p.values, collection: s.collection };
}

/** `get c [where …] count`. */
export function renderCount(s: State): Statement {
  refuse(s, 'count', ['absent']);
  const p = new Params();
  return { query: `get ${s.collection}${where(s, p)} count`, params: p.values };
}

/**
 * `insert c {…}` or `insert c [{…}, …]`; after `ifAbsent()`,
 * `put c {…} if absent`, and after `upsert(set)`,
 * `put c {…} if absent else set {…}`.
 */
export function renderInsert(s: State, docs: unknown): Statement {
  refuse(s, 'insert', ['where', 'order', 'limit', 'offset', 'select', 'near']);
  const p = new Params();
  let text: string;
  if (Array.isArray(docs)) {
    if (docs.length === 0) throw new TypeError('insert: an empty list of documents');
    text = `[${docs.map((d) => doc(d, p)).join(', ')}]`;
  } else {
    text = doc(docs, p);
  }
  if (s.absent === undefined) return { query: `insert ${s.collection} ${text}`, params: p.values };
  const set = s.absent.set === undefined ? '' : ` else set ${patch('upsert', s.absent.set, p)}`;
  return { query: `put ${s.collection} ${text} if absent${set}`, params: p.values };
}

/** `set c {k: v, …} [where …] [order …] [limit n] [returning …] [require n]`. */
export function renderUpdate(s: State, patch_: unknown, opts: WriteClauses = {}): Statement {
  refuse(s, 'update', ['offset', 'select', 'absent']);
  const p = new Params();
  const set = patch('update', patch_, p);
  const query = `set ${s.collection} ${set}${where(s, p)}${near(s, p)}${order(s)}${limits(s, false)}${writeTail(opts)}`;
  return answersRows(opts) ? { query, params: p.values, collection: s.collection } : { query, params: p.values };
}

/** `del c [where …] [order …] [limit n] [returning …] [require n]`. */
export function renderDelete(s: State, opts: WriteClauses = {}): Statement {
  refuse(s, 'delete', ['offset', 'select', 'absent']);
  const p = new Params();
  const query = `del ${s.collection}${where(s, p)}${near(s, p)}${order(s)}${limits(s, false)}${writeTail(opts)}`;
  return answersRows(opts) ? { query, params: p.values, collection: s.collection } : { query, params: p.values };
}

/** Checks a `select` or `returning` list: fields and paths, or `*` alone. */
export function fieldList(what: string, list: readonly unknown[]): readonly string[] {
  if (list.length === 0) throw new TypeError(`${what}: an empty list of fields`);
  if (list.length === 1 && list[0] === '*') return ['*'];
  return Object.freeze(list.map(fieldName));
}

function refuse(s: State, endpoint: string, clauses: readonly (keyof State)[]): void {
  for (const c of clauses) {
    const v = s[c];
    if (v !== undefined && !(Array.isArray(v) && v.length === 0)) {
      throw new TypeError(`${endpoint} cannot use ${c === 'absent' ? 'ifAbsent or upsert' : c}`);
    }
  }
}

function where(s: State, p: Params): string {
  if (s.where.length === 0) return '';
  const wrap = s.where.length > 1;
  const parts = s.where.map((c) => {
    if ('raw' in c) return wrap ? `(${c.raw.render(p)})` : c.raw.render(p);
    if (c.op === 'is null') return `${c.field} is null`;
    return `${c.field} ${c.op} ${c.value instanceof Expr ? c.value.render(p) : p.add(c.value)}`;
  });
  return ` where ${parts.join(' and ')}`;
}

function near(s: State, p: Params): string {
  if (s.near === undefined) return '';
  if (s.order.length > 0) throw new TypeError(`near ${s.near.field} orders the rows: it takes no order`);
  return ` near ${s.near.field} ${p.add([...s.near.point])}${s.near.exact ? ' exact' : ''}`;
}

/** Checks a point of `near`: `[longitude, latitude]`, two finite numbers. */
export function point(field: string, v: unknown): readonly [number, number] {
  if (!Array.isArray(v) || v.length !== 2 || !v.every((x) => typeof x === 'number')) {
    throw new TypeError(`near ${field}: a point is [longitude, latitude], not ${Array.isArray(v) ? `a list of ${v.length}` : typeof v}`);
  }
  paramValue(`near ${field}`, v);
  return Object.freeze([v[0] as number, v[1] as number]);
}

function order(s: State): string {
  if (s.order.length === 0) return '';
  return ` order ${s.order.map((o) => (o.dir === 'desc' ? `${o.field} desc` : o.field)).join(', ')}`;
}

function limits(s: State, withOffset: boolean): string {
  const limit = s.limit === undefined ? '' : ` limit ${s.limit}`;
  return withOffset && s.offset !== undefined ? `${limit} offset ${s.offset}` : limit;
}

function answersRows(opts: WriteClauses): boolean {
  return opts.returning !== undefined && opts.returning !== false;
}

function writeTail(opts: WriteClauses): string {
  let out = '';
  if (opts.returning === true) out += ' returning *';
  else if (Array.isArray(opts.returning)) out += ` returning ${fieldList('returning', opts.returning).join(', ')}`;
  else if (opts.returning !== undefined && opts.returning !== false) {
    throw new TypeError('returning takes true, false or a list of fields');
  }
  if (opts.require !== undefined) out += ` require ${nonNegative('require', opts.require)}`;
  return out;
}

function fields(what: string, obj: unknown): [string, unknown][] {
  if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) {
    throw new TypeError(`${what} takes an object of fields`);
  }
  const entries = Object.entries(obj);
  for (const [k] of entries) keyName(what, k);
  return entries;
}

/** `{k: v, …}` of an update or an upsert's `else set`. */
function patch(what: string, obj: unknown, p: Params): string {
  const entries = fields(what, obj);
  if (entries.length === 0) throw new TypeError(`${what}: an empty patch`);
  return `{${entries.map(([k, v]) => `${k}: ${patchValue(what, k, v, p)}`).join(', ')}}`;
}

function doc(d: unknown, p: Params): string {
  const parts = fields('insert', d).map(([k, v]) => {
    if (v instanceof Inc || v instanceof Raw) {
      throw new TypeError(`insert ${k}: ${v instanceof Inc ? 'inc' : 'raw'} is not a document value`);
    }
    return `${k}: ${v instanceof Expr ? v.render(p) : p.add(paramValue(`insert ${k}`, v))}`;
  });
  return `{${parts.join(', ')}}`;
}

// inc counts from nothing: a null (or, in an upsert, never written) field
// is 0, so a counter needs no first write (docs/sdks.md, rule 8).
function patchValue(what: string, k: string, v: unknown, p: Params): string {
  if (v === null) return 'null';
  if (v instanceof Expr) return v.render(p);
  if (v instanceof Inc) return `coalesce(${k}, 0) + ${p.add(v.by)}`;
  if (v instanceof Raw) throw new TypeError(`${what} ${k}: raw is not a value (use expr)`);
  return p.add(paramValue(`${what} ${k}`, v));
}
