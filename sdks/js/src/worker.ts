/**
 * The queue worker of docs/workers.md: claim (held with `wait`), run each job
 * with its lease extended, ack or fail with backoff, dead-letter after
 * `maxAttempts`, stop gracefully. Every statement it sends is a `worker …`
 * case of conformance/builder-golden.json.
 */

import { FenecError } from './errors.js';
import type { Query, Row } from './query.js';
import { expr, inc, raw, type Raw } from './values.js';

/** What a worker reports through `onError`: the step that failed. */
export type WorkerStep = 'claim' | 'extend' | 'ack' | 'fail' | 'release';

/** Runs one job; throw (or reject) to fail it. `signal` aborts when the lease is lost or the stop's grace is over. */
export type Handler<T> = (job: T, signal: AbortSignal) => unknown;

/** The options of {@link worker}; every one may be left out or `undefined`. Durations are milliseconds. */
export interface WorkerOptions {
  /** Jobs in flight at once (default 10). */
  concurrency?: number | undefined;
  /** How long a claim, and each extension, holds a job (default 30000). */
  lease?: number | undefined;
  /** How long the server holds a claim while no job is ready (default 30000, at most 30000). */
  wait?: number | undefined;
  /** A job whose handler fails on this run becomes a dead letter (default 5). */
  maxAttempts?: number | undefined;
  /** The delay before a failed job runs again, from its attempts (default: exponential from 1 s, capped at 1 h, full jitter). */
  backoff?: ((attempts: number) => number) | undefined;
  /** An extra claim condition: `raw('queue = ?', 'mail')`. */
  where?: Raw | undefined;
  /** The owner prefix (default `w-<random>`); each claim's owner is `<prefix>:<n>`. */
  owner?: string | undefined;
  /** On close, how long running handlers may take before they are cancelled (default 30000). */
  grace?: number | undefined;
  /** Where faults and lost leases are reported (default: a line on stderr). */
  onError?: ((err: unknown, step: WorkerStep) => void) | undefined;
}

/** The default backoff: a random delay from 0 to min(1 h, 1 s × 2^(n − 1)). */
export function backoff(n: number): number {
  return Math.random() * Math.min(3_600_000, 1000 * 2 ** Math.max(0, n - 1));
}

interface Running {
  readonly ctl: AbortController;
  /** The lease was lost: nothing more is sent for the job. */
  lost: boolean;
  /** Cancelled by close() after the grace: released, nothing else sent. */
  stopped: boolean;
}

/**
 * A running worker: made by {@link worker}, it claims and runs jobs until
 * {@link Worker.close} is called.
 */
export class Worker<T extends object = Row> {
  /** The collection, untyped: the worker names the queue's fields, which a row type may not list. */
  readonly #jobs: Query<Row>;
  readonly #claim: Query<Row>;
  readonly #handler: Handler<T>;
  readonly #concurrency: number;
  readonly #lease: number;
  readonly #wait: number;
  readonly #maxAttempts: number;
  readonly #backoff: (attempts: number) => number;
  readonly #grace: number;
  readonly #onError: (err: unknown, step: WorkerStep) => void;
  readonly #prefix: string;
  #claims = 0;
  readonly #running = new Map<string, Running>();
  readonly #tasks = new Set<Promise<void>>();
  readonly #closing = new AbortController();
  #graceEnd = Infinity;
  #slotFreed: (() => void) | undefined;
  readonly #loop: Promise<void>;
  #closed: Promise<void> | undefined;

  /** Use {@link worker}. */
  constructor(jobs: Query<T>, handler: Handler<T>, opts: WorkerOptions = {}) {
    this.#jobs = jobs as unknown as Query<Row>;
    this.#handler = handler;
    this.#concurrency = whole('concurrency', opts.concurrency ?? 10, 1);
    this.#lease = whole('lease', opts.lease ?? 30_000, 2);
    this.#wait = whole('wait', opts.wait ?? 30_000, 0);
    if (this.#wait > 30_000) throw new TypeError(`wait must be at most 30000 milliseconds, not ${this.#wait}`);
    this.#maxAttempts = whole('maxAttempts', opts.maxAttempts ?? 5, 1);
    this.#backoff = opts.backoff ?? backoff;
    this.#grace = whole('grace', opts.grace ?? 30_000, 0);
    this.#onError = opts.onError ?? ((err, step) => console.error(`fenec worker ${this.#prefix}: ${step}: ${String(err)}`));
    this.#prefix = opts.owner ?? `w-${crypto.randomUUID().slice(0, 8)}`;
    let claim = this.#jobs.where(raw('run_at <= now()'));
    if (opts.where !== undefined) claim = claim.where(opts.where);
    this.#claim = claim.order('run_at');
    this.#loop = this.#run();
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
   * the grace period and are then cancelled and their jobs released.
   * Resolves once every job is acked, failed, released or given up.
   */
  close(): Promise<void> {
    this.#closed ??= (async () => {
      this.#graceEnd = Date.now() + this.#grace;
      this.#closing.abort();
      this.#slotFreed?.();
      let timer: ReturnType<typeof setTimeout> | undefined;
      const graceOver = new Promise<void>((resolve) => {
        timer = setTimeout(() => {
          const releases: Promise<void>[] = [];
          for (const [key, r] of this.#running) {
            if (r.lost || r.stopped) continue;
            r.stopped = true;
            r.ctl.abort(new Error('the worker stopped and its grace period is over'));
            const [id, owner] = JSON.parse(key) as [unknown, string];
            releases.push(this.#release(id, owner));
          }
          void Promise.all(releases).then(() => resolve());
        }, this.#grace);
      });
      await this.#loop;
      // Every job settled — or, once the grace is over, released (a handler that ignores its signal is not waited for).
      await Promise.race([this.#drain(), graceOver]);
      clearTimeout(timer);
    })();
    return this.#closed;
  }

  async #run(): Promise<void> {
    let faults = 0;
    while (!this.#closing.signal.aborted) {
      const free = this.#concurrency - this.#running.size;
      if (free <= 0) {
        await new Promise<void>((resolve) => (this.#slotFreed = resolve));
        // Jobs that end together free their slots within a turn: one claim takes them all.
        await new Promise((resolve) => setTimeout(resolve, 0));
        continue;
      }
      const owner = `${this.#prefix}:${++this.#claims}`;
      const patch = { owner, run_at: expr('now() + ?', this.#lease), attempts: inc(1) };
      let rows: T[];
      try {
        const claimed = await this.#claim.limit(free).update(patch, { returning: true, wait: this.#wait, signal: this.#closing.signal });
        rows = claimed as T[];
        faults = 0;
      } catch (err) {
        // The server may have taken jobs for a claim whose answer was lost or given up: give them back.
        const abandoned = this.#releaseClaim(owner);
        if (this.#closing.signal.aborted) {
          await abandoned;
          return;
        }
        this.#report(err, 'claim');
        await abandoned;
        await this.#pause(backoff(++faults));
        continue;
      }
      for (const row of rows) {
        if (this.#closing.signal.aborted) this.#track(this.#release((row as Row)['id'], owner));
        else this.#start(row, owner);
      }
    }
  }

  #start(row: T, owner: string): void {
    const id = (row as Row)['id'];
    const key = JSON.stringify([typeof id === 'bigint' ? String(id) : id, owner]);
    const r: Running = { ctl: new AbortController(), lost: false, stopped: false };
    this.#running.set(key, r);
    let extending = false;
    const tick = setInterval(() => {
      if (extending || r.lost || r.stopped) return;
      extending = true;
      this.#extend(id, owner, r).finally(() => (extending = false));
    }, this.#lease / 2);
    this.#track((async () => {
      let failure: { error: unknown } | undefined;
      try {
        await this.#handler(row, r.ctl.signal);
      } catch (error) {
        failure = { error };
      }
      clearInterval(tick);
      try {
        if (r.lost || r.stopped) return;
        if (failure === undefined) {
          await this.#settle('ack', () => this.#mine(id, owner).delete({ require: 1 }), r);
          return;
        }
        const text = failure.error instanceof Error ? failure.error.message : String(failure.error);
        const attempts = Number((row as Row)['attempts']);
        const patch = attempts >= this.#maxAttempts
          ? { owner: null, error: text, run_at: null }
          : { owner: null, error: text, run_at: expr('now() + ?', Math.round(this.#backoff(attempts))) };
        await this.#settle('fail', () => this.#mine(id, owner).update(patch, { require: 1 }), r);
      } finally {
        this.#running.delete(key);
        this.#slotFreed?.();
      }
    })());
  }

  async #extend(id: unknown, owner: string, r: Running): Promise<void> {
    try {
      await this.#mine(id, owner).update({ run_at: expr('now() + ?', this.#lease) }, { require: 1 });
    } catch (err) {
      if (err instanceof FenecError && err.code === 'unmet') this.#lose(r, err, 'extend');
      else this.#report(err, 'extend');
    }
  }

  /**
   * Tells `onError`; a hook that throws is reported on stderr and the
   * worker goes on (it would otherwise end the loop as an unhandled rejection).
   */
  #report(err: unknown, step: WorkerStep): void {
    try {
      this.#onError(err, step);
    } catch (hookErr) {
      console.error(`fenec worker ${this.#prefix}: the onError hook threw on ${step}: ${String(hookErr)} (reporting: ${String(err)})`);
    }
  }

  /** The lease was lost: cancel the handler; nothing more is sent for the job. */
  #lose(r: Running, err: FenecError, step: WorkerStep): void {
    if (r.lost) return;
    r.lost = true;
    r.ctl.abort(new FenecError(`lease lost: ${err.message}`, err.status, 'unmet', undefined, { cause: err }));
    this.#report(err, step);
  }

  /**
   * Sends an ack or a fail until it is answered, refused, or — once the
   * worker is stopping — the grace period is over. A 412 is a lost lease.
   */
  async #settle(step: WorkerStep, send: () => Promise<unknown>, r: Running): Promise<void> {
    for (let n = 1; ; n++) {
      try {
        await send();
        return;
      } catch (err) {
        if (err instanceof FenecError && err.code === 'unmet') return this.#lose(r, err, step);
        this.#report(err, step);
        if (!fault(err) || Date.now() >= this.#graceEnd) return;
        await this.#pause(backoff(n));
      }
    }
  }

  /** Gives a claimed job back, ready now, its attempt not counted. */
  async #release(id: unknown, owner: string): Promise<void> {
    await this.#mine(id, owner)
      .update({ owner: null, run_at: expr('now()'), attempts: inc(-1) }, { require: 1 })
      .catch((err: unknown) => {
        if (!(err instanceof FenecError && err.code === 'unmet')) this.#report(err, 'release');
      });
  }

  /** Gives back whatever a claim took whose answer never came. */
  async #releaseClaim(owner: string): Promise<void> {
    await this.#jobs.where('owner', owner)
      .update({ owner: null, run_at: expr('now()'), attempts: inc(-1) })
      .catch((err: unknown) => this.#report(err, 'release'));
  }

  #mine(id: unknown, owner: string): Query<Row> {
    return this.#jobs.where('id', id).where('owner', owner);
  }

  async #drain(): Promise<void> {
    while (this.#tasks.size > 0) await Promise.all(this.#tasks);
  }

  #track(p: Promise<void>): void {
    this.#tasks.add(p);
    void p.finally(() => this.#tasks.delete(p));
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
 * Starts a worker on a queue collection (docs/workers.md): it claims jobs
 * from `jobs` and runs `handler` on each, until `close()`.
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

function whole(what: string, n: number, min: number): number {
  if (!Number.isSafeInteger(n) || n < min) throw new TypeError(`${what} must be a whole number from ${min}, not ${n}`);
  return n;
}
