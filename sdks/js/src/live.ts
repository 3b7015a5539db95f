/**
 * Live queries (docs/changes.md): a `get` kept up to date over Server-Sent
 * Events, read as an async iterator that reconnects where it left off.
 *
 *     for await (const ev of db.from('jobs').where('owner', 'w1').watch({ signal })) {
 *       if (ev.name === 'insert') …
 *     }
 *
 * Each event is one the server sent: `rows`/`reset` (`data.rows`),
 * `insert`/`update` (`data.row`), `delete` (`data.id`), `gap` and
 * `closing`. A dropped connection, a `closing` the server sent (shutting
 * down, or the client fell behind), or an answer that may succeed later
 * (`FenecError.retryable`: a server shutting down answers 503) is followed
 * by a reconnect with
 * `Last-Event-ID`, so no change is missed: the server sends nothing again,
 * or a `reset` with the rows as they are now.
 *
 * It reads the stream with fetch rather than EventSource: EventSource sends
 * no Authorization header, and a token in the URL would end up in logs.
 */

import { FenecError } from './errors.js';

/** The names of a live query's events (docs/changes.md, "Live queries"). */
export type LiveEventName = 'rows' | 'insert' | 'update' | 'delete' | 'reset' | 'gap' | 'closing';

/** One event of a live query: its name, the commit position it carries (the SSE `id:`), and its data. */
export interface LiveEvent {
  name: LiveEventName;
  position: number;
  data: Record<string, unknown>;
}

/** How a live query is followed. */
export interface WatchOptions {
  /** Stops it: the iterator rejects with the signal's reason. Leaving a `for await` stops it too. */
  signal?: AbortSignal | undefined;
  /** Resumes after this position (sent as `Last-Event-ID` on the first request). */
  lastEventId?: number | undefined;
  /** Failed reconnects in a row before the iterator rejects with a `network` FenecError (default 10). */
  retries?: number | undefined;
  /** Milliseconds between failed reconnects (default 500). */
  retryDelay?: number | undefined;
}

/** Where a live query is asked: one node's URL, the token, and the fetch to use. */
export interface LiveTarget {
  url: string;
  token?: string | undefined;
  fetch?: typeof fetch | undefined;
}

/** The request of a live query: `POST /query` with a statement, or `GET /<collection>/changes`. */
type LiveRequest = { method: 'POST'; path: string; body: string } | { method: 'GET'; path: string };

/**
 * Runs `query` (one `get` with `where` and `select` only) as a live query
 * through `POST /query`, yielding its events until stopped. A refusal (400
 * for a query that cannot be live, 401, 403, 404) rejects at once with the
 * server's FenecError.
 */
export function watch(target: LiveTarget, query: string, params: readonly unknown[] = [], opts: WatchOptions = {}): AsyncGenerator<LiveEvent, void, undefined> {
  return follow(target, { method: 'POST', path: '/query', body: JSON.stringify({ query, params }) }, opts);
}

/**
 * Follows `GET /<collection>/changes?where=…&select=…`: the same live query,
 * its condition FenecQL text (no `where`: every row; no `select`: every field).
 */
export function watchCollection(
  target: LiveTarget,
  collection: string,
  q: { where?: string | undefined; select?: string | undefined } = {},
  opts: WatchOptions = {},
): AsyncGenerator<LiveEvent, void, undefined> {
  const search = new URLSearchParams();
  if (q.where) search.set('where', q.where);
  if (q.select) search.set('select', q.select);
  const s = search.toString();
  return follow(target, { method: 'GET', path: `/${encodeURIComponent(collection)}/changes${s ? `?${s}` : ''}` }, opts);
}

async function* follow(target: LiveTarget, req: LiveRequest, opts: WatchOptions): AsyncGenerator<LiveEvent, void, undefined> {
  const send = target.fetch ?? globalThis.fetch.bind(globalThis);
  const retries = opts.retries ?? 10;
  const delay = opts.retryDelay ?? 500;
  const url = target.url.replace(/\/+$/, '') + req.path;
  let last = opts.lastEventId;
  let failures = 0;
  // Aborted when the caller leaves the loop, so the connection is closed.
  const own = new AbortController();
  const signal = opts.signal ? AbortSignal.any([opts.signal, own.signal]) : own.signal;
  try {
    for (;;) {
      const headers: Record<string, string> = { Accept: 'text/event-stream' };
      if (target.token) headers['Authorization'] = `Bearer ${target.token}`;
      if (req.method === 'POST') headers['Content-Type'] = 'application/json';
      if (last !== undefined) headers['Last-Event-ID'] = String(last);
      let failed: unknown;
      try {
        const resp = await send(url, { method: req.method, headers, signal, ...(req.method === 'POST' ? { body: req.body } : {}) });
        if (resp.status !== 200) {
          const text = await resp.text();
          let body: unknown;
          try {
            body = JSON.parse(text);
          } catch {
            body = undefined;
          }
          throw FenecError.fromAnswer(resp.status, body, text, new URL(url).host, resp.headers.get('Fenec-Leader'));
        }
        failures = 0;
        if (resp.body === null) throw new Error('the answer has no body');
        for await (const ev of events(resp.body)) {
          if (ev.position > 0) last = ev.position;
          yield ev;
        }
      } catch (err) {
        // A refusal is final; a server that cannot answer now (shutting
        // down, no leader yet, a proxy's 503) is tried again like a
        // dropped connection, within the same retries.
        if (err instanceof FenecError && !err.retryable) throw err;
        if (opts.signal?.aborted) throw opts.signal.reason;
        if (own.signal.aborted) return;
        failed = err;
      }
      if (failed !== undefined) {
        failures++;
        if (failures > retries) {
          if (failed instanceof FenecError) throw failed;
          throw new FenecError(`network: the live query at ${new URL(url).host} could not reconnect: ${reason(failed)}`, 0, 'network', undefined, { cause: failed });
        }
        await pause(delay, signal);
        if (opts.signal?.aborted) throw opts.signal.reason;
      }
    }
  } finally {
    own.abort();
  }
}

/** Parses a text/event-stream into events; comments (`: heartbeat`, `: resumed`) are skipped. */
async function* events(body: ReadableStream<Uint8Array>): AsyncGenerator<LiveEvent, void, undefined> {
  const reader = body.pipeThrough(new TextDecoderStream() as unknown as ReadableWritablePair<string, Uint8Array>).getReader();
  let buf = '';
  let name = '';
  let id = '';
  let data: string[] = [];
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buf += value;
      let nl: number;
      while ((nl = buf.search(/\r\n|\n|\r/)) >= 0) {
        // A lone \r at the end may be the first half of \r\n: wait for more.
        if (buf[nl] === '\r' && nl === buf.length - 1) break;
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + (buf.startsWith('\r\n', nl) ? 2 : 1));
        if (line === '') {
          if (name !== '') yield { name: name as LiveEventName, position: Number(id || 0), data: data.length ? (JSON.parse(data.join('\n')) as Record<string, unknown>) : {} };
          name = '';
          id = '';
          data = [];
          continue;
        }
        if (line.startsWith(':')) continue;
        const colon = line.indexOf(':');
        const key = colon < 0 ? line : line.slice(0, colon);
        let value = colon < 0 ? '' : line.slice(colon + 1);
        if (value.startsWith(' ')) value = value.slice(1);
        if (key === 'event') name = value;
        else if (key === 'id') id = value;
        else if (key === 'data') data.push(value);
      }
    }
  } finally {
    await reader.cancel().catch(() => undefined);
  }
}

function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(done, ms);
    function done(): void {
      clearTimeout(t);
      signal.removeEventListener('abort', done);
      resolve();
    }
    signal.addEventListener('abort', done, { once: true });
  });
}

function reason(err: unknown): string {
  if (err instanceof Error) {
    const c = (err as { cause?: unknown }).cause;
    return c instanceof Error ? `${err.message} (${c.message})` : err.message;
  }
  return String(err);
}
