/**
 * Writes conformance/builder-golden.json: each chain below, rendered by this
 * (the reference) builder to FenecQL text and parameters, or the word its
 * error names. Every SDK's tests check every case.
 *
 *   node dist/scripts/golden.js           write the file
 *   node dist/scripts/golden.js --check   exit 1 if the file is not what it would be
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect } from '../src/client.js';
import { type Call, render } from './chain.js';

/** The golden file, from this script's place in dist/scripts/. */
export const GOLDEN = fileURLToPath(new URL('../../../../conformance/builder-golden.json', import.meta.url));

type Step = [call: string, ...args: unknown[]];
const R = (text: string, ...args: unknown[]) => ({ $raw: [text, ...args] });
const E = (text: string, ...args: unknown[]) => ({ $expr: [text, ...args] });
const I = (n: number) => ({ $inc: n });
const jobs: Step = ['from', 'jobs'];

/** [name, chain, the word the error names (error cases only)]. */
const CASES: [string, Step[], string?][] = [
  // reads: where, in each form
  ['rows of a collection', [jobs, ['rows']]],
  ['where string', [jobs, ['where', 'owner', 'w1'], ['rows']]],
  ['where number', [jobs, ['where', 'id', 3], ['rows']]],
  ['where bool', [['from', 'users'], ['where', 'active', true], ['rows']]],
  ['where null is null', [jobs, ['where', 'run_at', null], ['rows']]],
  ['where list value', [['from', 'posts'], ['where', 'tags', ['a', 'b']], ['rows']]],
  ['where json value', [jobs, ['where', 'payload', { to: 'ada@example.com' }], ['rows']]],
  ['where path', [jobs, ['where', 'payload.to', 'ada@example.com'], ['rows']]],
  ['where deep path', [jobs, ['where', 'payload.to.domain', 'example.com'], ['rows']]],
  ['where op =', [jobs, ['where', 'attempts', '=', 1], ['rows']]],
  ['where op !=', [jobs, ['where', 'owner', '!=', 'w1'], ['rows']]],
  ['where op <', [jobs, ['where', 'attempts', '<', 5], ['rows']]],
  ['where op <=', [jobs, ['where', 'attempts', '<=', 5], ['rows']]],
  ['where op >', [jobs, ['where', 'attempts', '>', 0], ['rows']]],
  ['where op >=', [jobs, ['where', 'attempts', '>=', 5], ['rows']]],
  ['where op in', [jobs, ['where', 'id', 'in', [1, 2, 3]], ['rows']]],
  ['where op not in', [jobs, ['where', 'owner', 'not in', ['w1', 'w2']], ['rows']]],
  ['where op = null is a parameter', [jobs, ['where', 'owner', '=', null], ['rows']]],
  ['where op with expr value', [jobs, ['where', 'run_at', '<=', E('now() + ?', 1000)], ['rows']]],
  ['where twice joins with and', [jobs, ['where', 'id', 1], ['where', 'owner', 'w1'], ['rows']]],
  ['where three with null', [jobs, ['where', 'owner', null], ['where', 'attempts', '>=', 5], ['where', 'error', 'smtp timeout'], ['rows']]],
  // reads: raw
  ['raw alone', [jobs, ['where', R('run_at <= now()')], ['rows']]],
  ['raw with args', [jobs, ['where', R('attempts >= ? and attempts <= ?', 1, 5)], ['rows']]],
  ['raw mark in single quotes', [jobs, ['where', R("error = 'why?' and attempts > ?", 3)], ['rows']]],
  ['raw mark in double quotes with escape', [jobs, ['where', R('error = "say \\"what?\\"" or owner = ?', 'w1')], ['rows']]],
  ['raw then where wraps', [jobs, ['where', R('owner = ? or owner is null', 'w1')], ['where', 'attempts', '<', 5], ['rows']]],
  ['where then raw wraps', [jobs, ['where', 'id', 2], ['where', R('run_at <= now() + ?', 1000)], ['rows']]],
  ['two raws', [jobs, ['where', R('run_at <= now()')], ['where', R('lower(owner) = ?', 'w1')], ['rows']]],
  // reads: order, limit, offset, select
  ['order', [jobs, ['order', 'run_at'], ['rows']]],
  ['order desc', [jobs, ['order', 'run_at', 'desc'], ['rows']]],
  ['order asc renders bare', [jobs, ['order', 'run_at', 'asc'], ['rows']]],
  ['order several keys', [['from', 'tasks'], ['order', 'priority', 'desc'], ['order', 'run_at'], ['order', 'id', 'asc'], ['rows']]],
  ['order path', [jobs, ['order', 'payload.to', 'desc'], ['rows']]],
  ['limit', [jobs, ['limit', 10], ['rows']]],
  ['limit 0', [jobs, ['limit', 0], ['rows']]],
  ['limit twice keeps the last', [jobs, ['limit', 10], ['limit', 20], ['rows']]],
  ['offset', [jobs, ['offset', 20], ['rows']]],
  ['limit and offset', [jobs, ['offset', 20], ['limit', 10], ['rows']]],
  ['select', [jobs, ['select', 'id', 'owner'], ['rows']]],
  ['select paths', [jobs, ['select', 'id', 'payload.to'], ['rows']]],
  ['select star', [jobs, ['select', '*'], ['rows']]],
  ['every read clause', [jobs, ['limit', 5], ['where', 'owner', 'w1'], ['select', 'id', 'error'], ['offset', 10], ['order', 'run_at', 'desc'], ['where', R('attempts > ?', 2)], ['rows']]],
  ['first', [jobs, ['first']]],
  ['first overrides limit', [jobs, ['where', 'owner', 'w1'], ['limit', 10], ['first']]],
  ['first keeps order and offset', [jobs, ['order', 'run_at'], ['offset', 3], ['first']]],
  ['count', [jobs, ['count']]],
  ['count where', [jobs, ['where', 'run_at', null], ['count']]],
  ['count keeps only where', [jobs, ['where', 'owner', 'w1'], ['order', 'run_at'], ['limit', 10], ['offset', 5], ['count']]],
  // insert
  ['insert one', [jobs, ['insert', { owner: 'w1', attempts: 0 }]]],
  ['insert json value', [jobs, ['insert', { payload: { to: 'ada@example.com', tags: ['a'] }, attempts: 0 }]]],
  ['insert expr', [jobs, ['insert', { payload: { to: 'bo@example.com' }, run_at: E('now()'), attempts: 0 }]]],
  ['insert expr with args', [jobs, ['insert', { payload: 'x', run_at: E('now() + ?', 3600000), attempts: 0 }]]],
  ['insert null is a parameter', [jobs, ['insert', { owner: null, attempts: 0 }]]],
  ['insert many', [jobs, ['insert', [{ payload: { to: 'bo@example.com' }, attempts: 0 }, { payload: { to: 'cy@example.com' }, attempts: 0 }]]]],
  ['insert many with expr', [jobs, ['insert', [{ run_at: E('now()'), n: 1 }, { run_at: E('now() + ?', 500), n: 2 }]]]],
  ['insert an empty document', [jobs, ['insert', {}]]],
  // update
  ['update plain values', [jobs, ['where', 'id', 2], ['update', { owner: 'w1', attempts: 3 }]]],
  ['update every row', [jobs, ['update', { error: 'gone' }]]],
  ['update null', [jobs, ['where', 'id', 2], ['update', { owner: null, error: null }]]],
  ['update inc', [jobs, ['where', 'id', 2], ['update', { attempts: I(1) }]]],
  ['update inc negative', [['from', 'stock'], ['where', 'sku', 'a1'], ['update', { qty: I(-2) }]]],
  ['update expr', [jobs, ['where', 'id', 2], ['update', { run_at: E('now()') }]]],
  ['update expr with args', [jobs, ['where', 'id', 2], ['update', { run_at: E('now() + ? * ?', 1000, 3) }]]],
  ['update path', [jobs, ['where', 'id', 2], ['update', { 'payload.to': 'di@example.com' }]]],
  ['update mixed', [jobs, ['where', 'id', 2], ['update', { owner: 'w1', error: null, attempts: I(1), run_at: E('now() + ?', 30000), payload: { to: 'x' } }]]],
  ['update returning true', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { returning: true }]]],
  ['update returning list', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { returning: ['id', 'payload.to'] }]]],
  ['update returning star list', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { returning: ['*'] }]]],
  ['update returning false', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { returning: false }]]],
  ['update require', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { require: 1 }]]],
  ['update require 0', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { require: 0 }]]],
  ['update returning and require', [jobs, ['where', 'id', 2], ['update', { attempts: 0 }, { returning: ['id'], require: 1 }]]],
  ['update order limit', [['from', 'tasks'], ['where', R('run_at <= now()')], ['order', 'priority', 'desc'], ['limit', 1], ['update', { owner: 'w1' }, { returning: ['payload.n'] }]]],
  ['update raw numbering follows the patch', [jobs, ['where', R('owner = ? and attempts < ?', 'w1', 5)], ['update', { error: 'x', attempts: I(1) }, { require: 1 }]]],
  ['update dead letter', [jobs, ['where', 'run_at', null], ['where', 'id', 2], ['update', { run_at: E('now()'), attempts: 0, error: null }]]],
  // delete
  ['delete every row', [jobs, ['delete']]],
  ['delete where', [jobs, ['where', 'owner', 'w1'], ['delete']]],
  ['delete require', [jobs, ['where', 'id', 1], ['delete', { require: 1 }]]],
  ['delete returning true', [jobs, ['where', 'id', 1], ['delete', { returning: true }]]],
  ['delete returning list and require', [jobs, ['where', 'id', 1], ['delete', { returning: ['id', 'payload'], require: 1 }]]],
  ['delete pop', [['from', 'tasks'], ['where', R('run_at <= now()')], ['order', 'priority', 'desc'], ['limit', 10], ['delete', { returning: ['id', 'payload'] }]]],
  // the seed page's worker loop
  ['worker claim', [jobs, ['where', R('run_at <= now()')], ['order', 'run_at'], ['limit', 10], ['update', { owner: 'w1:1842', run_at: E('now() + ?', 30000), attempts: I(1) }, { returning: true }]]],
  ['worker ack', [jobs, ['where', 'id', 1], ['where', 'owner', 'w1:1842'], ['delete', { require: 1 }]]],
  ['worker fail with backoff', [jobs, ['where', 'id', 1], ['where', 'owner', 'w1:1842'], ['update', { owner: null, run_at: E('now() + ?', 4000) }, { require: 1 }]]],
  ['worker extend', [jobs, ['where', 'id', 2], ['where', 'owner', 'w1'], ['update', { run_at: E('now() + ?', 30000) }, { require: 1 }]]],
  ['worker fail to dead letter', [jobs, ['where', 'id', 2], ['where', 'owner', 'w1'], ['update', { owner: null, error: 'smtp timeout', run_at: E('case when attempts >= ? then null else now() + 1000 * attempts * attempts end', 5) }, { require: 1 }]]],
  ['worker claim one, returning a list', [jobs, ['where', R('run_at <= now()')], ['order', 'run_at'], ['limit', 1], ['update', { owner: 'w3', run_at: E('now() + ?', 30000), attempts: I(1) }, { returning: ['id', 'attempts'], require: 1 }]]],
  // refused
  ['bad field', [jobs, ['where', 'run_at; drop', 1], ['rows']], 'field'],
  ['bad collection', [['from', 'jobs; drop'], ['rows']], 'collection'],
  ['collection starting with a digit', [['from', '1jobs'], ['rows']], 'collection'],
  ['collection path', [['from', 'jobs.x'], ['rows']], 'collection'],
  ['empty path segment', [jobs, ['where', 'payload..to', 1], ['rows']], 'field'],
  ['field with a space', [jobs, ['where', 'owner ', 1], ['rows']], 'field'],
  ['bad order field', [jobs, ['order', 'run_at desc'], ['rows']], 'field'],
  ['bad order direction', [jobs, ['order', 'run_at', 'down'], ['rows']], 'direction'],
  ['bad operator', [jobs, ['where', 'owner', 'like', 'w%'], ['rows']], 'operator'],
  ['operator in needs a list', [jobs, ['where', 'id', 'in', 3], ['rows']], 'list'],
  ['negative limit', [jobs, ['limit', -1], ['rows']], 'limit'],
  ['fractional limit', [jobs, ['limit', 1.5], ['rows']], 'limit'],
  ['text offset', [jobs, ['offset', '10'], ['rows']], 'offset'],
  ['bad select field', [jobs, ['select', 'id', 'owner) or (1'], ['rows']], 'field'],
  ['empty select', [jobs, ['select'], ['rows']], 'empty'],
  ['bad patch key', [jobs, ['update', { 'owner: 1, x': 2 }]], 'field'],
  ['bad insert key', [jobs, ['insert', { 'a}': 1 }]], 'field'],
  ['bad returning field', [jobs, ['delete', { returning: ['id', '*'] }]], 'field'],
  ['negative require', [jobs, ['delete', { require: -1 }]], 'require'],
  ['raw marks and args differ', [jobs, ['where', R('a = ? and b = ?', 1)], ['rows']], 'raw'],
  ['expr marks and args differ', [jobs, ['update', { run_at: E('now() + ?') }]], 'expr'],
  ['raw with its own parameter', [jobs, ['where', R('id = $1', 1)], ['rows']], 'raw'],
  ['empty patch', [jobs, ['where', 'id', 1], ['update', {}]], 'empty'],
  ['insert no documents', [jobs, ['insert', []]], 'empty'],
  ['update with offset', [jobs, ['offset', 5], ['update', { owner: 'w1' }]], 'offset'],
  ['delete with select', [jobs, ['select', 'id'], ['delete']], 'select'],
  ['insert with where', [jobs, ['where', 'id', 1], ['insert', { owner: 'w1' }]], 'where'],
  ['inc in a document', [jobs, ['insert', { attempts: I(1) }]], 'inc'],
  ['raw as a patch value', [jobs, ['update', { run_at: R('now()') }]], 'raw'],
];

/** Renders every case: the golden file's content. */
export function golden(): string {
  const db = connect('http://golden.invalid');
  const cases = CASES.map(([name, steps, word]) => {
    const chain: Call[] = steps.map(([call, ...args]) => ({ call, args }));
    if (word === undefined) return { name, chain, ...render(db, chain) };
    try {
      render(db, chain);
    } catch (err) {
      if (!(err as Error).message.includes(word)) throw new Error(`${name}: "${(err as Error).message}" lacks "${word}"`);
      return { name, chain, error: word };
    }
    throw new Error(`${name}: renders, but should be refused`);
  });
  const names = new Set(cases.map((c) => c.name));
  if (names.size !== cases.length) throw new Error('two cases have the same name');
  return `{\n  "cases": [\n${cases.map(format).join(',\n')}\n  ]\n}\n`;
}

/** A case over a few lines: one a call, the rest on one line each. */
function format(c: Record<string, unknown>): string {
  const lines = Object.entries(c).map(([key, value]) => {
    const text = Array.isArray(value) && key === 'chain'
      ? `[\n${value.map((call) => `        ${JSON.stringify(call)}`).join(',\n')}\n      ]`
      : JSON.stringify(value);
    return `      ${JSON.stringify(key)}: ${text}`;
  });
  return `    {\n${lines.join(',\n')}\n    }`;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const text = golden();
  if (process.argv.includes('--check')) {
    let old = '';
    try {
      old = readFileSync(GOLDEN, 'utf8');
    } catch {
      // missing: stale
    }
    if (old !== text) {
      console.error('conformance/builder-golden.json is stale: run make generate');
      process.exit(1);
    }
  } else {
    writeFileSync(GOLDEN, text);
  }
}
