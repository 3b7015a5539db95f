/**
 * Builder chains as conformance/builder-golden.json describes them: a list
 * of calls, `from` first and an endpoint last, with `{"$raw": [text, …args]}`,
 * `{"$expr": [text, …args]}` and `{"$inc": n}` for the helpers.
 */

import { type Db, expr, inc, type Query, raw, type Statement } from '../src/client.js';

/** One call of a chain. */
export interface Call {
  call: string;
  args: unknown[];
}

const ENDPOINTS = new Set(['rows', 'first', 'count', 'insert', 'update', 'delete']);

/** Replays a chain on `db`'s builder and renders its endpoint, without sending. */
export function render(db: Db, chain: readonly Call[]): Statement {
  const [from, ...rest] = chain;
  const end = rest.pop();
  if (from?.call !== 'from' || !end || !ENDPOINTS.has(end.call)) {
    throw new Error(`a chain goes from \`from\` to an endpoint: ${JSON.stringify(chain)}`);
  }
  let q: Query = db.from(from.args[0] as string);
  for (const { call, args } of rest) {
    const a = args.map(decode);
    switch (call) {
      case 'where':
        q = (q.where as (...xs: unknown[]) => Query)(...a);
        break;
      case 'order':
        q = q.order(a[0] as string, a[1] as 'asc' | 'desc' | undefined);
        break;
      case 'limit':
        q = q.limit(a[0] as number);
        break;
      case 'offset':
        q = q.offset(a[0] as number);
        break;
      case 'select':
        q = q.select(...(a as string[]));
        break;
      default:
        throw new Error(`no builder call ${call}`);
    }
  }
  return (q.toQuery as (...xs: unknown[]) => Statement)(end.call, ...end.args.map(decode));
}

/** Turns the helpers' JSON forms back into helpers, at any depth. */
export function decode(v: unknown): unknown {
  if (Array.isArray(v)) return v.map(decode);
  if (typeof v !== 'object' || v === null) return v;
  const entries = Object.entries(v);
  const [only] = entries;
  if (entries.length === 1 && only) {
    const [key, arg] = only;
    if (key === '$raw') return raw(...(arg as [string, ...unknown[]]));
    if (key === '$expr') return expr(...(arg as [string, ...unknown[]]));
    if (key === '$inc') return inc(arg as number);
  }
  return Object.fromEntries(entries.map(([k, x]) => [k, decode(x)]));
}
