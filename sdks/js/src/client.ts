/**
 * `@fenecdb/web/client`: Fenec's client over fetch. The contract it keeps is
 * docs/sdks.md; its worker is docs/workers.md.
 *
 * @example
 * import { connect, expr, inc, raw } from '@fenecdb/web/client';
 * const db = connect('http://127.0.0.1:8080', { token });
 * const claimed = await db.from('jobs')
 *   .where(raw('run_at <= now()')).order('run_at').limit(10)
 *   .update({ owner, run_at: expr('now() + ?', 30000), attempts: inc(1) },
 *           { returning: true, wait: 30000 });
 *
 * @module
 */

import { FenecError } from './errors.js';
import * as api from './generated/transport.js';
import type { Answer } from './generated/transport.js';
import { parse, stringify } from './json.js';
import { Query, type RequestOptions, type Result, type Row } from './query.js';
import type { Statement } from './render.js';
import { env, userAgent } from './version.js';
import { nodeFetch } from './node.js';
import { Consumer } from './changes.js';
import { type LiveEvent, watch, type WatchOptions } from './live.js';

export { FENEC_ERROR_CODES, FenecError, type FenecErrorCode } from './errors.js';
export { VERSION } from './version.js';
export type { Answer, ErrorCode } from './generated/transport.js';
export type {
  Doc, Field, InsertOptions, Patch, ReadOptions, RequestOptions, Result, Returning, Row, WriteOptions,
} from './query.js';
export { path, type Path, Query } from './query.js';
export type { Direction, Operator, Statement, WriteClauses } from './render.js';
export { Expr, expr, Inc, inc, Raw, raw } from './values.js';
export { type Change, type ChangeBatch, Consumer, type ReadOptions as ConsumerReadOptions } from './changes.js';
export { type LiveEvent, type LiveEventName, type LiveTarget, watch, watchCollection, type WatchOptions } from './live.js';
export { backoff, type Handler, worker, Worker, WorkerError, type WorkerOptions, type WorkerStep } from './worker.js';

/** How {@link connect} reaches the server. Every option may be left out or `undefined`. */
export interface ConnectOptions {
  /** A bearer token, sent as `Authorization: Bearer <token>`. */
  token?: string | undefined;
  /** Milliseconds to wait for an answer (default 30000); a request's `wait` is added to it. */
  timeout?: number | undefined;
  /** The fetch to send with (default `globalThis.fetch`). */
  fetch?: typeof fetch | undefined;
  /**
   * On Node, an undici dispatcher every request is sent through (fetch's
   * `dispatcher`): to trust a CA of your own, or to present a client
   * certificate, an `Agent` of the undici package made with
   * `{ connect: { ca, cert, key } }` (docs/sdks.md, "TLS").
   */
  dispatcher?: object | undefined;
  /**
   * Headers sent on every request, such as a tracing or a proxy's header.
   * The client's own (`Authorization` from `token`, `Content-Type`, the
   * `Fenec-…` and `Idempotency-Key` of a call) take precedence; a
   * `User-Agent` given here replaces the SDK's.
   */
  headers?: HeadersInit | undefined;
  /**
   * How many times a request is sent again after a fault — no answer
   * (`network`), a `timeout`, the server's `unavailable` or `internal`, a
   * proxy's 502/503/504 — with exponential backoff and full jitter (a
   * random pause up to 250 ms × 2^n, at most 8 s). Default 0: none. With
   * retries on, every write carries an `Idempotency-Key` (the caller's, or
   * one the client makes), so a write the server applied before its answer
   * was lost is answered again, not applied twice; a read is sent again as
   * it is. See `FenecError.retryable`.
   */
  maxRetries?: number | undefined;
  /**
   * The JS type of every `int` field of a row (and of `id`), one for the
   * client: `'number'` (the default; a value beyond ±2^53, which a number
   * cannot hold exactly, is refused with an error that says so),
   * `'bigint'`, or `'string'` (the digits).
   */
  int64?: Int64 | undefined;
}

/** The JS type of a row's int fields: see {@link ConnectOptions.int64}. */
export type Int64 = 'number' | 'bigint' | 'string';

/** The client's timeout when none is given: 30 s, in every Fenec SDK (docs/sdks.md). */
export const DEFAULT_TIMEOUT = 30_000;

/** The longest `wait` the server holds a claim: 30 s (openapi.yaml's Fenec-Wait). */
export const MAX_WAIT = 30_000;

/** How long a collection's field types are trusted before a row with an unknown field reloads them. */
const SCHEMA_FRESH_MS = 1000;

type FieldType = api.Field['type'];

interface Schema {
  readonly types: ReadonlyMap<string, FieldType>;
  readonly at: number;
}

/**
 * A client of a Fenec server — or of a cluster's nodes. Nothing is sent
 * until a query is: it holds the URLs, the token, the fetch and the
 * default timeout; what belongs to one request (wait, idempotency key,
 * timeout, signal) is that call's option.
 */
export class Client {
  readonly #nodes: Nodes;
  /** The fetch of live queries and the change stream, which read a stream. */
  readonly #fetch: typeof fetch;
  /** The fetch of statements (the generated transport). */
  readonly #post: typeof fetch;
  readonly #token: string | undefined;
  readonly #transports = new Map<string, api.Transport>();
  readonly #timeout: number;
  readonly #schemas = new Map<string, Promise<Schema | undefined>>();
  /** The schemas of #schemas once loaded, read without a wait. */
  readonly #known = new Map<string, Schema>();
  readonly #maxRetries: number;
  readonly #int64: Int64;

  /** Use {@link connect}. */
  constructor(url: string | readonly string[] | undefined, opts: ConnectOptions = {}) {
    let token = opts.token;
    if (url === undefined) {
      url = env('FENEC_URL');
      if (url === undefined || url === '') throw new TypeError('no URL given, and FENEC_URL is not set');
      token ??= env('FENEC_TOKEN');
    }
    this.#nodes = new Nodes(checkURLs(url));
    const f = withHeaders(opts.fetch ?? globalThis.fetch.bind(globalThis), opts.headers);
    const dispatcher = opts.dispatcher;
    // Node's fetch reads `dispatcher` from the request's init (undici's).
    this.#fetch = dispatcher === undefined ? f : (input, init) => f(input, { ...init, dispatcher } as RequestInit);
    // On Node, with no fetch or dispatcher of the caller's, statements go over node:http(s) (see node.ts).
    this.#post = (opts.fetch === undefined && dispatcher === undefined ? nodeFetch(fixedHeaders(opts.headers)) : undefined) ?? this.#fetch;
    this.#token = token;
    this.#timeout = milliseconds('timeout', opts.timeout ?? DEFAULT_TIMEOUT);
    if (this.#timeout === 0) throw new TypeError('timeout must be at least 1 millisecond');
    this.#maxRetries = opts.maxRetries ?? 0;
    if (!Number.isSafeInteger(this.#maxRetries) || this.#maxRetries < 0) {
      throw new TypeError(`maxRetries must be a whole number from 0, not ${String(opts.maxRetries)}`);
    }
    this.#int64 = opts.int64 ?? 'number';
    if (this.#int64 !== 'number' && this.#int64 !== 'bigint' && this.#int64 !== 'string') {
      throw new TypeError(`int64 must be 'number', 'bigint' or 'string', not ${JSON.stringify(opts.int64)}`);
    }
  }

  /** The URL of the node this client sends to now: the first given, or the leader it was last sent to. */
  get node(): string {
    return this.#nodes.current;
  }

  /**
   * A query builder on the collection `name` (an identifier, else this
   * throws). With a row type, field names are checked: `from<Job>('jobs')`.
   */
  from<T extends object = Row>(name: string): Query<T> {
    return new Query<T>(this, name);
  }

  /**
   * Runs one FenecQL statement, its values as `$1…$n` in `params` — or a
   * statement a builder rendered (`jobs.renderRows()`, `jobs.renderUpdate(…)`, …), whose rows decode by
   * their collection's field types. Returns a {@link Result}: the rows or
   * the count written, and the request's `seq` and `replayed`. `T` is the
   * rows' type (`db.query<Job>(…)`), taken on trust: nothing checks it.
   */
  query<T extends object = Row>(statement: Statement, opts?: RequestOptions): Promise<Result<T>>;
  query<T extends object = Row>(text: string, params?: readonly unknown[], opts?: RequestOptions): Promise<Result<T>>;
  async query<T extends object = Row>(first: string | Statement, second?: readonly unknown[] | RequestOptions, third?: RequestOptions): Promise<Result<T>> {
    if (typeof first === 'string') return this.run({ query: first, params: [...((second as readonly unknown[] | undefined) ?? [])] }, third ?? {}) as Promise<Result<T>>;
    return this.run(first, (second as RequestOptions | undefined) ?? {}) as Promise<Result<T>>;
  }

  /**
   * Runs statements all or nothing, in order, under one lock; answers each
   * statement's result. A refusal names the statement in `FenecError.at`.
   * Builders render statements with `renderRows()`, `renderUpdate(…)`, …:
   * `db.batch([jobs.where('id', 1).renderDelete({ require: 1 }), …])`.
   */
  async batch(statements: readonly Statement[], opts: RequestOptions = {}): Promise<Result[]> {
    const body = { statements: statements.map((s) => ({ query: s.query, params: s.params })) };
    await Promise.all(statements.map((s) => this.#schema(s.collection, opts)));
    const asked = { method: 'POST /batch', statement: statements[0]?.query, write: statements.some((s) => !READ.test(s.query)) };
    const reply = await this.#retrying(asked, opts, (o) => (t, signal) => api.batch(t, body, headers(o, this.#nodes), signal));
    return Promise.all(reply.body.results.map((a, i) => this.#result(statements[i]?.collection, a, reply.headers, opts)));
  }

  /**
   * Follows a `get` (a builder's `renderRows()`, or text with params) as a live
   * query over Server-Sent Events (docs/changes.md): an async iterator of
   * its events that reconnects with `Last-Event-ID` when the connection
   * drops: `db.watch('get msgs where room = $1', ['lobby'], { signal })`, or
   * from a builder, `db.from('msgs').where('room', 'lobby').watch({ signal })`.
   */
  watch(statement: Statement, opts?: WatchOptions): AsyncGenerator<LiveEvent, void, undefined>;
  watch(text: string, params?: readonly unknown[], opts?: WatchOptions): AsyncGenerator<LiveEvent, void, undefined>;
  watch(first: string | Statement, second?: readonly unknown[] | WatchOptions, third?: WatchOptions): AsyncGenerator<LiveEvent, void, undefined> {
    const target = { url: this.#nodes.current, token: this.#token, fetch: this.#fetch };
    if (typeof first === 'string') return watch(target, first, (second as readonly unknown[] | undefined) ?? [], third ?? {});
    return watch(target, first.query, first.params, (second as WatchOptions | undefined) ?? {});
  }

  /**
   * A named consumer of the change stream (docs/changes.md): the committed
   * writes in commit order, read in batches and acknowledged.
   */
  consumer(name: string, opts: { collection?: string | undefined } = {}): Consumer {
    return new Consumer({ url: this.#nodes.current, token: this.#token, fetch: this.#fetch }, name, opts);
  }

  /** Sends one statement; what builders call. */
  async run(statement: Statement, opts: RequestOptions): Promise<Result> {
    if (statement.collection !== undefined && !this.#known.has(statement.collection)) await this.#schema(statement.collection, opts);
    const body = { query: statement.query, params: statement.params };
    const asked = { method: 'POST /query', statement: statement.query, write: !READ.test(statement.query) };
    const reply = await this.#retrying(asked, opts, (o) => (t, signal) => api.query(t, body, headers(o, this.#nodes), signal));
    return this.#result(statement.collection, reply.body, reply.headers, opts);
  }

  /**
   * Sends a call, and again after a fault while `maxRetries` allows (a
   * write only under an Idempotency-Key, made here when the caller gave
   * none); a FenecError thrown names the request (method, node, statement,
   * key).
   */
  async #retrying<T>(asked: Asked, opts: RequestOptions, make: (o: RequestOptions) => Call<T>): Promise<Sent<T>> {
    const o = this.#maxRetries > 0 && asked.write && opts.idempotencyKey === undefined ? { ...opts, idempotencyKey: crypto.randomUUID() } : opts;
    const at = { node: this.#nodes.current };
    for (let attempt = 0; ; attempt++) {
      try {
        return await this.#send(make(o), o, at);
      } catch (err) {
        if (!(err instanceof FenecError)) throw err;
        err.method = asked.method;
        err.node = hostOf(at.node);
        err.statement = asked.statement === undefined ? undefined : cut(asked.statement);
        err.idempotencyKey = o.idempotencyKey;
        if (attempt >= this.#maxRetries || !err.retryable || (asked.write && o.idempotencyKey === undefined)) throw err;
        try {
          await sleep(Math.random() * Math.min(MAX_RETRY_PAUSE, FIRST_RETRY_PAUSE * 2 ** attempt), opts.signal ?? NEVER);
        } catch {
          throw opts.signal?.reason ?? err;
        }
      }
    }
  }

  /**
   * Sends a call under the request's signal and a timeout of the client's
   * (or the request's) plus its wait; maps every failure to a FenecError
   * (a given-up signal rejects with the signal's reason, as fetch does).
   * On a cluster it follows the leader a refusal names, sends a no_leader
   * refusal again after a pause and, given several URLs, tries the next
   * node while none can have run the request (docs/sdks.md, "Several nodes").
   */
  async #send<T>(call: Call<T>, opts: RequestOptions, at: { node: string } = { node: '' }): Promise<Sent<T>> {
    const timeout = milliseconds('timeout', opts.timeout ?? this.#timeout);
    const wait = opts.wait ?? 0;
    if (!Number.isSafeInteger(wait) || wait < 0 || wait > MAX_WAIT) {
      throw new TypeError(`wait must be a whole number of milliseconds from 0 to ${MAX_WAIT}, not ${String(wait)}`);
    }
    const limit = timeout + wait;
    // One controller, aborted by a timer or by the request's own signal:
    // AbortSignal.timeout and AbortSignal.any cost several times as much,
    // which a worker's every claim and ack would pay.
    const ctl = new AbortController();
    const timer = { aborted: false };
    const clock = setTimeout(() => {
      timer.aborted = true;
      ctl.abort(new DOMException(`no answer in ${limit} ms`, 'TimeoutError'));
    }, limit);
    const own = opts.signal;
    const onOwn = () => ctl.abort(own?.reason);
    if (own?.aborted) onOwn();
    else own?.addEventListener('abort', onOwn, { once: true });
    try {
      return await this.#sendUnder(call, opts, at, ctl.signal, timer, timeout, wait, limit);
    } finally {
      clearTimeout(clock);
      own?.removeEventListener('abort', onOwn);
    }
  }

  async #sendUnder<T>(call: Call<T>, opts: RequestOptions, at: { node: string }, signal: AbortSignal, timer: { aborted: boolean }, timeout: number, wait: number, limit: number): Promise<Sent<T>> {
    const nodes = this.#nodes;
    const round = new Round(nodes);
    let node = nodes.current;
    for (;;) {
      at.node = node;
      let reply: api.Reply<T>;
      try {
        reply = await call(this.#transport(node), signal);
      } catch (err) {
        if (opts.signal?.aborted) throw opts.signal.reason;
        if (timer.aborted) {
          const which = opts.timeout === undefined ? `the client's timeout of ${timeout} ms` : `the request's timeout of ${timeout} ms`;
          const why = wait > 0 ? `${which} plus the wait of ${wait} ms` : which;
          throw new FenecError(`timeout: no answer from ${hostOf(node)} in ${limit} ms (${why})`, 0, 'timeout', undefined, { cause: err });
        }
        const failed = new FenecError(`network: cannot reach ${hostOf(node)}: ${cause(err)}`, 0, 'network', undefined, { cause: err });
        if (!nodes.several || !unsent(err)) throw failed;
        round.refused.add(node);
        node = await round.next(failed, signal, opts.signal);
        continue;
      }
      if (reply.ok) {
        nodes.current = node;
        nodes.saw(Number(reply.headers.get(api.HEADER_FENEC_SEQ) ?? 0));
        return { body: reply.body, headers: reply.headers, node };
      }
      const leader = reply.status === 403 ? reply.headers.get(HEADER_FENEC_LEADER) : null;
      const refused = FenecError.fromAnswer(reply.status, reply.body, reply.text, hostOf(node), leader);
      if (refused.code === 'forbidden' && refused.leader !== null && !round.refused.has(refused.leader)) {
        // Refused unrun: the same request goes to the leader, unless that
        // would be a downgrade from https (the token in clear).
        const to = followable(node, refused.leader);
        if (to === undefined || round.follows === MAX_FOLLOWS) throw refused;
        round.follows++;
        node = to;
        nodes.current = to;
        continue;
      }
      if (refused.code === 'no_leader') {
        // Refused unrun: no leader known now (an election), or a leader just
        // elected that applies the earlier terms' writes first. Again after
        // the pause: to the next node, or to the same one when it is the only.
        await round.pause(refused, signal, opts.signal);
        if (nodes.several) node = round.step();
        continue;
      }
      if (nodes.several && refused.code === 'forbidden' && refused.leader !== null) {
        // A leader named that refused the connection in this call (a
        // follower that has not yet seen it die): another node may know better.
        node = await round.next(refused, signal, opts.signal);
        continue;
      }
      nodes.current = node;
      throw refused;
    }
  }

  /** The transport to one node (kept: fetch keeps its connections by origin anyway). */
  #transport(node: string): api.Transport {
    let t = this.#transports.get(node);
    if (t === undefined) {
      t = { baseUrl: node, fetch: this.#post, token: this.#token, json: { stringify, parse } };
      this.#transports.set(node, t);
    }
    return t;
  }

  /** An answer as a Result, its rows decoded by their collection's field types. */
  async #result(collection: string | undefined, answer: Answer, h: Headers, opts: RequestOptions): Promise<Result> {
    const seq = Number(h.get(api.HEADER_FENEC_SEQ) ?? 0);
    const replayed = h.get(api.HEADER_IDEMPOTENT_REPLAYED) === 'true';
    if (!Array.isArray(answer)) {
      if (typeof answer?.affected !== 'number') throw FenecError.unexpected(200, stringify(answer), hostOf(this.#nodes.current));
      return { rows: undefined, affected: answer.affected, seq, replayed };
    }
    let schema = collection === undefined ? undefined : this.#known.get(collection) ?? await this.#schemas.get(collection);
    if (collection !== undefined && schema !== undefined && unknownField(answer, schema) && Date.now() - schema.at > SCHEMA_FRESH_MS) {
      this.#schemas.delete(collection);
      this.#known.delete(collection);
      schema = await this.#schema(collection, opts).catch(() => schema);
    }
    const rows = answer.map((row) => decodeRow(row, schema?.types, this.#int64));
    return { rows, affected: rows.length, seq, replayed };
  }

  /**
   * A collection's field types, from `GET /collections`, loaded once (and
   * again when a row holds a field they lack). Loaded before the statement
   * is sent, so a failure here never loses an answer (a claim's jobs).
   */
  #schema(collection: string | undefined, opts: RequestOptions): Promise<Schema | undefined> {
    if (collection === undefined) return Promise.resolve(undefined);
    let s = this.#schemas.get(collection);
    if (s === undefined) {
      const sendOpts = opts.signal ? { signal: opts.signal } : {};
      s = this.#retrying({ method: 'GET /collections', statement: undefined, write: false }, sendOpts, () => (t, signal) => api.collections(t, signal)).then(({ body, node }) => {
        if (!Array.isArray(body?.collections)) throw FenecError.unexpected(200, stringify(body), hostOf(node));
        const at = Date.now();
        for (const c of body.collections) {
          const types = new Map(c.fields.map((f) => [f.name, f.type] as const));
          if (c.name !== collection) {
            this.#schemas.set(c.name, Promise.resolve({ types, at }));
            this.#known.set(c.name, { types, at });
          }
        }
        const mine = body.collections.find((c) => c.name === collection);
        const schema = { types: new Map(mine?.fields.map((f) => [f.name, f.type] as const) ?? []), at };
        // Unless a newer load replaced this one meanwhile.
        if (this.#schemas.get(collection) === s) this.#known.set(collection, schema);
        return schema;
      });
      this.#schemas.set(collection, s);
      s.catch(() => this.#schemas.delete(collection));
    }
    return s;
  }
}

/**
 * The old name of {@link Client}.
 *
 * @deprecated Use `Client` (docs/sdks.md names it so in every SDK).
 */
export type Db = Client;
/** @deprecated Use `Client`. */
export const Db = Client;

/**
 * Connects to a Fenec server at `url` (such as `http://127.0.0.1:8080`): an
 * http or https URL with a host, else this throws at once. A cluster's
 * nodes are several URLs, as a list or one comma-separated string
 * (`'http://a:8080,http://b:8080,http://c:8080'`): the client follows the
 * leader and finds another node when one is down (docs/sdks.md, "Several
 * nodes").
 *
 * With no URL (under Node, Deno or Bun) it reads `FENEC_URL`, and the
 * token from `FENEC_TOKEN` unless `opts.token` gives one; FENEC_URL unset
 * throws. Every request names the SDK in its User-Agent
 * (`fenecdb-js/0.1.0 node/20.20.2`), but in a browser, which cannot set it.
 *
 * @example const db = connect('http://127.0.0.1:8080', { token: process.env.FENEC_TOKEN });
 * @example const db = connect(); // FENEC_URL, FENEC_TOKEN
 * @example const db = connect(process.env.FENEC_URL!, { token }); // FENEC_URL=http://a:8080,http://b:8080,http://c:8080
 */
export function connect(url?: string | readonly string[], opts: ConnectOptions = {}): Client {
  return new Client(url, opts);
}

/**
 * fetch, with the client's `headers` under each request's own, and the
 * SDK's User-Agent on each request that has none (Node, Deno, Bun; a
 * browser's fetch sends its own).
 */
function withHeaders(send: typeof fetch, base: HeadersInit | undefined): typeof fetch {
  const ua = userAgent();
  const fixed = base === undefined ? [] : [...new Headers(base).entries()];
  if (ua === undefined && fixed.length === 0) return send;
  return (input, init) => {
    const headers = new Headers(fixed);
    for (const [k, v] of new Headers(init?.headers)) headers.set(k, v);
    if (ua !== undefined && !headers.has('user-agent')) headers.set('user-agent', ua);
    return send(input, { ...init, headers });
  };
}

/**
 * The headers every request carries, lower case: the SDK's User-Agent
 * (unless `base` gives one), then the client's `headers`.
 */
function fixedHeaders(base: HeadersInit | undefined): [string, string][] {
  const fixed = base === undefined ? [] : [...new Headers(base).entries()];
  const ua = userAgent();
  return ua === undefined || fixed.some(([k]) => k === 'user-agent') ? fixed : [['user-agent', ua], ...fixed];
}

/** What a request asked, for its errors and its retries. */
interface Asked {
  readonly method: string;
  readonly statement: string | undefined;
  /** Anything but a read: retried only under an Idempotency-Key. */
  readonly write: boolean;
}

type Call<T> = (t: api.Transport, signal: AbortSignal) => Promise<api.Reply<T>>;
type Sent<T> = { body: T; headers: Headers; node: string };

/** A statement that only reads (docs/fenecql.md: `get`, `explain`): sent again as it is. */
const READ = /^\s*(?:get|explain)\b/i;

/** The pause before the n-th retry: a random time up to 250 ms × 2^n, at most 8 s. */
const FIRST_RETRY_PAUSE = 250;
const MAX_RETRY_PAUSE = 8000;

/** A signal that never aborts. */
const NEVER = new AbortController().signal;

/** A statement as an error carries it: at most 200 characters. */
function cut(statement: string): string {
  return statement.length > 200 ? `${statement.slice(0, 200)}…` : statement;
}

/**
 * The header of a cluster follower's 403 that names the leader's URL
 * (docs/cluster.md, "Writes").
 */
export const HEADER_FENEC_LEADER = 'Fenec-Leader';

/** How many times one call follows a named leader before it raises the 403 (docs/sdks.md). */
const MAX_FOLLOWS = 3;

/** The pause between full rounds of the nodes: 50 ms, doubling to 1 s. */
const FIRST_PAUSE = 50;
const LAST_PAUSE = 1000;

/**
 * A client's nodes: the configured URLs and the one it sends to now (the
 * leader once found) — and the highest Fenec-Seq any of them answered, sent
 * as Fenec-After on every query and batch, so that a node the client moves
 * to (a follower, after a failover) answers only once it has applied the
 * client's writes (read-your-writes, docs/cluster.md).
 */
class Nodes {
  current: string;
  seq = 0;
  constructor(readonly urls: readonly string[]) {
    this.current = urls[0]!;
  }

  /** Remembers a Fenec-Seq answered; only ever upwards. */
  saw(seq: number): void {
    if (Number.isSafeInteger(seq) && seq > this.seq) this.seq = seq;
  }

  get several(): boolean {
    return this.urls.length > 1;
  }
}

/**
 * One call's walk over the configured nodes when the current one cannot
 * have run the request: the next URL each time, round robin, and a pause
 * after every full round, until the call's deadline.
 */
class Round {
  /** The nodes whose connection was refused in this call. */
  readonly refused = new Set<string>();
  /**
   * The follows of Fenec-Leader since the last pause (at most MAX_FOLLOWS):
   * a cluster in mid-election, whose follower names a leader that answers
   * no_leader, is paused between follows, not given up while the deadline allows.
   */
  follows = 0;
  #at: number;
  #misses = 0;
  #pause = FIRST_PAUSE;

  constructor(readonly nodes: Nodes) {
    this.#at = nodes.urls.indexOf(nodes.current) + 1;
  }

  /**
   * The next node to try after `last` failed, once the pause due (if any)
   * is over; `last` is thrown when the call's deadline comes first.
   */
  async next(last: FenecError, signal: AbortSignal, own: AbortSignal | undefined): Promise<string> {
    const urls = this.nodes.urls;
    this.#misses++;
    if (this.#misses % urls.length === 0) await this.pause(last, signal, own);
    if (signal.aborted) {
      if (own?.aborted) throw own.reason;
      throw last;
    }
    return this.step();
  }

  /** The next node in the round, without a pause. */
  step(): string {
    const urls = this.nodes.urls;
    const url = urls[this.#at % urls.length]!;
    this.#at++;
    return url;
  }

  /** Waits the pause due (50 ms, doubling to 1 s); `last` is thrown when the call's deadline comes first. */
  async pause(last: FenecError, signal: AbortSignal, own: AbortSignal | undefined): Promise<void> {
    try {
      await sleep(this.#pause, signal);
    } catch {
      if (own?.aborted) throw own.reason;
      throw last;
    }
    this.#pause = Math.min(this.#pause * 2, LAST_PAUSE);
    this.follows = 0;
  }
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) return reject(signal.reason);
    const done = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal.removeEventListener('abort', done);
      resolve();
    }, ms);
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * The leader's URL to send to, from a refusal's Fenec-Leader, or undefined
 * when it is not an http(s) URL, or would take an https client to http.
 */
function followable(from: string, leader: string): string | undefined {
  let u: URL;
  try {
    u = new URL(leader);
  } catch {
    return undefined;
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.hostname === '') return undefined;
  if (new URL(from).protocol === 'https:' && u.protocol === 'http:') return undefined;
  return leader;
}

/** The codes of a connection that could not be made: nothing was sent. */
const UNSENT: ReadonlySet<string> = new Set(['ECONNREFUSED', 'ENOTFOUND', 'EAI_AGAIN', 'EHOSTUNREACH', 'ENETUNREACH', 'UND_ERR_CONNECT_TIMEOUT']);

/**
 * Whether fetch failed before anything was sent: the connection was
 * refused or could not be made (no such host, no route). A connection
 * lost after the request went out is not: it may have run.
 */
function unsent(err: unknown): boolean {
  for (let e = err as { code?: unknown; cause?: unknown } | undefined, i = 0; e && i < 4; e = e.cause as typeof e, i++) {
    if (typeof e.code === 'string' && UNSENT.has(e.code)) return true;
  }
  return false;
}

function hostOf(url: string): string {
  const u = new URL(url);
  return `${u.hostname}:${u.port || (u.protocol === 'https:' ? '443' : '80')}`;
}

/**
 * The URLs `connect` was given: one, a comma-separated string of several,
 * or a list; each checked (a bad one named by its place), duplicates dropped.
 */
function checkURLs(url: string | readonly string[]): string[] {
  const list = typeof url === 'string' ? (url.includes(',') ? url.split(',').map((x) => x.trim()) : [url]) : [...url];
  if (list.length === 0) throw new TypeError('connect needs a URL: write it as http://host:port');
  if (list.length === 1) {
    checkURL(String(list[0]));
    return [String(list[0])];
  }
  const seen = new Set<string>();
  const out: string[] = [];
  list.forEach((u, i) => {
    let parsed: URL;
    try {
      parsed = checkURL(String(u));
    } catch (err) {
      throw new TypeError(`node ${i + 1} of ${list.length}: ${(err as Error).message}`);
    }
    const key = parsed.href.replace(/\/+$/, '');
    if (!seen.has(key)) {
      seen.add(key);
      out.push(String(u));
    }
  });
  return out;
}

function checkURL(url: string): URL {
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new TypeError(`url ${JSON.stringify(url)} is not a URL: write it as http://host:port`);
  }
  if ((u.protocol !== 'http:' && u.protocol !== 'https:') || u.hostname === '') {
    throw new TypeError(`url ${JSON.stringify(url)} needs the scheme http or https and a host`);
  }
  return u;
}

function headers(opts: RequestOptions, nodes: Nodes): api.QueryHeaders {
  const h: api.QueryHeaders = {};
  if (opts.wait !== undefined) h.fenecWait = opts.wait;
  if (opts.idempotencyKey !== undefined) h.idempotencyKey = opts.idempotencyKey;
  if (opts.after !== undefined) {
    if (!Number.isSafeInteger(opts.after) || opts.after < 0) throw new TypeError(`after must be a whole number from 0 (a Result.seq), not ${String(opts.after)}`);
    h.fenecAfter = Math.max(opts.after, nodes.several ? nodes.seq : 0);
  } else if (nodes.several && nodes.seq > 0) {
    // One URL is one server (a lone one answers 400 for a Fenec-After beyond
    // its own writes): only several nodes need it unasked.
    h.fenecAfter = nodes.seq;
  }
  return h;
}

function milliseconds(what: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`${what} must be a whole number of milliseconds, not ${n}`);
  return n;
}

/** Node's codes of a server certificate that failed the client's check. */
const TLS_CHECK: ReadonlySet<string> = new Set([
  'UNABLE_TO_VERIFY_LEAF_SIGNATURE', 'UNABLE_TO_GET_ISSUER_CERT', 'UNABLE_TO_GET_ISSUER_CERT_LOCALLY', 'SELF_SIGNED_CERT_IN_CHAIN',
  'DEPTH_ZERO_SELF_SIGNED_CERT', 'CERT_HAS_EXPIRED', 'CERT_NOT_YET_VALID', 'ERR_TLS_CERT_ALTNAME_INVALID', 'CERT_UNTRUSTED',
]);

/** What went wrong under fetch's "fetch failed": the system's words and code. */
function cause(err: unknown): string {
  const words: Record<string, string> = {
    ECONNREFUSED: 'connection refused',
    ECONNRESET: 'connection reset',
    ENOTFOUND: 'host not found',
    EAI_AGAIN: 'host lookup failed',
    ETIMEDOUT: 'connect timed out',
    EHOSTUNREACH: 'host unreachable',
    ENETUNREACH: 'network unreachable',
    EPIPE: 'connection closed',
    UND_ERR_SOCKET: 'connection closed',
  };
  const parts: string[] = [];
  for (let e = err as { message?: unknown; code?: unknown; cause?: unknown } | undefined; e && parts.length < 4; e = e.cause as typeof e) {
    const code = typeof e.code === 'string' ? e.code : undefined;
    if (code && words[code]) return `${words[code]} (${code}${typeof e.message === 'string' ? `: ${e.message}` : ''})`;
    if (code && TLS_CHECK.has(code)) return `TLS: the server's certificate failed the check (${code}${typeof e.message === 'string' ? `: ${e.message}` : ''})`;
    if (typeof e.message === 'string' && e.message !== 'fetch failed') parts.push(e.message);
  }
  return parts.join(': ') || String(err);
}

/** Whether a JSON value holds a bigint anywhere inside. */
function holdsBigint(v: unknown): boolean {
  if (typeof v === 'bigint') return true;
  if (typeof v !== 'object' || v === null) return false;
  if (Array.isArray(v)) return v.some(holdsBigint);
  for (const k in v) if (holdsBigint((v as Record<string, unknown>)[k])) return true;
  return false;
}

/** Whether a row holds a plain field its collection's types lack (the schema changed). */
function unknownField(rows: readonly Row[], s: Schema): boolean {
  const row = rows[0];
  if (row === undefined) return false;
  return Object.keys(row).some((k) => k !== 'id' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(k) && !s.types.has(k));
}

/**
 * A row by its fields' declared types (docs/sdks.md, "Rows"): a timestamp
 * becomes a Date, an int the client's int64 type (exact, or refused), a
 * float or a JSON value is a number. A column no field declares (a path,
 * an expression, `count`) is left as the JSON said.
 */
function decodeRow(row: Row, types: ReadonlyMap<string, FieldType> | undefined, int64: Int64): Row {
  if (types === undefined) return row;
  // The row was parsed for this answer alone: its fields are changed in
  // place (most keep their value), sparing a copy of every row a claim takes.
  for (const k of Object.keys(row)) {
    const v = row[k];
    const type = k === 'id' ? 'int' : types.get(k);
    if (v === null || type === undefined) continue;
    const decoded = type === 'int' ? integer(k, v, int64)
      : type === 'timestamp' && typeof v === 'string' ? new Date(v)
      : doubles(v);
    if (decoded !== v) row[k] = decoded;
  }
  return row;
}

/** An int field's value as the client's int64 type says. */
function integer(field: string, v: unknown, int64: Int64): unknown {
  if (typeof v !== 'number' && typeof v !== 'bigint') return v;
  if (int64 === 'bigint') return typeof v === 'bigint' ? v : Number.isInteger(v) ? BigInt(v) : v;
  if (int64 === 'string') return String(v);
  if (typeof v === 'bigint') {
    throw new FenecError(`field ${field}: ${v} is beyond ±2^53, which a number cannot hold exactly: connect with { int64: 'bigint' } or { int64: 'string' }`, 200, 'unexpected');
  }
  return v;
}

function doubles(v: unknown): unknown {
  // Most values hold no bigint (parse makes one only for an integer beyond 2^53): kept as they are.
  if (typeof v === 'object' && v !== null && !holdsBigint(v)) return v;
  if (typeof v === 'bigint') return Number(v);
  if (Array.isArray(v)) return v.map(doubles);
  if (typeof v === 'object' && v !== null) return Object.fromEntries(Object.entries(v).map(([k, x]) => [k, doubles(x)]));
  return v;
}
