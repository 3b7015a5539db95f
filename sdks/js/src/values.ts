/**
 * The pieces a statement is rendered from: identifiers (checked — this is the
 * injection boundary), parameters (numbered `$1…$n` left to right), and the
 * helpers `raw`, `expr` and `inc`. The rules are docs/sdks.md's.
 */

const IDENTIFIER = /^[A-Za-z_][A-Za-z0-9_]*$/;
const PATH = /^[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$/;
const INT64_MIN = -(2n ** 63n);
const INT64_MAX = 2n ** 63n - 1n;

/** Throws unless `name` is a collection name: `[A-Za-z_][A-Za-z0-9_]*`. */
export function collectionName(name: unknown): string {
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new TypeError(`collection name ${show(name)} is not an identifier`);
  }
  return name;
}

/** Throws unless `name` is a field name or a dotted path into one (`payload.to`). */
export function fieldName(name: unknown): string {
  if (typeof name !== 'string' || !PATH.test(name)) {
    throw new TypeError(`field ${show(name)} is not an identifier or a dotted path`);
  }
  return name;
}

/**
 * Throws unless `name` is a plain field name: the keys of a document or a
 * patch name fields, and a dotted key would name a path the server refuses.
 */
export function keyName(what: string, name: unknown): string {
  if (typeof name === 'string' && PATH.test(name) && !IDENTIFIER.test(name)) {
    throw new TypeError(`${what}: field ${show(name)} is a dotted path; a key must be a plain identifier`);
  }
  if (typeof name !== 'string' || !IDENTIFIER.test(name)) {
    throw new TypeError(`${what}: field ${show(name)} is not an identifier`);
  }
  return name;
}

/** Throws unless `n` is a non-negative safe integer; `what` names it in the message. */
export function nonNegative(what: string, n: unknown): number {
  if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) {
    throw new TypeError(`${what} must be a non-negative integer, not ${show(n)}`);
  }
  return n;
}

/**
 * A value for a `$n` parameter, as the request body will carry it: a `Date`
 * becomes its ISO-8601 UTC text with milliseconds, a `bigint` stays exact (in
 * int64), and what JSON cannot carry is refused here, at the call that took
 * it — `undefined`, `NaN` and ±Infinity (which `JSON.stringify` would turn
 * into `null`), an invalid `Date`, a helper in a value. `where` names the
 * place in the message.
 */
export function paramValue(where: string, v: unknown): unknown {
  switch (typeof v) {
    case 'undefined':
      throw new TypeError(`${where} is undefined`);
    case 'number':
      if (!Number.isFinite(v)) throw new TypeError(`${where}: ${v} is not a finite number`);
      return v;
    case 'bigint':
      if (v < INT64_MIN || v > INT64_MAX) throw new TypeError(`${where}: ${v} is outside int64`);
      return v;
    case 'string':
    case 'boolean':
      return v;
    case 'object':
      if (v === null) return v;
      if (v instanceof Date) {
        if (Number.isNaN(v.getTime())) throw new TypeError(`${where}: an invalid Date`);
        return v.toISOString();
      }
      if (v instanceof Fragment || v instanceof Inc) {
        throw new TypeError(`${where}: ${v.constructor.name.toLowerCase()}(…) is not a value here`);
      }
      if (Array.isArray(v)) return v.map((x, i) => paramValue(`${where}[${i}]`, x));
      return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, paramValue(`${where}.${k}`, x)]));
    default:
      throw new TypeError(`${where}: a ${typeof v} is not a value`);
  }
}

function show(v: unknown): string {
  return typeof v === 'string' ? JSON.stringify(v) : String(v);
}

/** The parameters of one statement, numbered in the order the text names them. */
export class Params {
  readonly values: unknown[] = [];

  /** Adds a checked value (see {@link paramValue}) and answers its mark, `$n`. */
  add(v: unknown): string {
    this.values.push(v);
    return `$${this.values.length}`;
  }
}

/**
 * FenecQL text with `?` marks (a `?` inside a '…' or "…" literal is not one),
 * split at the marks. A `$n` of its own is refused: the builder numbers them.
 */
class Fragment {
  readonly #parts: readonly string[];
  readonly #args: readonly unknown[];

  constructor(helper: string, text: unknown, args: readonly unknown[]) {
    if (typeof text !== 'string') throw new TypeError(`${helper}: the text must be a string`);
    this.#parts = splitMarks(helper, text);
    if (this.#parts.length - 1 !== args.length) {
      throw new TypeError(
        `${helper}(${JSON.stringify(text)}): ${this.#parts.length - 1} ? marks, but ${args.length} arguments`,
      );
    }
    this.#args = args.map((a, i) => paramValue(`${helper} argument ${i + 1}`, a));
  }

  /** The text with each mark replaced by the next parameter. */
  render(params: Params): string {
    let out = this.#parts[0] ?? '';
    for (let i = 0; i < this.#args.length; i++) {
      out += params.add(this.#args[i]) + (this.#parts[i + 1] ?? '');
    }
    return out;
  }
}

function splitMarks(helper: string, text: string): string[] {
  const parts: string[] = [];
  let start = 0;
  let quote = '';
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (quote) {
      if (c === '\\') i++;
      else if (c === quote) quote = '';
    } else if (c === "'" || c === '"') {
      quote = c;
    } else if (c === '?') {
      parts.push(text.slice(start, i));
      start = i + 1;
    } else if (c === '$' && /[0-9]/.test(text[i + 1] ?? '')) {
      throw new TypeError(`${helper}: write ? for a value, not ${text.slice(i, i + 2)}…`);
    }
  }
  parts.push(text.slice(start));
  return parts;
}

/** A condition written in FenecQL; made by {@link raw}. */
export class Raw extends Fragment {}

/** A value written in FenecQL; made by {@link expr}. */
export class Expr extends Fragment {}

/** A patch value that adds to the field's own value; made by {@link inc}. */
export class Inc {
  /** How much to add (negative to subtract). */
  readonly by: number | bigint;

  constructor(by: unknown) {
    if (!((typeof by === 'number' && Number.isFinite(by)) || typeof by === 'bigint')) {
      throw new TypeError(`inc needs a finite number, not ${show(by)}`);
    }
    this.by = paramValue('inc', by) as number | bigint;
  }
}

/**
 * A condition in FenecQL for `where`: each `?` becomes the next parameter.
 *
 * @example jobs.where(raw('run_at <= now() and attempts < ?', 5))
 */
export function raw(text: string, ...args: unknown[]): Raw {
  return new Raw('raw', text, args);
}

/**
 * A value in FenecQL for a patch, a document or a comparison: each `?`
 * becomes the next parameter.
 *
 * @example jobs.update({ run_at: expr('now() + ?', 30000) })
 */
export function expr(text: string, ...args: unknown[]): Expr {
  return new Expr('expr', text, args);
}

/**
 * A patch value that adds `n` to the field: `{attempts: inc(1)}` renders
 * `attempts: coalesce(attempts, 0) + $1`: a field never set counts from 0.
 */
export function inc(n: number | bigint = 1): Inc {
  return new Inc(n);
}
