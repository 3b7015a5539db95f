/**
 * Writes conformance/builder-golden.json (format 2, docs/sdks.md): each case
 * below — builder steps on one collection and an end, in typed values —
 * rendered by this (the reference) builder to FenecQL text and parameters,
 * or refused with a word its error must hold. Every SDK checks every case
 * with a step interpreter of its own (this SDK's is scripts/steps.ts).
 *
 *   node dist/scripts/golden.js           write the file
 *   node dist/scripts/golden.js --check   exit 1 if the file is not what it would be
 */

import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { connect } from '../src/client.js';
import { stringify } from '../src/json.js';
import { type Case, type End, type Fragment, render, type Step, type Typed } from './steps.js';

/** The golden file, from this script's place in dist/scripts/. */
export const GOLDEN = fileURLToPath(new URL('../../../../conformance/builder-golden.json', import.meta.url));

// Typed values.
const NULL: Typed = { null: true };
const B = (b: boolean): Typed => ({ bool: b });
const N = (n: number | bigint | string): Typed => ({ int: String(n) });
const F = (f: number | 'NaN' | 'Infinity' | '-Infinity'): Typed => ({ float: f });
const S = (s: string): Typed => ({ string: s });
const T = (t: string): Typed => ({ timestamp: t });
const J = (j: unknown): Typed => ({ json: j });
const L = (...vs: Typed[]): Typed => ({ list: vs });
const frag = (text: string, args: Typed[]): Fragment => ({ text, args });
const X = (text: string, ...args: Typed[]): Typed => ({ expr: frag(text, args) });
const INC = (v: Typed): Typed => ({ inc: v });

// Steps.
const W = (field: string, value: Typed): Step => ({ op: 'where', field, value });
const WC = (field: string, cmp: string, value: Typed): Step => ({ op: 'where', field, cmp, value });
const WR = (text: string, ...args: Typed[]): Step => ({ op: 'where', raw: frag(text, args) });
const O = (field: string, dir?: string): Step => (dir === undefined ? { op: 'order', field } : { op: 'order', field, dir });
const LIM = (n: number): Step => ({ op: 'limit', n });
const OFF = (n: number): Step => ({ op: 'offset', n });
const SEL = (...fields: string[]): Step => ({ op: 'select', fields });
const NEAR = (field: string, point: Typed, exact?: boolean): Step => (exact === undefined ? { op: 'near', field, point } : { op: 'near', field, point, exact });
const ABSENT: Step = { op: 'ifAbsent' };
const UPSERT = (set: Doc): Step => ({ op: 'upsert', set });
const PT = (lon: number, lat: number): Typed => L(F(lon), F(lat));

// Ends.
type Doc = Record<string, Typed>;
type Clauses = { require?: number; returning?: string[] };
const ROWS: End = { op: 'rows' };
const FIRST: End = { op: 'first' };
const COUNT: End = { op: 'count' };
const INS = (d: Doc | Doc[]): End => (Array.isArray(d) ? { op: 'insert', docs: d } : { op: 'insert', doc: d });
const UPD = (patch: Doc, c: Clauses = {}): End => ({ op: 'update', patch, ...c });
const DEL = (c: Clauses = {}): End => ({ op: 'delete', ...c });
const ALL = ['*'];

/** [name, collection, steps, end, the word the error holds (refusals only)]. */
type Def = [string, string, Step[], End, string?];

/** The worker's statements (docs/workers.md), with the values a worker sends. */
const OWNER = S('w-5f3a9c:7');
const WORKER: Def[] = [
  ['worker claim', 'jobs', [WR('run_at <= now()'), O('run_at'), LIM(10)], UPD({ owner: OWNER, run_at: X('now() + ?', N(30000)), attempts: INC(N(1)) }, { returning: ALL })],
  ['worker claim with a where of its own', 'jobs', [WR('run_at <= now()'), WR('queue = ? and priority >= ?', S('mail'), N(2)), O('run_at'), LIM(3)], UPD({ owner: OWNER, run_at: X('now() + ?', N(30000)), attempts: INC(N(1)) }, { returning: ALL })],
  ['worker extend', 'jobs', [WC('id', 'in', L(N(42), N(43))), W('owner', OWNER)], UPD({ run_at: X('now() + ?', N(30000)) }, { returning: ['id'] })],
  ['worker ack', 'jobs', [WC('id', 'in', L(N(42), N(43))), W('owner', OWNER)], DEL({ returning: ['id'] })],
  ['worker fail', 'jobs', [W('id', N(42)), W('owner', OWNER)], UPD({ owner: NULL, error: S('smtp timeout'), run_at: X('now() + ?', N(4000)) }, { require: 1 })],
  ['worker dead letter', 'jobs', [W('id', N(42)), W('owner', OWNER)], UPD({ owner: NULL, error: S('smtp timeout'), run_at: NULL }, { require: 1 })],
  ['worker release', 'jobs', [W('id', N(42)), W('owner', OWNER)], UPD({ owner: NULL, run_at: X('now()'), attempts: INC(N(-1)) }, { require: 1 })],
  ['worker release a given-up claim', 'jobs', [W('owner', OWNER)], UPD({ owner: NULL, run_at: X('now()'), attempts: INC(N(-1)) })],
];

const CASES: Def[] = [
  // reads: where, in each form
  ['rows of a collection', 'jobs', [], ROWS],
  ['where string', 'jobs', [W('owner', S('w1'))], ROWS],
  ['where number', 'jobs', [W('id', N(3))], ROWS],
  ['where float', 'jobs', [W('score', F(1.5))], ROWS],
  ['where bool', 'users', [W('active', B(true))], ROWS],
  ['where null is null', 'jobs', [W('run_at', NULL)], ROWS],
  ['where list value', 'posts', [W('tags', J(['a', 'b']))], ROWS],
  ['where json value', 'jobs', [W('payload', J({ to: 'ada@example.com' }))], ROWS],
  ['where timestamp', 'jobs', [WC('run_at', '<=', T('2026-05-03T09:20:20.000Z'))], ROWS],
  ['where timestamp in another zone is sent in UTC', 'jobs', [WC('run_at', '<', T('2026-05-03T11:20:20.500+02:00'))], ROWS],
  ['where int64 beyond a double', 'jobs', [W('id', N('9223372036854775807'))], ROWS],
  ['where negative int64', 'jobs', [WC('attempts', '>', N('-9007199254740993'))], ROWS],
  ['where path', 'jobs', [W('payload.to', S('ada@example.com'))], ROWS],
  ['where deep path', 'jobs', [W('payload.to.domain', S('example.com'))], ROWS],
  ['where op =', 'jobs', [WC('attempts', '=', N(1))], ROWS],
  ['where op !=', 'jobs', [WC('owner', '!=', S('w1'))], ROWS],
  ['where op <', 'jobs', [WC('attempts', '<', N(5))], ROWS],
  ['where op <=', 'jobs', [WC('attempts', '<=', N(5))], ROWS],
  ['where op >', 'jobs', [WC('attempts', '>', N(0))], ROWS],
  ['where op >=', 'jobs', [WC('attempts', '>=', N(5))], ROWS],
  ['where op in', 'jobs', [WC('id', 'in', L(N(1), N(2), N(3)))], ROWS],
  ['where op not in', 'jobs', [WC('owner', 'not in', L(S('w1'), S('w2')))], ROWS],
  ['where op with expr value', 'jobs', [WC('run_at', '<=', X('now() + ?', N(1000)))], ROWS],
  ['where twice joins with and', 'jobs', [W('id', N(1)), W('owner', S('w1'))], ROWS],
  ['where three with null', 'jobs', [W('owner', NULL), WC('attempts', '>=', N(5)), W('error', S('smtp timeout'))], ROWS],
  // null in every position
  ['where op = null is a parameter', 'jobs', [WC('owner', '=', NULL)], ROWS],
  ['where op != null is a parameter', 'jobs', [WC('owner', '!=', NULL)], ROWS],
  ['where op in with null in the list', 'jobs', [WC('owner', 'in', L(NULL, S('w1')))], ROWS],
  ['where null inside a json value', 'jobs', [W('payload', J({ to: null }))], ROWS],
  ['raw with a null argument', 'jobs', [WR('owner = ? or error = ?', NULL, S('x'))], ROWS],
  ['expr with a null argument', 'jobs', [W('id', N(1))], UPD({ error: X('coalesce(error, ?)', NULL) })],
  ['insert null is a parameter', 'jobs', [], INS({ owner: NULL, attempts: N(0) })],
  ['insert many with null', 'jobs', [], INS([{ owner: NULL }, { owner: S('w1') }])],
  ['update null', 'jobs', [W('id', N(2))], UPD({ owner: NULL, error: NULL })],
  ['inc null', 'jobs', [], UPD({ attempts: INC(NULL) }), 'finite'],
  // reads: raw
  ['raw alone', 'jobs', [WR('run_at <= now()')], ROWS],
  ['raw with args', 'jobs', [WR('attempts >= ? and attempts <= ?', N(1), N(5))], ROWS],
  ['raw mark in single quotes', 'jobs', [WR("error = 'why?' and attempts > ?", N(3))], ROWS],
  ['raw mark in double quotes with escape', 'jobs', [WR('error = "say \\"what?\\"" or owner = ?', S('w1'))], ROWS],
  ['raw then where wraps', 'jobs', [WR('owner = ? or owner is null', S('w1')), WC('attempts', '<', N(5))], ROWS],
  ['where then raw wraps', 'jobs', [W('id', N(2)), WR('run_at <= now() + ?', N(1000))], ROWS],
  ['two raws', 'jobs', [WR('run_at <= now()'), WR('lower(owner) = ?', S('w1'))], ROWS],
  ['raw with a timestamp argument', 'jobs', [WR('run_at <= ?', T('2026-05-03T09:20:20Z'))], ROWS],
  // reads: order, limit, offset, select
  ['order', 'jobs', [O('run_at')], ROWS],
  ['order desc', 'jobs', [O('run_at', 'desc')], ROWS],
  ['order asc renders bare', 'jobs', [O('run_at', 'asc')], ROWS],
  ['order several keys', 'tasks', [O('priority', 'desc'), O('run_at'), O('id', 'asc')], ROWS],
  ['order path', 'jobs', [O('payload.to', 'desc')], ROWS],
  ['limit', 'jobs', [LIM(10)], ROWS],
  ['limit 0', 'jobs', [LIM(0)], ROWS],
  ['limit twice keeps the last', 'jobs', [LIM(10), LIM(20)], ROWS],
  ['offset', 'jobs', [OFF(20)], ROWS],
  ['limit and offset', 'jobs', [OFF(20), LIM(10)], ROWS],
  ['select', 'jobs', [SEL('id', 'owner')], ROWS],
  ['select paths', 'jobs', [SEL('id', 'payload.to')], ROWS],
  ['select star', 'jobs', [SEL('*')], ROWS],
  ['select twice replaces', 'jobs', [SEL('id'), SEL('owner')], ROWS],
  ['every read clause', 'jobs', [LIM(5), W('owner', S('w1')), SEL('id', 'error'), OFF(10), O('run_at', 'desc'), WR('attempts > ?', N(2))], ROWS],
  ['first', 'jobs', [], FIRST],
  ['first overrides limit', 'jobs', [W('owner', S('w1')), LIM(10)], FIRST],
  ['first keeps order and offset', 'jobs', [O('run_at'), OFF(3)], FIRST],
  ['count', 'jobs', [], COUNT],
  ['count where', 'jobs', [W('run_at', NULL)], COUNT],
  ['count keeps only where', 'jobs', [W('owner', S('w1')), O('run_at'), LIM(10), OFF(5)], COUNT],
  // insert
  ['insert one', 'jobs', [], INS({ owner: S('w1'), attempts: N(0) })],
  ['insert every type', 'jobs', [], INS({ owner: S('w1'), attempts: N('9223372036854775807'), score: F(0.25), done: B(false), run_at: T('2026-05-03T09:20:20.000Z'), payload: J({ to: 'ada@example.com', n: 1.5, ok: true, tags: ['a'] }), error: NULL })],
  ['insert json value', 'jobs', [], INS({ payload: J({ to: 'ada@example.com', tags: ['a'] }), attempts: N(0) })],
  ['insert expr', 'jobs', [], INS({ payload: J({ to: 'bo@example.com' }), run_at: X('now()'), attempts: N(0) })],
  ['insert expr with args', 'jobs', [], INS({ payload: S('x'), run_at: X('now() + ?', N(3600000)), attempts: N(0) })],
  ['insert many', 'jobs', [], INS([{ payload: J({ to: 'bo@example.com' }), attempts: N(0) }, { payload: J({ to: 'cy@example.com' }), attempts: N(0) }])],
  ['insert many with expr', 'jobs', [], INS([{ run_at: X('now()'), n: N(1) }, { run_at: X('now() + ?', N(500)), n: N(2) }])],
  ['insert an empty document', 'jobs', [], INS({})],
  // update
  ['update plain values', 'jobs', [W('id', N(2))], UPD({ owner: S('w1'), attempts: N(3) })],
  ['update every row', 'jobs', [], UPD({ error: S('gone') })],
  ['update inc', 'jobs', [W('id', N(2))], UPD({ attempts: INC(N(1)) })],
  ['update inc negative', 'stock', [W('sku', S('a1'))], UPD({ qty: INC(N(-2)) })],
  ['update inc float', 'stock', [W('sku', S('a1'))], UPD({ weight: INC(F(0.5)) })],
  ['update expr', 'jobs', [W('id', N(2))], UPD({ run_at: X('now()') })],
  ['update expr with args', 'jobs', [W('id', N(2))], UPD({ run_at: X('now() + ? * ?', N(1000), N(3)) })],
  ['update timestamp', 'jobs', [W('id', N(2))], UPD({ run_at: T('2026-05-03T09:20:20.123Z') })],
  ['update json value', 'jobs', [W('id', N(2))], UPD({ payload: J({ to: 'x', tags: [] }) })],
  ['update mixed', 'jobs', [W('id', N(2))], UPD({ owner: S('w1'), error: NULL, attempts: INC(N(1)), run_at: X('now() + ?', N(30000)), payload: J({ to: 'x' }) })],
  ['update returning star', 'jobs', [W('id', N(2))], UPD({ attempts: N(0) }, { returning: ALL })],
  ['update returning list', 'jobs', [W('id', N(2))], UPD({ attempts: N(0) }, { returning: ['id', 'payload.to'] })],
  ['update require', 'jobs', [W('id', N(2))], UPD({ attempts: N(0) }, { require: 1 })],
  ['update require 0', 'jobs', [W('id', N(2))], UPD({ attempts: N(0) }, { require: 0 })],
  ['update returning and require', 'jobs', [W('id', N(2))], UPD({ attempts: N(0) }, { returning: ['id'], require: 1 })],
  ['update order limit', 'tasks', [WR('run_at <= now()'), O('priority', 'desc'), LIM(1)], UPD({ owner: S('w1') }, { returning: ['payload.n'] })],
  ['update raw numbering follows the patch', 'jobs', [WR('owner = ? and attempts < ?', S('w1'), N(5))], UPD({ error: S('x'), attempts: INC(N(1)) }, { require: 1 })],
  ['update dead letter', 'jobs', [W('run_at', NULL), W('id', N(2))], UPD({ run_at: X('now()'), attempts: N(0), error: NULL })],
  // delete
  ['delete every row', 'jobs', [], DEL()],
  ['delete where', 'jobs', [W('owner', S('w1'))], DEL()],
  ['delete require', 'jobs', [W('id', N(1))], DEL({ require: 1 })],
  ['delete returning star', 'jobs', [W('id', N(1))], DEL({ returning: ALL })],
  ['delete returning list and require', 'jobs', [W('id', N(1))], DEL({ returning: ['id', 'payload'], require: 1 })],
  ['delete pop', 'tasks', [WR('run_at <= now()'), O('priority', 'desc'), LIM(10)], DEL({ returning: ['id', 'payload'] })],
  // instead of Redis (docs/redis.md): put … if absent, upsert, near
  ['if absent', 'locks', [ABSENT], INS({ name: S('report'), owner: S('w1'), until: X('now() + ?', N(30000)) })],
  ['if absent with an id', 'locks', [ABSENT], INS({ id: N(7), name: S('report') })],
  ['if absent, a list', 'locks', [ABSENT], INS([{ name: S('a') }, { name: S('b') }])],
  ['upsert', 'counters', [UPSERT({ n: INC(N(1)) })], INS({ key: S('hits'), n: N(1) })],
  ['upsert reads the incoming document', 'counters', [UPSERT({ n: X('n + new.n'), seen: X('now()') })], INS({ key: S('hits'), n: N(5), seen: X('now()') })],
  ['upsert with values and null', 'cache', [UPSERT({ value: S('v2'), hits: NULL, until: X('now() + ?', N(60000)) })], INS({ key: S('k'), value: S('v1'), until: X('now() + ?', N(60000)) })],
  ['upsert numbering: the document, then the set', 'counters', [UPSERT({ n: INC(N(2)) })], INS({ key: S('a'), n: N(2) })],
  ['upsert replaces if absent', 'counters', [ABSENT, UPSERT({ n: INC(N(1)) })], INS({ key: S('x'), n: N(1) })],
  ['if absent replaces upsert', 'counters', [UPSERT({ n: INC(N(1)) }), ABSENT], INS({ key: S('x'), n: N(1) })],
  ['near', 'places', [NEAR('at', PT(2.3522, 48.8566)), LIM(3)], ROWS],
  ['near exact', 'places', [NEAR('at', PT(-0.1276, 51.5072), true), LIM(1)], ROWS],
  ['near exact false renders bare', 'places', [NEAR('at', PT(1.5, 0.5), false), LIM(1)], ROWS],
  ['near with where and select', 'places', [W('kind', S('cafe')), SEL('name'), NEAR('at', PT(2.29, 48.86)), LIM(5)], ROWS],
  ['near with offset', 'places', [NEAR('at', PT(2.29, 48.86)), LIM(5), OFF(5)], ROWS],
  ['near twice keeps the last', 'places', [NEAR('at', PT(1, 1)), NEAR('at', PT(2, 2)), LIM(1)], ROWS],
  ['near first', 'places', [NEAR('at', PT(2.29, 48.86))], FIRST],
  ['count drops near', 'places', [W('kind', S('cafe')), NEAR('at', PT(2.29, 48.86))], COUNT],
  ['near in an update', 'places', [W('owner', NULL), NEAR('at', PT(2.29, 48.86)), LIM(1)], UPD({ owner: S('w1') }, { returning: ['id', 'name'] })],
  ['near in a delete', 'places', [NEAR('at', PT(2.29, 48.86)), LIM(1)], DEL({ returning: ['name'] })],
  ['inc counts from nothing', 'counters', [W('key', S('hits'))], UPD({ n: INC(N(1)) }, { returning: ['n'] })],
  // the seed page's worker loop
  ['seed claim', 'jobs', [WR('run_at <= now()'), O('run_at'), LIM(10)], UPD({ owner: S('w1:1842'), run_at: X('now() + ?', N(30000)), attempts: INC(N(1)) }, { returning: ALL })],
  ['seed ack', 'jobs', [W('id', N(1)), W('owner', S('w1:1842'))], DEL({ require: 1 })],
  ['seed fail with backoff', 'jobs', [W('id', N(1)), W('owner', S('w1:1842'))], UPD({ owner: NULL, run_at: X('now() + ?', N(4000)) }, { require: 1 })],
  ['seed fail to dead letter in one statement', 'jobs', [W('id', N(2)), W('owner', S('w1'))], UPD({ owner: NULL, error: S('smtp timeout'), run_at: X('case when attempts >= ? then null else now() + 1000 * attempts * attempts end', N(5)) }, { require: 1 })],
  ['seed claim one, returning a list', 'jobs', [WR('run_at <= now()'), O('run_at'), LIM(1)], UPD({ owner: S('w3'), run_at: X('now() + ?', N(30000)), attempts: INC(N(1)) }, { returning: ['id', 'attempts'], require: 1 })],
  ...WORKER,
  // refused: identifiers
  ['bad field', 'jobs', [W('run_at; drop', N(1))], ROWS, 'field'],
  ['bad collection', 'jobs; drop', [], ROWS, 'collection'],
  ['collection starting with a digit', '1jobs', [], ROWS, 'collection'],
  ['collection path', 'jobs.x', [], ROWS, 'collection'],
  ['empty path segment', 'jobs', [W('payload..to', N(1))], ROWS, 'field'],
  ['field with a space', 'jobs', [W('owner ', N(1))], ROWS, 'field'],
  ['field starting with a digit', 'jobs', [W('1owner', N(1))], ROWS, 'field'],
  ['field with a non-ASCII letter', 'jobs', [W('ownér', N(1))], ROWS, 'field'],
  ['bad order field', 'jobs', [O('run_at desc')], ROWS, 'field'],
  ['bad order direction', 'jobs', [O('run_at', 'down')], ROWS, 'direction'],
  ['bad operator', 'jobs', [WC('owner', 'like', S('w%'))], ROWS, 'operator'],
  ['operator in needs a list', 'jobs', [WC('id', 'in', N(3))], ROWS, 'list'],
  ['bad select field', 'jobs', [SEL('id', 'owner) or (1')], ROWS, 'field'],
  ['empty select', 'jobs', [SEL()], ROWS, 'empty'],
  ['bad patch key', 'jobs', [], UPD({ 'owner: 1, x': N(2) }), 'field'],
  ['bad insert key', 'jobs', [], INS({ 'a}': N(1) }), 'field'],
  ['dotted insert key', 'jobs', [], INS({ 'payload.to': S('x') }), 'identifier'],
  ['dotted key in a second document', 'jobs', [], INS([{ owner: S('w1') }, { 'payload.to': S('x') }]), 'identifier'],
  ['dotted patch key', 'jobs', [W('id', N(2))], UPD({ 'payload.to': S('di@example.com') }), 'identifier'],
  ['bad returning field', 'jobs', [], DEL({ returning: ['id', '*'] }), 'field'],
  // refused: numbers
  ['negative limit', 'jobs', [LIM(-1)], ROWS, 'limit'],
  ['negative offset', 'jobs', [OFF(-10)], ROWS, 'offset'],
  ['negative require', 'jobs', [], DEL({ require: -1 }), 'require'],
  ['inc NaN', 'jobs', [], UPD({ attempts: INC(F('NaN')) }), 'finite'],
  ['inc Infinity', 'jobs', [], UPD({ attempts: INC(F('Infinity')) }), 'finite'],
  ['where NaN', 'jobs', [W('score', F('NaN'))], ROWS, 'finite'],
  ['where op < Infinity', 'jobs', [WC('score', '<', F('Infinity'))], ROWS, 'finite'],
  ['where in with NaN', 'jobs', [WC('score', 'in', L(F(1), F('NaN')))], ROWS, 'finite'],
  ['insert -Infinity', 'jobs', [], INS({ score: F('-Infinity') }), 'finite'],
  ['update NaN', 'jobs', [], UPD({ score: F('NaN') }), 'finite'],
  ['raw argument NaN', 'jobs', [WR('score > ?', F('NaN'))], ROWS, 'finite'],
  ['expr argument Infinity', 'jobs', [], UPD({ run_at: X('now() + ?', F('Infinity')) }), 'finite'],
  // refused: lists, marks, shapes
  ['empty in list', 'jobs', [WC('id', 'in', L())], ROWS, 'empty'],
  ['empty not in list', 'jobs', [WC('owner', 'not in', L())], ROWS, 'empty'],
  ['raw marks and args differ', 'jobs', [WR('a = ? and b = ?', N(1))], ROWS, 'marks'],
  ['raw more args than marks', 'jobs', [WR('a = ?', N(1), N(2))], ROWS, 'marks'],
  ['expr marks and args differ', 'jobs', [], UPD({ run_at: X('now() + ?') }), 'marks'],
  ['raw with its own parameter', 'jobs', [WR('id = $1', N(1))], ROWS, '$'],
  ['expr with its own parameter', 'jobs', [], UPD({ run_at: X('now() + $1', N(1)) }), '$'],
  ['empty patch', 'jobs', [W('id', N(1))], UPD({}), 'empty'],
  ['insert no documents', 'jobs', [], INS([]), 'empty'],
  ['update with offset', 'jobs', [OFF(5)], UPD({ owner: S('w1') }), 'offset'],
  ['delete with select', 'jobs', [SEL('id')], DEL(), 'select'],
  ['insert with where', 'jobs', [W('id', N(1))], INS({ owner: S('w1') }), 'where'],
  ['inc in a document', 'jobs', [], INS({ attempts: INC(N(1)) }), 'inc'],
  ['inc as a where value', 'jobs', [W('attempts', INC(N(1)))], ROWS, 'inc'],
  // refused: if absent, upsert, near
  ['if absent with where', 'locks', [W('name', S('a')), ABSENT], INS({ name: S('a') }), 'where'],
  ['if absent on a read', 'locks', [ABSENT], ROWS, 'absent'],
  ['if absent on a count', 'locks', [ABSENT], COUNT, 'absent'],
  ['upsert on an update', 'counters', [UPSERT({ n: INC(N(1)) })], UPD({ n: N(1) }), 'absent'],
  ['if absent on a delete', 'locks', [ABSENT], DEL(), 'absent'],
  ['upsert with an empty set', 'counters', [UPSERT({})], INS({ key: S('a') }), 'empty'],
  ['upsert with a dotted key', 'counters', [UPSERT({ 'meta.n': N(1) })], INS({ key: S('a') }), 'identifier'],
  ['upsert with a bad key', 'counters', [UPSERT({ 'n}': N(1) })], INS({ key: S('a') }), 'field'],
  ['upsert with NaN', 'counters', [UPSERT({ n: F('NaN') })], INS({ key: S('a') }), 'finite'],
  ['near on an insert', 'places', [NEAR('at', PT(1, 1))], INS({ name: S('x') }), 'near'],
  ['near with order', 'places', [NEAR('at', PT(1, 1)), O('name')], ROWS, 'order'],
  ['near with a bad field', 'places', [NEAR('at;', PT(1, 1))], ROWS, 'field'],
  ['near with NaN', 'places', [NEAR('at', L(F('NaN'), F(1)))], ROWS, 'finite'],
];

/** Renders every case: the golden file's content. */
export function golden(): string {
  const db = connect('http://golden.invalid');
  const cases = CASES.map(([name, from, steps, end, word]): Case => {
    const c = { name, from, steps, end };
    if (word === undefined) {
      const { query, params } = render(db, c);
      return { ...c, query, params };
    }
    try {
      render(db, c);
    } catch (err) {
      const message = (err as Error).message;
      if (!message.toLowerCase().includes(word)) throw new Error(`${name}: "${message}" lacks "${word}"`);
      return { ...c, refuse: word };
    }
    throw new Error(`${name}: renders, but should be refused`);
  });
  const names = new Set(cases.map((c) => c.name));
  if (names.size !== cases.length) throw new Error('two cases have the same name');
  return `{\n  "format": 2,\n  "cases": [\n${cases.map(format).join(',\n')}\n  ]\n}\n`;
}

/** A case over a few lines: each step on a line of its own. */
function format(c: Case): string {
  const lines = Object.entries(c).map(([key, value]) => {
    const text = key === 'steps' && c.steps.length > 0
      ? `[\n${c.steps.map((s) => `        ${stringify(s)}`).join(',\n')}\n      ]`
      : stringify(value);
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
      console.error('conformance/builder-golden.json is stale: run make generate-sdks');
      process.exit(1);
    }
  } else {
    writeFileSync(GOLDEN, text);
  }
}
