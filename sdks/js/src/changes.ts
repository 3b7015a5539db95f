/**
 * The change stream's consumer (docs/changes.md, "The change stream"):
 * every committed write in commit order, read in batches under a name and
 * acknowledged, so each is handled at least once.
 *
 *     const mailer = db.consumer('mailer', { collection: 'messages' });
 *     for await (const batch of mailer.batches({ signal })) {
 *       for (const c of batch.changes) await send(c);
 *     } // each batch is acknowledged when the next is asked for
 */

import { FenecError } from './errors.js';
import type { LiveTarget } from './live.js';

/** One committed write: a `put` (insert or update, with the row as written) or a `delete`. */
export interface Change {
  position: number;
  collection: string;
  op: 'put' | 'delete';
  id: number;
  row?: Record<string, unknown>;
}

/** A read's answer: the changes after `position`, and `next`, the position to acknowledge once they are handled. */
export interface ChangeBatch {
  consumer: string;
  position: number;
  next: number;
  changes: Change[];
}

/** How a consumer reads. */
export interface ReadOptions {
  /** At most this many changes (1–1000; the server's default 100). */
  limit?: number | undefined;
  /** Milliseconds the server holds a read while there is none (0–30000). */
  wait?: number | undefined;
  signal?: AbortSignal | undefined;
}

/** A named consumer of the change stream, on one collection or on all. */
export class Consumer {
  readonly #target: LiveTarget;
  readonly name: string;
  readonly collection: string | undefined;

  /** Made by `db.consumer(name)`. */
  constructor(target: LiveTarget, name: string, opts: { collection?: string | undefined } = {}) {
    this.#target = target;
    this.name = name;
    this.collection = opts.collection;
  }

  /**
   * Reads the changes after the consumer's acknowledged position. A read
   * moves nothing: read again without {@link ack}, the same changes come
   * back. Rejects with `consumer_busy` (409) while another read under the
   * name runs, and `changes_gone` (410) when the position is older than
   * the oldest change the server keeps.
   */
  async read(opts: ReadOptions = {}): Promise<ChangeBatch> {
    const q = new URLSearchParams({ consumer: this.name });
    if (this.collection !== undefined) q.set('collection', this.collection);
    if (opts.limit !== undefined) q.set('limit', String(opts.limit));
    if (opts.wait !== undefined) q.set('wait', String(opts.wait));
    return (await this.#call('GET', `/_changes?${q}`, undefined, opts.signal)) as ChangeBatch;
  }

  /** Moves the consumer's position to `position` (a batch's `next`): durable once this resolves. */
  async ack(position: number, opts: { signal?: AbortSignal | undefined } = {}): Promise<void> {
    await this.#call('POST', '/_changes/ack', JSON.stringify({ consumer: this.name, position }), opts.signal);
  }

  /**
   * Reads batch after batch, each held up to `wait` ms (default 5000)
   * while there is none; a batch is acknowledged when the next one is
   * asked for, so a loop that throws, or a process that dies, reads it
   * again. Empty batches are not yielded. Leaving the loop acknowledges
   * nothing more.
   */
  async *batches(opts: ReadOptions = {}): AsyncGenerator<ChangeBatch, void, undefined> {
    const read = { ...opts, wait: opts.wait ?? 5000 };
    for (;;) {
      const batch = await this.read(read);
      if (batch.changes.length === 0) continue;
      yield batch;
      await this.ack(batch.next, { signal: opts.signal });
    }
  }

  async #call(method: string, path: string, body: string | undefined, signal: AbortSignal | undefined): Promise<unknown> {
    const send = this.#target.fetch ?? globalThis.fetch.bind(globalThis);
    const url = this.#target.url.replace(/\/+$/, '') + path;
    const host = new URL(url).host;
    const headers: Record<string, string> = {};
    if (this.#target.token) headers['Authorization'] = `Bearer ${this.#target.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    let resp: Response;
    let text: string;
    try {
      resp = await send(url, { method, headers, signal: signal ?? null, ...(body !== undefined ? { body } : {}) });
      text = await resp.text();
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      throw new FenecError(`network: cannot reach ${host}: ${err instanceof Error ? err.message : String(err)}`, 0, 'network', undefined, { cause: err });
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {
      parsed = undefined;
    }
    if (!resp.ok) throw FenecError.fromAnswer(resp.status, parsed, text, host, resp.headers.get('Fenec-Leader'));
    if (parsed === undefined) throw FenecError.unexpected(resp.status, text, host);
    return parsed;
  }
}
