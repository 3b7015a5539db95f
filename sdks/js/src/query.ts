import { FenecError } from './errors.js';
import { stringify } from './json.js';
import {
  condition,
  type Direction,
  fieldList,
  type Operator,
  point,
  renderCount,
  renderDelete,
  renderInsert,
  renderRows,
  renderUpdate,
  type State,
  type Statement,
  type WriteClauses,
} from './render.js';
import type { LiveEvent, WatchOptions } from './live.js';
import { collectionName, type Expr, fieldName, type Inc, nonNegative, type Raw } from './values.js';

/** A row as answered: its columns in order (`id` first for `*`). */
export type Row = Record<string, unknown>;

/**
 * A dotted path into a JSON field (`payload.to`), for a builder with a row
 * type, whose field names are its keys: `where(path('payload.to'), x)`.
 */
export type Path = string & { readonly __fenecPath: true };

/** Marks a dotted path into a JSON field, which a row type's keys do not list. */
export function path(p: string): Path {
  return fieldName(p) as Path;
}

/** A field name of rows of type T (any string for the default {@link Row}). */
export type Field<T> = Extract<keyof T, string>;

/** A document to insert: T's fields, each a value, `expr(…)` or `null`. */
export type Doc<T = Row> = { [K in keyof T]?: T[K] | Expr | null };

/** A patch: T's fields, each a value, `expr(…)`, `inc(n)` or `null` (which clears it). */
export type Patch<T = Row> = { [K in keyof T]?: T[K] | Expr | Inc | null };

/** How one request is sent. Every option may be left out or `undefined`. */
export interface RequestOptions {
  /** Gives the request up when aborted: the call rejects with the signal's reason. */
  signal?: AbortSignal | undefined;
  /** Milliseconds to wait for the answer, instead of the client's timeout. */
  timeout?: number | undefined;
  /**
   * Milliseconds the server may hold a claim (a `set` or `del`) while it
   * would take nothing (`Fenec-Wait`, 0–30000). The client waits this much
   * longer than its timeout.
   */
  wait?: number | undefined;
  /** Sent as `Idempotency-Key`: a retry with the same key is answered the first answer, and writes nothing. */
  idempotencyKey?: string | undefined;
  /**
   * Sent as `Fenec-After`: the server runs the request once it has applied
   * write `after` (a {@link Result.seq}, perhaps another node's) —
   * read-your-writes across a cluster (docs/cluster.md). A client given
   * several nodes sends the highest it has seen on its own.
   */
  after?: number | undefined;
}

/** Options of a read. */
export type ReadOptions = Pick<RequestOptions, 'signal' | 'timeout' | 'after'>;

/** Options of an insert. */
export type InsertOptions = Pick<RequestOptions, 'signal' | 'timeout' | 'idempotencyKey'>;

/** Options of an update or a delete: what it answers, what it requires, and how it is sent. */
export interface WriteOptions extends WriteClauses, RequestOptions {}

/** A write that answers rows: `returning: true` or a list of fields. */
export type Returning = WriteOptions & { returning: true | readonly string[] };

/** What a statement answered, and how (docs/sdks.md, "Results"). */
export interface Result<T = Row> {
  /** The rows of a read or of a write with `returning`; `undefined` when a write answered its count. */
  rows: T[] | undefined;
  /** How many rows the write wrote (or the rows answered). */
  affected: number;
  /** The database's change number after a request that wrote (`Fenec-Seq`); 0 when it wrote nothing. */
  seq: number;
  /** The answer is the first answer to this request's `Idempotency-Key`, replayed: nothing was written. */
  replayed: boolean;
}

/** What a builder sends its statements through (a {@link Client}). */
export interface Runner {
  /** Sends one statement and answers its result. */
  run(statement: Statement, opts: RequestOptions): Promise<Result>;
  /** Sends statements in one `/batch`, all or nothing, and answers each one's result (a {@link Client} has it). */
  batch?(statements: readonly Statement[], opts: RequestOptions): Promise<Result[]>;
  /** Follows a `get` as a live query (docs/changes.md). */
  watch?(statement: Statement, opts: WatchOptions): AsyncGenerator<LiveEvent, void, undefined>;
}

/**
 * Sends a rendered statement through a builder's client: for the worker,
 * which renders its claim and ack once and sends them many times. Not
 * part of the API (client.ts does not export it).
 */
export let sendThrough: (q: Query<object>, statement: Statement, opts: RequestOptions) => Promise<Result>;

/**
 * What sends rendered statements in one `/batch` through a builder's
 * client, or `undefined` when its runner sends no batches: for the worker,
 * whose acks may go in the request of its next claim. Not part of the API.
 */
export let batchOf: (q: Query<object>) => ((statements: readonly Statement[], opts: RequestOptions) => Promise<Result[]>) | undefined;

/**
 * An immutable query on one collection: each call answers a new builder, so
 * a builder can be kept and reused (`const jobs = db.from('jobs')`). The
 * endpoints (`rows`, `first`, `count`, `insert`, `update`, `delete`) send
 * it; `renderRows()`, `renderUpdate(…)`, … render it without sending.
 *
 * Values always become `$n` parameters; field and collection names are
 * checked against `[A-Za-z_][A-Za-z0-9_]*` (dotted paths allowed for
 * fields), and a builder method throws a `TypeError` on anything else.
 */
export class Query<T extends object = Row> {
  readonly #runner: Runner;
  readonly #state: State;

  static {
    sendThrough = (q, statement, opts) => q.#runner.run(statement, opts);
    batchOf = (q) => {
      const runner = q.#runner;
      return runner.batch === undefined ? undefined : (statements, opts) => runner.batch!(statements, opts);
    };
  }

  /** Made by `db.from(name)`. */
  constructor(runner: Runner, collection: string, state?: State) {
    this.#runner = runner;
    this.#state = Object.freeze(state ?? { collection: collectionName(collection), where: [], order: [] });
  }

  #with(change: Partial<State>): Query<T> {
    return new Query<T>(this.#runner, this.#state.collection, { ...this.#state, ...change });
  }

  /**
   * Adds a condition; several join with `and`.
   * - `where(field, value)`: `field = $n`, or `field is null` for `null`;
   * - `where(field, op, value)`: `field op $n`, `op` one of `=`, `!=`, `<`,
   *   `<=`, `>`, `>=`, `in`, `not in` (the last two take a list);
   * - `where(raw('text with ? marks', …args))`: the text, each `?` a parameter.
   *
   * With a row type, a value is typed by its field (`T[K]`, or `expr(…)`);
   * a `path(…)` takes any value.
   */
  where(condition: Raw): Query<T>;
  where<K extends Field<T>>(field: K, value: T[K] | Expr | null): Query<T>;
  where<K extends Field<T>>(field: K, op: 'in' | 'not in', values: readonly T[K][]): Query<T>;
  where<K extends Field<T>>(field: K, op: Operator, value: T[K] | Expr | null): Query<T>;
  where(field: Path, value: unknown): Query<T>;
  where(field: Path, op: Operator, value: unknown): Query<T>;
  where(...args: unknown[]): Query<T> {
    return this.#with({ where: Object.freeze([...this.#state.where, condition(args)]) });
  }

  /** Orders by a field (ascending unless `'desc'`); several calls order by several keys. */
  order(field: Field<T> | Path, direction: Direction = 'asc'): Query<T> {
    if (direction !== 'asc' && direction !== 'desc') {
      throw new TypeError(`order direction ${JSON.stringify(direction)} is not asc or desc`);
    }
    return this.#with({ order: Object.freeze([...this.#state.order, { field: fieldName(field), dir: direction }]) });
  }

  /** Takes at most `n` rows (a non-negative integer). */
  limit(n: number): Query<T> {
    return this.#with({ limit: nonNegative('limit', n) });
  }

  /** Skips `n` rows of a read (a non-negative integer). */
  offset(n: number): Query<T> {
    return this.#with({ offset: nonNegative('offset', n) });
  }

  /** Answers these fields (paths allowed) rather than every field; a second `select` replaces the first. */
  select(...fields: (Field<T> | Path | '*')[]): Query<T> {
    return this.#with({ select: fieldList('select', fields) });
  }

  /**
   * Orders the rows nearest first to `point` (`[longitude, latitude]`) over
   * a `@geo` field: `near field $n`, the same order as
   * `order distance(field, point)`. With `exact: true` it renders
   * `near field $n exact` (docs/fenecql.md). It takes no `order` beside it.
   */
  near(field: Field<T> | Path, at: readonly [number, number], opts: { exact?: boolean } = {}): Query<T> {
    const f = fieldName(field);
    return this.#with({ near: Object.freeze({ field: f, point: point(f, at), exact: opts.exact === true }) });
  }

  /**
   * Makes `insert` write only a document that is not there yet:
   * `put c {…} if absent`, which answers 1, or 0 when a document already
   * holds its `id` or one of its `@unique` values (and writes nothing).
   */
  ifAbsent(): Query<T> {
    return this.#with({ absent: Object.freeze({}) });
  }

  /**
   * Makes `insert` an upsert: `put c {…} if absent else set {…}` writes the
   * document when it is not there, and else applies `set` to the one that
   * is. In `set`, a bare field reads the stored document and
   * `expr('new.f')` the incoming one; `inc(n)` counts from 0 on either path.
   */
  upsert(set: Patch<T>): Query<T> {
    return this.#with({ absent: Object.freeze({ set }) });
  }

  /**
   * Follows this read as a live query (docs/changes.md): its rows now, then
   * every insert, update and delete of a row it matches, as an async
   * iterator that reconnects with `Last-Event-ID`. Only `where` and
   * `select` may be set: the server refuses the rest (400).
   */
  watch(opts: WatchOptions = {}): AsyncGenerator<LiveEvent, void, undefined> {
    if (!this.#runner.watch) throw new TypeError('this builder was made without a client that can watch');
    return this.#runner.watch(this.renderRows(), opts);
  }

  /** Renders the read `rows()` sends, without sending it (for `db.batch`, logs and tests). */
  renderRows(): Statement {
    return renderRows(this.#state);
  }

  /** Renders the read `first()` sends (`… limit 1`). */
  renderFirst(): Statement {
    return renderRows({ ...this.#state, limit: 1 });
  }

  /** Renders the count `count()` sends. */
  renderCount(): Statement {
    return renderCount(this.#state);
  }

  /** Renders the write `insert(docs)` sends. */
  renderInsert(docs: Doc<T> | readonly Doc<T>[]): Statement {
    return renderInsert(this.#state, docs);
  }

  /** Renders the write `update(patch, opts)` sends. */
  renderUpdate(patch: Patch<T>, opts?: WriteClauses): Statement {
    return renderUpdate(this.#state, patch, opts);
  }

  /** Renders the write `delete(opts)` sends. */
  renderDelete(opts?: WriteClauses): Statement {
    return renderDelete(this.#state, opts);
  }

  /**
   * Renders what an endpoint sends, without sending it.
   *
   * @deprecated Use `renderRows()`, `renderFirst()`, `renderCount()`,
   * `renderInsert(docs)`, `renderUpdate(patch, opts)` or
   * `renderDelete(opts)` (docs/sdks.md, "One word per idea").
   */
  toQuery(): Statement;
  /** @deprecated Use `renderRows()`, `renderFirst()` or `renderCount()`. */
  toQuery(endpoint: 'rows' | 'first' | 'count'): Statement;
  /** @deprecated Use `renderInsert(docs)`. */
  toQuery(endpoint: 'insert', docs: Doc<T> | readonly Doc<T>[]): Statement;
  /** @deprecated Use `renderUpdate(patch, opts)`. */
  toQuery(endpoint: 'update', patch: Patch<T>, opts?: WriteClauses): Statement;
  /** @deprecated Use `renderDelete(opts)`. */
  toQuery(endpoint: 'delete', opts?: WriteClauses): Statement;
  toQuery(endpoint = 'rows', arg?: unknown, opts?: WriteClauses): Statement {
    switch (endpoint) {
      case 'rows':
        return this.renderRows();
      case 'first':
        return this.renderFirst();
      case 'count':
        return this.renderCount();
      case 'insert':
        return renderInsert(this.#state, arg);
      case 'update':
        return renderUpdate(this.#state, arg, opts);
      case 'delete':
        return renderDelete(this.#state, arg as WriteClauses | undefined);
      default:
        throw new TypeError(`no endpoint ${JSON.stringify(endpoint)}`);
    }
  }

  /** Reads the rows: `get c [select …] [where …] [near …] [order …] [limit n] [offset n]`. */
  async rows(opts: ReadOptions = {}): Promise<T[]> {
    return rows<T>(await this.#runner.run(this.renderRows(), opts));
  }

  /** Reads the first row (`limit 1`), or `null` when there is none. */
  async first(opts: ReadOptions = {}): Promise<T | null> {
    return rows<T>(await this.#runner.run(this.renderFirst(), opts))[0] ?? null;
  }

  /** Counts the rows that match: `get c [where …] count`. */
  async count(opts: ReadOptions = {}): Promise<number> {
    const n = rows<Row>(await this.#runner.run(this.renderCount(), opts))[0]?.['count'];
    if (typeof n !== 'number') throw unexpected(n);
    return n;
  }

  /**
   * Inserts a document, or several at once; answers how many were written.
   * A taken id is 409 — unless the builder says `ifAbsent()` (then 0) or
   * `upsert(set)`.
   */
  async insert(docs: Doc<T> | readonly Doc<T>[], opts: InsertOptions = {}): Promise<number> {
    return affected(await this.#runner.run(this.renderInsert(docs), opts));
  }

  /**
   * Sets fields of the rows that match: `set c {…} [where …] [order …]
   * [limit n] [returning …] [require n]`. A patch value is a JSON value,
   * `null`, `expr(…)` or `inc(n)`. With `returning` it answers the rows as
   * written, else how many were written. With `wait` (ms) the server holds
   * it while it would write nothing; `require: n` refuses (412) unless
   * exactly n rows are written.
   */
  update(patch: Patch<T>, opts: Returning): Promise<T[]>;
  update(patch: Patch<T>, opts?: WriteOptions & { returning?: false | undefined }): Promise<number>;
  update(patch: Patch<T>, opts?: WriteOptions): Promise<T[] | number>;
  async update(patch: Patch<T>, opts: WriteOptions = {}): Promise<T[] | number> {
    return written<T>(await this.#runner.run(this.renderUpdate(patch, opts), opts), opts);
  }

  /**
   * Deletes the rows that match: `del c [where …] [order …] [limit n]
   * [returning …] [require n]`. With `returning` it answers the rows as they
   * were, else how many were deleted. `wait` and `require` as for `update`.
   */
  delete(opts: Returning): Promise<T[]>;
  delete(opts?: WriteOptions & { returning?: false | undefined }): Promise<number>;
  delete(opts?: WriteOptions): Promise<T[] | number>;
  async delete(opts: WriteOptions = {}): Promise<T[] | number> {
    return written<T>(await this.#runner.run(this.renderDelete(opts), opts), opts);
  }
}

function written<T>(r: Result, opts: WriteClauses): T[] | number {
  return opts.returning === undefined || opts.returning === false ? affected(r) : rows<T>(r);
}

function rows<T>(r: Result): T[] {
  if (r.rows === undefined) throw unexpected(r.affected);
  return r.rows as T[];
}

function affected(r: Result): number {
  if (r.rows !== undefined) throw unexpected(r.rows);
  return r.affected;
}

function unexpected(answer: unknown): FenecError {
  return FenecError.unexpected(200, stringify(answer));
}
