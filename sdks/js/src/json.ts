/**
 * JSON with exact int64 (docs/sdks.md, "Values"): `stringify` writes a
 * `bigint` as its digits, and `parse` reads an integer outside ±2^53 as a
 * `bigint`, where `JSON.parse` would round it to the nearest double.
 */

/** `JSON.stringify`, with a `bigint` written as a JSON number. */
export function stringify(v: unknown): string {
  // Most bodies hold no bigint: the built-in writes them, several times
  // faster than the walk below. One it cannot write (a bigint a toJSON
  // returns) is written by the walk.
  if (!holdsBigint(v)) {
    try {
      return JSON.stringify(v) ?? 'null';
    } catch {
      // written below
    }
  }
  return walk(v);
}

/** Whether a JSON value holds a bigint anywhere inside (a toJSON's result is not looked at). */
function holdsBigint(v: unknown): boolean {
  if (typeof v === 'bigint') return true;
  if (typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) {
    for (const x of v) if (holdsBigint(x)) return true;
    return false;
  }
  for (const k in v) if (holdsBigint((v as Record<string, unknown>)[k])) return true;
  return false;
}

function walk(v: unknown): string {
  if (typeof v === 'bigint') return v.toString();
  if (typeof v !== 'object' || v === null) return JSON.stringify(v) ?? 'null';
  const j = (v as { toJSON?: () => unknown }).toJSON;
  if (typeof j === 'function') return walk(j.call(v));
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined || typeof x === 'function' ? 'null' : walk(x))).join(',')}]`;
  const parts: string[] = [];
  for (const [k, x] of Object.entries(v)) {
    if (x !== undefined && typeof x !== 'function') parts.push(`${JSON.stringify(k)}:${walk(x)}`);
  }
  return `{${parts.join(',')}}`;
}

const LONG_DIGITS = /[0-9]{16}/;

const NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;

/**
 * `JSON.parse`, with an integer that a double cannot hold exactly read as a
 * `bigint`. Such numbers are put in quotes under a mark the text does not
 * hold, and turned back by the reviver.
 */
export function parse(text: string): unknown {
  // Every integer a double cannot hold exactly has 16 digits or more: text
  // with no such run of digits (most answers) is plain JSON.
  if (!LONG_DIGITS.test(text)) return JSON.parse(text);
  let mark = 'fenec-int64:';
  while (text.includes(mark)) mark += '~';
  let out = '';
  let last = 0;
  let big = false;
  for (let i = 0; i < text.length; i++) {
    const c = text[i];
    if (c === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === '\\') i++;
    } else if (c === '-' || (c !== undefined && c >= '0' && c <= '9')) {
      NUMBER.lastIndex = i;
      const m = NUMBER.exec(text);
      if (!m) break; // not JSON: JSON.parse says where
      const n = m[0];
      if (/^-?[0-9]+$/.test(n) && !Number.isSafeInteger(Number(n))) {
        out += `${text.slice(last, i)}"${mark}${n}"`;
        last = i + n.length;
        big = true;
      }
      i += n.length - 1;
    }
  }
  if (!big) return JSON.parse(text);
  return JSON.parse(out + text.slice(last), (_k, v: unknown) =>
    typeof v === 'string' && v.startsWith(mark) ? BigInt(v.slice(mark.length)) : v);
}
