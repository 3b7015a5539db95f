/**
 * `@fenecdb/web/client`: Fenec's client over fetch.
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
import { Query, type RequestOptions, type Row } from './query.js';
import type { Statement } from './render.js';

export { FenecError, type FenecErrorCode } from './errors.js';
export type { Answer, ErrorCode } from './generated/transport.js';
export type { Doc, InsertOptions, ReadOptions, RequestOptions, Returning, Row, WriteOptions } from './query.js';
export { Query } from './query.js';
export type { Direction, Operator, Statement, WriteClauses } from './render.js';
export { Expr, expr, Inc, inc, Raw, raw } from './values.js';

/** How {@link connect} reaches the server. */
export interface ConnectOptions {
  /** A bearer token, sent as `Authorization: Bearer <token>`. */
  token?: string;
  /** Milliseconds to wait for an answer (default 30000); a request's `wait` is added to it. */
  timeout?: number;
  /** The fetch to send with (default `globalThis.fetch`). */
  fetch?: typeof fetch;
}

const DEFAULT_TIMEOUT = 30_000;

/**
 * A connection to a Fenec server. Nothing is sent until a query is: it holds
 * the URL, the token and the fetch.
 */
export class Db {
  readonly #transport: api.Transport;
  readonly #timeout: number;

  /** Use {@link connect}. */
  constructor(url: string, opts: ConnectOptions = {}) {
    const fetch = opts.fetch ?? globalThis.fetch.bind(globalThis);
    this.#transport = opts.token === undefined ? { baseUrl: url, fetch } : { baseUrl: url, fetch, token: opts.token };
    this.#timeout = milliseconds('timeout', opts.timeout ?? DEFAULT_TIMEOUT);
  }

  /** A query builder on the collection `name` (an identifier, else this throws). */
  from<T extends Row = Row>(name: string): Query<T> {
    return new Query<T>(this, name);
  }

  /**
   * Runs one FenecQL statement, its values as `$1…$n` in `params`. Answers
   * the rows of a read (or of a write with `returning`), or
   * `{affected: n}` for a write.
   */
  async query(text: string, params: readonly unknown[] = [], opts: RequestOptions = {}): Promise<Answer> {
    return this.run({ query: text, params: [...params] }, opts);
  }

  /**
   * Runs statements all or nothing, in order, under one lock; answers each
   * statement's answer. A refusal names the statement in `FenecError.at`.
   * Builders render statements with `toQuery`:
   * `db.batch([jobs.where('id', 1).toQuery('delete', { require: 1 }), …])`.
   */
  async batch(statements: readonly Statement[], opts: RequestOptions = {}): Promise<Answer[]> {
    const body = { statements: statements.map((s) => ({ query: s.query, params: s.params })) };
    return (await this.#send((signal) => api.batch(this.#transport, body, headers(opts), signal), opts)).results;
  }

  /** Sends one statement; what builders call. */
  run(statement: Statement, opts: RequestOptions): Promise<Answer> {
    return this.#send((signal) => api.query(this.#transport, statement, headers(opts), signal), opts);
  }

  /**
   * Sends a call under the request's signal and a timeout of the client's
   * (or the request's) plus its wait; maps a refusal to a FenecError.
   */
  async #send<T>(call: (signal: AbortSignal) => Promise<api.Reply<T>>, opts: RequestOptions): Promise<T> {
    const limit = milliseconds('timeout', opts.timeout ?? this.#timeout) + milliseconds('wait', opts.wait ?? 0);
    const timer = AbortSignal.timeout(limit);
    const signal = opts.signal ? AbortSignal.any([opts.signal, timer]) : timer;
    let reply: api.Reply<T>;
    try {
      reply = await call(signal);
    } catch (err) {
      if (opts.signal?.aborted) throw opts.signal.reason;
      if (timer.aborted) throw new FenecError(`no answer in ${limit} ms`, 0, 'timeout', undefined, { cause: err });
      throw new FenecError(`request failed: ${(err as Error).message}`, 0, 'network', undefined, { cause: err });
    }
    if (!reply.ok) throw FenecError.fromAnswer(reply.status, reply.body, reply.text);
    return reply.body;
  }
}

/**
 * Connects to a Fenec server at `url` (such as `http://127.0.0.1:8080`).
 *
 * @example const db = connect('http://127.0.0.1:8080', { token: process.env.FENEC_TOKEN });
 */
export function connect(url: string, opts: ConnectOptions = {}): Db {
  return new Db(url, opts);
}

function headers(opts: RequestOptions): api.QueryHeaders {
  const h: api.QueryHeaders = {};
  if (opts.wait !== undefined) h.fenecWait = opts.wait;
  if (opts.idempotencyKey !== undefined) h.idempotencyKey = opts.idempotencyKey;
  return h;
}

function milliseconds(what: string, n: number): number {
  if (!Number.isSafeInteger(n) || n < 0) throw new TypeError(`${what} must be a whole number of milliseconds, not ${n}`);
  return n;
}
