/**
 * The queue worker of docs/workers.md: claim (sized to the free slots;
 * not held while claims take jobs, held with `wait` once one found none),
 * run each job with its lease extended (in batches, one statement per
 * claim owner), ack in batches (in the request of a claim not held when
 * the last running handler's return closed the batch) or fail with backoff,
 * dead-letter after `maxAttempts`, stop gracefully. Every statement it
 * sends is a `worker …` case of conformance/builder-golden.json.
 */

import { FenecError } from './errors.js';
import { batchOf, type Query, type Result, type Row, sendThrough } from './query.js';
import type { Statement } from './render.js';
import { expr, inc, raw, type Raw } from './values.js';

/**
 * The step a {@link WorkerError} names (docs/workers.md, "What is
 * reported"): a fault of a statement (`claim`, `extend`, `ack`, `fail`,
 * `release`), a failed attempt (`handler`), a job that became a dead
 * letter (`dead_letter`), a job whose lease was lost (`lost_lease`).
 */
export type WorkerStep = 'claim' | 'extend' | 'ack' | 'fail' | 'release' | 'handler' | 'dead_letter' | 'lost_lease';

/**
 * What a worker reports through `onError`: the step, the job's id when the
 * step is about one job, and the cause (`cause`: a {@link FenecError} for
 * a statement, what the handler threw for `handler` and `dead_letter`).
 */
export class WorkerError extends Error {
  override readonly name = 'WorkerError';
  /** What the worker was doing. */
  readonly step: WorkerStep;
  /** The job's id, or `undefined` when the step is not about one job (a claim, a batch). */
  readonly jobId: unknown;

  constructor(step: WorkerStep, jobId: unknown, cause: unknown) {
    super(`${step}${jobId === undefined ? '' : ` of job ${String(jobId)}`}: ${describe(cause)}`, { cause });
    this.step = step;
    this.jobId = jobId;
  }
}

/** Runs one job; throw (or reject) to fail it. `signal` aborts when the lease is lost or the stop's grace is over. */
export type Handler<T> = (job: T, signal: AbortSignal) => unknown;

/** The options of {@link worker}; every one may be left out or `undefined`. Durations are milliseconds. */
export interface WorkerOptions {
  /** Jobs in flight at once (default 10). */
  concurrency?: number | undefined;
  /** How long a claim, and each extension, holds a job (default 30000, at least 100). */
  lease?: number | undefined;
  /**
   * How long the server holds a claim while no job is ready (default 30000,
   * at most 30000); a claim is held only once the last one found no job.
   */
  wait?: number | undefined;
  /** A job whose handler fails on this run becomes a dead letter (default 5). */
  maxAttempts?: number | undefined;
  /** The delay before a failed job runs again, from its attempts (default: exponential from 1 s, capped at 1 h, full jitter). */
  backoff?: ((attempts: number) => number) | undefined;
  /** An extra claim condition: `raw('queue = ?', 'mail')`. */
  where?: Raw | undefined;
  /** The owner prefix (default `w-<random>`); each claim's owner is `<prefix>:<n>`. */
  ownerPrefix?: string | undefined;
  /**
   * The old name of `ownerPrefix`.
   *
   * @deprecated Use `ownerPrefix` (docs/sdks.md, "One word per idea").
   */
  owner?: string | undefined;
  /** On close, how long running handlers may take before they are cancelled (default 30000). */
  grace?: number | undefined;
  /**
   * Where faults, failed attempts, dead letters and lost leases are
   * reported (default: `console.warn` for a failed attempt or a fault that
   * is retried, `console.error` for a dead letter, a lost lease, or a
   * refusal that is not).
   */
  onError?: ((err: WorkerError, step: WorkerStep) => void) | undefined;
}

/** The default backoff: a random delay from 0 to min(1 h, 1 s × 2^(n − 1)). */
export function backoff(n: number): number {
  return Math.random() * Math.min(3_600_000, 1000 * 2 ** Math.max(0, n - 1));
}

/** The shortest lease, in every SDK (docs/sdks.md). */
const MIN_LEASE = 100;
/**
 * An ack batch is sent this long after its first job, at ACK_BATCH jobs,
 * or as soon as no handler is running (docs/workers.md, "Ack").
 */
const ACK_WINDOW = 5;
const ACK_BATCH = 100;

/**
 * For tests only, not part of the API: an option under this key sets the
 * ack window in milliseconds (a long one shows that the window closes
 * early when no handler is running).
 */
export const ACK_WINDOW_OPTION: unique symbol = Symbol('fenec worker ack window');

/** The acks of one claim owner's jobs: one statement, `del … where id in $1 and owner = $2 returning id`. */
interface AckGroup {
  readonly rs: Running[];
  readonly statement: Statement;
}

interface Running {
  readonly id: unknown;
  readonly owner: string;
  /** Its cancellation; `undefined` when the handler cannot read its signal (see takesSignal). */
  readonly ctl: AbortController | undefined;
  /** The lease was lost: nothing more is sent for the job. */
  lost: boolean;
  /** Cancelled by close() after the grace: released, nothing else sent. */
  stopped: boolean;
  /** An extension of it is in flight: the next tick leaves it out. */
  extending: boolean;
}

/**
 * Tells whether code runs inside one of a worker's handlers, so that a
 * close() from there only asks for the stop (docs/workers.md, "Stop").
 * Node, Deno and Bun have AsyncLocalStorage (through
 * `process.getBuiltinModule`, so a bundler for the browser sees no import);
 * elsewhere only a close() in a handler's synchronous start is told apart.
 */
interface Store {
  run<R, A extends unknown[]>(store: object, fn: (...args: A) => R, ...args: A): R;
  getStore(): object | undefined;
}
const handlerScope: Store | undefined = (() => {
  const get = (globalThis as { process?: { getBuiltinModule?: (id: string) => unknown } }).process?.getBuiltinModule;
  if (typeof get !== 'function') return undefined;
  try {
    const m = get('node:async_hooks') as { AsyncLocalStorage?: new () => Store } | undefined;
    return m?.AsyncLocalStorage ? new m.AsyncLocalStorage() : undefined;
  } catch {
    return undefined;
  }
})();

/**
 * A running worker: made by {@link worker}, it claims and runs jobs until
 * {@link Worker.close} (or, with {@link Worker.runUntilEmpty}, until the
 * queue has no ready job).
 */
export class Worker<T extends object = Row> {
  /** The collection, untyped: the worker names the queue's fields, which a row type may not list. */
  readonly #jobs: Query<Row>;
  readonly #claim: Query<Row>;
  readonly #handler: Handler<T>;
  /** The handler can read its second argument: each job gets an AbortSignal of its own (see takesSignal). */
  readonly #signalled: boolean;
  readonly #concurrency: number;
  /** A claim is sent when at least this many slots are free (half, rounded up), or none runs. */
  readonly #half: number;
  readonly #lease: number;
  readonly #wait: number;
  readonly #maxAttempts: number;
  readonly #backoff: (attempts: number) => number;
  readonly #grace: number;
  readonly #ackWindow: number;
  readonly #onError: ((err: WorkerError, step: WorkerStep) => void) | undefined;
  readonly #prefix: string;
  /** Sends a `/batch` through the client (see #claimWithAcks); `undefined` when its runner sends none. */
  readonly #batch: ((statements: readonly Statement[], opts: { wait: number }) => Promise<Result[]>) | undefined;
  #claims = 0;
  /**
   * The last claim took jobs (or none was answered yet): the next one is
   * not held (`wait` 0), and may carry acks; only once a claim finds no
   * job is the next one held (docs/workers.md, "Claim").
   */
  #busy = true;
  readonly #running = new Set<Running>();
  /** Handlers running and statements in flight that a stop waits for (see #track). */
  #tasks = 0;
  #drained: (() => void) | undefined;
  /** The claim rendered once per size (limit), its owner put in at each claim (see #claimOf). */
  readonly #claims1 = new Map<number, { statement: Statement; at: number }>();
  /** The ack rendered once: `del … where id in $1 and owner = $2 returning id`. */
  #ackStatement: Statement | undefined;
  readonly #closing = new AbortController();
  /** The claim in flight, given up by close() and by runUntilEmpty(). */
  #claimCtl: AbortController | undefined;
  #graceEnd = Infinity;
  #slotFreed: (() => void) | undefined;
  /** The loop was woken and sends its next claim before it waits again: an ack due now goes with it (see #run). */
  #claimNext = false;
  #untilEmpty = false;
  #acks: Running[] = [];
  #ackTimer: ReturnType<typeof setTimeout> | undefined;
  #ticker: ReturnType<typeof setInterval> | undefined;
  /** How many handlers are in their synchronous start now (where no AsyncLocalStorage is). */
  #syncDepth = 0;
  readonly #loop: Promise<void>;
  #closed: Promise<void> | undefined;

  /** Use {@link worker}. */
  constructor(jobs: Query<T>, handler: Handler<T>, opts: WorkerOptions = {}) {
    this.#jobs = jobs as unknown as Query<Row>;
    this.#batch = batchOf(this.#jobs);
    this.#handler = handler;
    this.#signalled = takesSignal(handler);
    this.#concurrency = whole('concurrency', opts.concurrency ?? 10, 1);
    this.#half = Math.ceil(this.#concurrency / 2);
    this.#lease = whole('lease', opts.lease ?? 30_000, MIN_LEASE);
    this.#wait = whole('wait', opts.wait ?? 30_000, 0);
    if (this.#wait > 30_000) throw new TypeError(`wait must be at most 30000 milliseconds, not ${this.#wait}`);
    this.#maxAttempts = whole('maxAttempts', opts.maxAttempts ?? 5, 1);
    this.#backoff = opts.backoff ?? backoff;
    this.#grace = whole('grace', opts.grace ?? 30_000, 0);
    this.#onError = opts.onError;
    this.#ackWindow = (opts as { [ACK_WINDOW_OPTION]?: number })[ACK_WINDOW_OPTION] ?? ACK_WINDOW;
    const prefix = opts.ownerPrefix ?? opts.owner;
    if (prefix !== undefined && (typeof prefix !== 'string' || prefix === '')) throw new TypeError('ownerPrefix must be a non-empty string');
    // 32 random bits, as the first 8 hex digits of a UUID would give (globalThis.crypto is slow to load on Node).
    this.#prefix = prefix ?? `w-${Math.floor(Math.random() * 2 ** 32).toString(16).padStart(8, '0')}`;
    let claim = this.#jobs.where(raw('run_at <= now()'));
    if (opts.where !== undefined) claim = claim.where(opts.where);
    this.#claim = claim.order('run_at');
    // Started a turn later, so that `worker(…).runUntilEmpty()` sends its first claim unheld.
    this.#loop = Promise.resolve().then(() => this.#run());
  }

  /** The owner prefix of this worker's claims. */
  get owner(): string {
    return this.#prefix;
  }

  /** Jobs whose handlers are running now. */
  get running(): number {
    return this.#running.size;
  }

  /**
   * Stops: no new claims (a held claim is given up), running handlers get
   * the grace period and are then cancelled and their jobs released; the
   * acks due are sent first. Resolves once every job is acked, failed,
   * released or given up. Called from inside one of this worker's handlers,
   * it only asks for the stop and resolves at once: the worker stops as
   * soon as the running handlers return.
   */
  close(): Promise<void> {
    this.#closed ??= this.#stop();
    if (this.#syncDepth > 0 || (handlerScope !== undefined && handlerScope.getStore() === this)) return Promise.resolve();
    return this.#closed;
  }

  /**
   * Runs until the queue has no ready job: stops (as {@link close}, acks
   * flushed) once a claim finds no ready job and no handler is running,
   * and resolves then. Jobs not ready yet (a later `run_at`) are left.
   * Its claims are not held at the server.
   */
  runUntilEmpty(): Promise<void> {
    if (!this.#untilEmpty) {
      this.#untilEmpty = true;
      // A claim held now would hold the stop up to its wait: it is given up and sent again unheld.
      this.#claimCtl?.abort(UNTIL_EMPTY);
    }
    return this.#closed ?? this.#stopped;
  }

  #resolveStopped: (() => void) | undefined;
  readonly #stopped = new Promise<void>((resolve) => (this.#resolveStopped = resolve));

  async #stop(): Promise<void> {
    this.#graceEnd = Date.now() + this.#grace;
    this.#closing.abort();
    this.#claimCtl?.abort();
    this.#wake();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const graceOver = new Promise<void>((resolve) => {
      timer = setTimeout(() => {
        const releases: Promise<void>[] = [];
        for (const r of this.#running) {
          if (r.lost || r.stopped) continue;
          r.stopped = true;
          r.ctl?.abort(new Error('the worker stopped and its grace period is over'));
          releases.push(this.#release(r.id, r.owner));
        }
        void Promise.all(releases).then(() => resolve());
      }, this.#grace);
    });
    await this.#loop;
    // Every job settled — or, once the grace is over, released (a handler that ignores its signal is not waited for).
    await Promise.race([this.#drain(), graceOver]);
    clearTimeout(timer);
    clearInterval(this.#ticker);
    this.#resolveStopped?.();
  }

  async #run(): Promise<void> {
    let faults = 0;
    /** The last claim found nothing while handlers ran (run until empty): wait for one to end. */
    let empty = false;
    while (!this.#closing.signal.aborted) {
      const running = this.#running.size;
      const free = this.#concurrency - running;
      if (running > 0 && (free < this.#half || empty)) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        empty = false;
        continue;
      }
      this.#claimNext = false;
      const owner = `${this.#prefix}:${++this.#claims}`;
      const untilEmpty = this.#untilEmpty;
      const held = !untilEmpty && !this.#busy && this.#wait > 0;
      const ctl = new AbortController();
      this.#claimCtl = ctl;
      let rows: Row[];
      try {
        const statement = this.#claimOf(free, owner);
        let answer: Result | undefined;
        if (!held && this.#running.size === 0 && this.#acks.length > 0 && this.#batch !== undefined) {
          // The last running handler returned and closed the batch of acks
          // (see #ack): the acks go in this claim's request.
          answer = await this.#claimWithAcks(statement, this.#takeAcks());
          if (answer === undefined) continue;
        } else {
          const claimed = sendThrough(this.#claim, statement, { wait: held ? this.#wait : 0, signal: ctl.signal });
          // Acks left for this moment (see #ack) go out right behind a held
          // claim, which cannot carry them, so that the claim, which the
          // worker waits for, is sent first: on Node its bytes are written on
          // the next tick, and the ack is made after that, while the server
          // works on the claim.
          if (this.#running.size === 0 && this.#acks.length > 0) afterWrites(() => this.#flushAcks());
          answer = await claimed;
        }
        if (answer.rows === undefined) throw FenecError.unexpected(200, `{"affected":${answer.affected}}`);
        rows = answer.rows;
        this.#busy = rows.length > 0;
        faults = 0;
      } catch (err) {
        // The server may have taken jobs for a claim whose answer was lost or given up: give them back.
        const abandoned = this.#releaseClaim(owner);
        if (this.#closing.signal.aborted || ctl.signal.reason === UNTIL_EMPTY) {
          await abandoned;
          continue;
        }
        this.#report('claim', undefined, err);
        await abandoned;
        await this.#idle(backoff(++faults));
        continue;
      } finally {
        this.#claimCtl = undefined;
      }
      if (untilEmpty && rows.length === 0) {
        if (this.#running.size === 0) {
          void this.close();
          return;
        }
        empty = true;
      }
      for (const row of rows) {
        if (this.#closing.signal.aborted) this.#track(this.#release(typeof row['id'] === 'string' ? BigInt(row['id']) : row['id'], owner));
        else this.#start(row, owner);
      }
    }
  }

  #wake(): void {
    const f = this.#slotFreed;
    if (f === undefined) return;
    this.#slotFreed = undefined;
    this.#claimNext = !this.#closing.signal.aborted;
    f();
  }

  /**
   * The claim of `free` jobs for `owner`: rendered by the builder once per
   * size, with a stand-in owner whose place in the parameters is then
   * filled at each claim (the text is the builder's, byte for byte).
   */
  #claimOf(free: number, owner: string): Statement {
    let c = this.#claims1.get(free);
    if (c === undefined) {
      const statement = this.#claim.limit(free).renderUpdate({ owner: OWNER, run_at: expr('now() + ?', this.#lease), attempts: inc(1) }, { returning: true });
      c = { statement, at: statement.params.indexOf(OWNER) };
      this.#claims1.set(free, c);
    }
    const params = c.statement.params.slice();
    params[c.at] = owner;
    return { ...c.statement, params };
  }

  /**
   * Starts a job's handler. Its end is taken with one `then` on what the
   * handler returned, not through async functions: with empty handlers
   * this is the worker's hottest path.
   */
  #start(row: Row, owner: string): void {
    // An id read as its digits (connect's int64: 'string') is sent back as an int.
    const given = row['id'];
    const id = typeof given === 'string' ? BigInt(given) : given;
    const ctl = this.#signalled ? new AbortController() : undefined;
    const r: Running = { id, owner, ctl, lost: false, stopped: false, extending: false };
    const signal = ctl === undefined ? UNREAD : ctl.signal;
    this.#running.add(r);
    this.#ticker ??= setInterval(() => this.#tick(), this.#lease / 2);
    this.#tasks++;
    let out: unknown;
    this.#syncDepth++;
    try {
      out = handlerScope === undefined ? this.#handler(row as unknown as T, signal) : handlerScope.run(this, this.#handler, row as unknown as T, signal);
    } catch (error) {
      out = Promise.reject(error);
    } finally {
      this.#syncDepth--;
    }
    // Even a handler that returned at once ends a turn later: the claim's
    // other jobs start first, so they can share its ack.
    Promise.resolve(out).then(() => this.#ended(r, row, undefined), (error: unknown) => this.#ended(r, row, { error }));
  }

  /** A handler returned or threw: its slot is free; the job is acked, failed, or (lost, stopped) left. */
  #ended(r: Running, row: Row, failure: { error: unknown } | undefined): void {
    this.#running.delete(r);
    // The slot is free now: the next claim does not wait for the ack.
    this.#wake();
    if (failure === undefined && !r.lost && !r.stopped) this.#ack(r);
    else {
      // The last handler ended without an ack of its own: the batch waits for nothing now.
      if (this.#running.size === 0 && this.#acks.length > 0) this.#flushAcks();
      if (failure !== undefined && !r.lost && !r.stopped) this.#track(this.#fail(r, row, failure.error));
    }
    this.#untrack();
  }

  async #fail(r: Running, row: Row, error: unknown): Promise<void> {
    const text = errorText(error);
    const attempts = Number(row['attempts']);
    const dead = attempts >= this.#maxAttempts;
    if (!dead) this.#report('handler', r.id, error);
    const patch = dead
      ? { owner: null, error: text, run_at: null }
      : { owner: null, error: text, run_at: expr('now() + ?', Math.round(this.#backoff(attempts))) };
    const sent = await this.#settle('fail', r, () => this.#mine(r.id, r.owner).update(patch, { require: 1 }));
    if (sent && dead) this.#report('dead_letter', r.id, error);
  }

  /** Every `lease / 2`: extends the running jobs, one statement per claim owner. */
  #tick(): void {
    if (this.#running.size === 0) {
      clearInterval(this.#ticker);
      this.#ticker = undefined;
      return;
    }
    const byOwner = new Map<string, Running[]>();
    for (const r of this.#running) {
      if (r.lost || r.stopped || r.extending) continue;
      const list = byOwner.get(r.owner);
      if (list === undefined) byOwner.set(r.owner, [r]);
      else list.push(r);
    }
    for (const [owner, rs] of byOwner) this.#track(this.#extend(owner, rs));
  }

  /**
   * Extends jobs of one claim; a job the answer does not list lost its
   * lease. Bounded by `lease / 2`, so a hung one holds up no later tick of
   * other jobs. Any other failure is reported and the next tick tries again.
   */
  async #extend(owner: string, rs: Running[]): Promise<void> {
    for (const r of rs) r.extending = true;
    try {
      const held = await this.#jobs.where('id', 'in', rs.map((r) => r.id)).where('owner', owner)
        .update({ run_at: expr('now() + ?', this.#lease) }, { returning: ['id'], timeout: Math.max(1, Math.floor(this.#lease / 2)) });
      const kept = new Set(held.map((h) => String(h['id'])));
      for (const r of rs) {
        // A job whose handler returned meanwhile may be acked already: not a loss.
        if (!kept.has(String(r.id)) && this.#running.has(r)) this.#lose(r, 'extend');
      }
    } catch (err) {
      this.#report('extend', rs.length === 1 ? rs[0]!.id : undefined, err);
    } finally {
      for (const r of rs) r.extending = false;
    }
  }

  /**
   * Queues an ack: sent ACK_WINDOW ms after the first of a batch, or at
   * ACK_BATCH jobs, or at once when no handler is running any more (nothing
   * could join the batch before the next claim answers) or when stopping.
   */
  #ack(r: Running): void {
    this.#acks.push(r);
    const idle = this.#running.size === 0;
    // No handler runs: the batch is complete. When the loop is about to
    // claim, it sends the batch in the claim's request, or right behind a
    // held claim (see #run); otherwise it goes now. The window's timer stays as the backstop.
    if (this.#acks.length >= ACK_BATCH || (idle && !this.#claimNext) || this.#closing.signal.aborted) this.#flushAcks();
    else this.#ackTimer ??= setTimeout(() => this.#flushAcks(), idle ? 0 : this.#ackWindow);
  }

  #flushAcks(): void {
    for (const group of this.#takeAcks()) this.#track(this.#sendAck(group));
  }

  /** Takes the batch of acks due, one statement per claim owner, and begins an empty one. */
  #takeAcks(): AckGroup[] {
    clearTimeout(this.#ackTimer);
    this.#ackTimer = undefined;
    const batch = this.#acks;
    this.#acks = [];
    const byOwner = new Map<string, Running[]>();
    for (const r of batch) {
      const list = byOwner.get(r.owner);
      if (list === undefined) byOwner.set(r.owner, [r]);
      else list.push(r);
    }
    this.#ackStatement ??= this.#jobs.where('id', 'in', [0]).where('owner', '').renderDelete({ returning: ['id'] });
    const { query, collection } = this.#ackStatement;
    const groups: AckGroup[] = [];
    for (const [owner, rs] of byOwner) {
      const statement: Statement = { query, params: [rs.map((r) => r.id), owner] };
      if (collection !== undefined) statement.collection = collection;
      groups.push({ rs, statement });
    }
    return groups;
  }

  /** Sends one ack alone, retried as #settle does. */
  async #sendAck(group: AckGroup): Promise<void> {
    let deleted: Row[] | undefined;
    await this.#settle('ack', group.rs.length === 1 ? group.rs[0] : undefined, async () => {
      deleted = (await sendThrough(this.#jobs, group.statement, {})).rows;
      if (deleted === undefined) throw FenecError.unexpected(200, 'an ack answered no rows');
    });
    if (deleted !== undefined) this.#acked(group, deleted);
  }

  /** An ack was answered: a job whose id its answer does not list lost its lease. */
  #acked(group: AckGroup, deleted: Row[]): void {
    const kept = new Set(deleted.map((d) => String(d['id'])));
    for (const r of group.rs) if (!kept.has(String(r.id))) this.#lose(r, 'ack');
  }

  /**
   * Sends a claim, not held, in one `/batch` behind the acks' statements
   * (docs/workers.md, "Claim"); returns the claim's answer. The batch is
   * all or nothing: when an ack is refused, that refusal is reported as a
   * lone ack's would be, the other acks (not refused, but not applied
   * either) are sent alone, and `undefined` is returned (the claim did not
   * run: it is sent again, alone). On any other failure the acks are sent
   * alone, with the usual retries, and the claim's error is thrown. The
   * request is not given up by a stop: it is not held, and the acks it
   * carries are answered before the stop ends.
   */
  async #claimWithAcks(claim: Statement, groups: AckGroup[]): Promise<Result | undefined> {
    let answers: Result[];
    try {
      answers = await this.#batch!([...groups.map((g) => g.statement), claim], { wait: 0 });
    } catch (err) {
      const refused = err instanceof FenecError && err.at !== undefined && err.at < groups.length && !fault(err) ? groups[err.at] : undefined;
      for (const group of groups) if (group !== refused) this.#track(this.#sendAck(group));
      if (refused === undefined) throw err;
      const one = refused.rs.length === 1 ? refused.rs[0] : undefined;
      if (one !== undefined && (err as FenecError).code === 'unmet') this.#lose(one, 'ack', err as FenecError);
      else this.#report('ack', one?.id, err);
      return undefined;
    }
    // Answered: the acks were applied, whatever is wrong with the answer.
    groups.forEach((group, i) => {
      const deleted = answers[i]?.rows;
      if (deleted === undefined) this.#report('ack', group.rs.length === 1 ? group.rs[0]!.id : undefined, FenecError.unexpected(200, 'an ack answered no rows'));
      else this.#acked(group, deleted);
    });
    const answer = answers[groups.length];
    if (answer === undefined || answers.length !== groups.length + 1) throw FenecError.unexpected(200, `${answers.length} answers to a batch of ${groups.length + 1} statements`);
    return answer;
  }

  /**
   * Tells `onError`, or the console when there is no hook; a hook that
   * throws is reported on stderr and the worker goes on (it would
   * otherwise end the loop as an unhandled rejection).
   */
  #report(step: WorkerStep, jobId: unknown, cause: unknown): void {
    const err = new WorkerError(step, jobId, cause);
    if (this.#onError === undefined) {
      const bad = step === 'dead_letter' || step === 'lost_lease' || (step !== 'handler' && step !== 'claim' && step !== 'extend' && !fault(cause));
      (bad ? console.error : console.warn)(`fenec worker ${this.#prefix}: ${err.message}`);
      return;
    }
    try {
      this.#onError(err, step);
    } catch (hookErr) {
      console.error(`fenec worker ${this.#prefix}: the onError hook threw on ${step}: ${String(hookErr)} (reporting: ${err.message})`);
    }
  }

  /** The lease was lost: cancel the handler; nothing more is sent for the job. */
  #lose(r: Running, step: WorkerStep, cause?: FenecError): void {
    if (r.lost) return;
    r.lost = true;
    const err = cause ?? new FenecError(`the ${step} did not find job ${String(r.id)} held by ${r.owner}`, 200, 'unmet');
    r.ctl?.abort(new FenecError(`lease lost: ${err.message}`, err.status, 'unmet', undefined, { cause: err }));
    this.#report('lost_lease', r.id, err);
  }

  /**
   * Sends an ack or a fail until it is answered, refused, or — once the
   * worker is stopping — the grace period is over; answers whether it was
   * answered. A 412 is a lost lease; a refusal that is not a fault is not
   * sent again.
   */
  async #settle(step: WorkerStep, r: Running | undefined, send: () => Promise<unknown>): Promise<boolean> {
    for (let n = 1; ; n++) {
      try {
        await send();
        return true;
      } catch (err) {
        if (r !== undefined && err instanceof FenecError && err.code === 'unmet') {
          this.#lose(r, step, err);
          return false;
        }
        this.#report(step, r?.id, err);
        if (!fault(err) || Date.now() >= this.#graceEnd) return false;
        await this.#pause(backoff(n));
      }
    }
  }

  /** Gives a claimed job back, ready now, its attempt not counted. */
  async #release(id: unknown, owner: string): Promise<void> {
    await this.#mine(id, owner)
      .update({ owner: null, run_at: expr('now()'), attempts: inc(-1) }, { require: 1 })
      .catch((err: unknown) => {
        if (!(err instanceof FenecError && err.code === 'unmet')) this.#report('release', id, err);
      });
  }

  /** Gives back whatever a claim took whose answer never came. */
  async #releaseClaim(owner: string): Promise<void> {
    await this.#jobs.where('owner', owner)
      .update({ owner: null, run_at: expr('now()'), attempts: inc(-1) })
      .catch((err: unknown) => this.#report('release', undefined, err));
  }

  #mine(id: unknown, owner: string): Query<Row> {
    return this.#jobs.where('id', id).where('owner', owner);
  }

  async #drain(): Promise<void> {
    while (this.#tasks > 0 || this.#acks.length > 0) {
      if (this.#acks.length > 0) this.#flushAcks();
      if (this.#tasks > 0) await new Promise<void>((resolve) => (this.#drained = resolve));
    }
  }

  /** Counts a statement in flight (or, from #start, a handler) until it ends: a stop waits for them. */
  #track(p: Promise<void>): void {
    this.#tasks++;
    void p.then(() => this.#untrack(), () => this.#untrack());
  }

  #untrack(): void {
    if (--this.#tasks > 0) return;
    const f = this.#drained;
    this.#drained = undefined;
    f?.();
  }

  /** Sleeps `ms`, or until the worker stops (a claim's backoff holds up no stop). */
  #idle(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const signal = this.#closing.signal;
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, ms);
      signal.addEventListener('abort', done, { once: true });
    });
  }

  /** Sleeps `ms`; once the worker is stopping, no later than the end of the grace period. */
  #pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const until = () => Math.max(0, Math.min(ms, this.#graceEnd - Date.now()));
      const signal = this.#closing.signal;
      const done = () => {
        signal.removeEventListener('abort', onClose);
        resolve();
      };
      const onClose = () => {
        clearTimeout(timer);
        timer = setTimeout(done, until());
      };
      let timer = setTimeout(done, until());
      signal.addEventListener('abort', onClose, { once: true });
    });
  }
}

/**
 * Runs `fn` once what was sent now is written: on Node, a request's bytes
 * are written on the next tick (node:http), so a tick queued after it runs
 * after them; elsewhere (fetch) it runs once the running code is done.
 */
const afterWrites: (fn: () => void) => void = (() => {
  const tick = (globalThis as { process?: { nextTick?: (fn: () => void) => void } }).process?.nextTick;
  return typeof tick === 'function' ? (fn: () => void) => tick(fn) : queueMicrotask;
})();

/**
 * Whether a handler can read the signal it is given: not an arrow function
 * whose parameters are none or one plain name (`async () => …`,
 * `async (job) => …`, `job => …`), which has no `arguments` of its own.
 * Such a handler gets one shared signal that never aborts instead of one
 * of its own, which it could not tell apart: on Node an AbortSignal costs
 * several microseconds to make (more than the rest of a job's start with
 * an empty handler, bench/results/workers.md), and a job's is made for
 * nothing when the handler cannot see it. Anything else (a `function`, a
 * method, a bound function, rest or default parameters) gets its own.
 */
export function takesSignal(handler: Handler<never>): boolean {
  let text: string;
  try {
    text = Function.prototype.toString.call(handler);
  } catch {
    return true;
  }
  return !/^(?:async\s*)?(?:\(\s*(?:[A-Za-z_$][\w$]*\s*)?\)|[A-Za-z_$][\w$]*)\s*=>/.test(text);
}

/** What a handler that cannot read its signal is given (see takesSignal). */
const UNREAD: AbortSignal = new AbortController().signal;

/** The stand-in owner of a claim rendered once (see Worker.#claimOf). */
const OWNER = '\u0000fenec claim owner';

/** The reason a claim is given up when runUntilEmpty() is asked while it is held. */
const UNTIL_EMPTY = new Error('run until empty: the held claim is sent again unheld');

/**
 * Starts a worker on a queue collection (docs/workers.md): it claims jobs
 * from `jobs` and runs `handler` on each, until `close()` — or, with
 * `await w.runUntilEmpty()`, until no job is ready.
 *
 * @example
 * const w = worker(db.from<Job>('jobs'), async (job, signal) => {
 *   await send(job.payload, { signal });
 * }, { concurrency: 8 });
 * process.once('SIGTERM', () => void w.close());
 */
export function worker<T extends object = Row>(jobs: Query<T>, handler: Handler<T>, opts: WorkerOptions = {}): Worker<T> {
  return new Worker<T>(jobs, handler, opts);
}

/** A fault worth retrying: no answer, or the server's 5xx. */
function fault(err: unknown): boolean {
  return err instanceof FenecError && (err.status === 0 || err.status >= 500);
}

/**
 * The `error` text a failed job keeps: the error's message alone or, when
 * that is empty, the name of its type (docs/workers.md, "Ack, fail, dead letter").
 */
export function errorText(err: unknown): string {
  if (err instanceof Error) {
    if (err.message !== '') return err.message;
    const type = err.constructor?.name;
    return type !== undefined && type !== '' ? type : err.name;
  }
  const s = String(err);
  return s !== '' ? s : typeof err;
}

function describe(err: unknown): string {
  return err instanceof Error ? (err.message === '' ? errorText(err) : err.message) : String(err);
}

function whole(what: string, n: number, min: number): number {
  if (!Number.isSafeInteger(n) || n < min) throw new TypeError(`${what} must be a whole number from ${min}, not ${n}`);
  return n;
}
