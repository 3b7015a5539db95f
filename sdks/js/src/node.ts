/**
 * On Node, the client's statements go over `node:http` / `node:https`
 * with keep-alive agents rather than the global fetch: Node's fetch
 * (undici, with web streams, a Request, a Response and Headers per call)
 * costs several times the CPU of a plain request, which a worker making
 * thousands of requests a second pays in full (bench/results/workers.md).
 * The modules are reached through `process.getBuiltinModule`, so a bundler
 * for the browser sees no import, and the browser keeps fetch.
 *
 * What it returns is a fetch for the generated transport alone: it sends
 * a string body and reads the whole answer as text before it resolves;
 * live queries and the change stream, which read a stream, keep fetch.
 */

/** The little of `node:http`'s request this file uses. */
interface OutgoingRequest {
  /** Whether the request went over a kept-alive connection used before. */
  readonly reusedSocket?: boolean;
  on(event: 'error', fn: (err: Error) => void): unknown;
  destroy(err?: Error): unknown;
  end(body?: string): unknown;
}

/** The little of `node:http`'s IncomingMessage this file uses. */
interface IncomingAnswer {
  readonly statusCode?: number;
  readonly headers: Record<string, string | string[] | undefined>;
  on(event: 'data', fn: (chunk: Uint8Array) => void): unknown;
  on(event: 'end', fn: () => void): unknown;
  on(event: 'error' | 'aborted', fn: (err?: Error) => void): unknown;
}

interface HttpModule {
  Agent: new (opts: { keepAlive: boolean }) => object;
  request(opts: Omit<Target, 'host'> & { method: string; headers: (string | number)[]; agent: object }, answered: (res: IncomingAnswer) => void): OutgoingRequest;
}

/** Where a request goes, as node:http takes it (the URL parsed once per URL: see #targets). */
interface Target {
  protocol: string;
  hostname: string;
  port: string;
  path: string;
  /** The Host header: the URL's host (its port unless the scheme's default, an IPv6 address in brackets). */
  host: string;
}

interface Runtime {
  process?: { getBuiltinModule?: (id: string) => unknown; versions?: { node?: string; bun?: string } };
  Deno?: unknown;
  Bun?: unknown;
  Buffer?: { byteLength(s: string): number; concat(chunks: Uint8Array[]): Uint8Array };
}

/**
 * A fetch over `node:http(s)` that sends `headers` (a list of name and
 * value, lower case) on every request under each request's own, or
 * undefined when this is not Node (a browser, Deno, Bun) or its modules
 * cannot be had.
 */
export function nodeFetch(headers: ReadonlyArray<readonly [string, string]>): typeof fetch | undefined {
  const g = globalThis as Runtime;
  const get = g.process?.getBuiltinModule;
  if (typeof get !== 'function' || g.process?.versions?.node === undefined || g.Deno !== undefined || g.Bun !== undefined || g.Buffer === undefined) return undefined;
  const bytes = g.Buffer;
  let http: HttpModule;
  try {
    http = get('node:http') as HttpModule;
  } catch {
    return undefined;
  }
  if (typeof http?.request !== 'function') return undefined;
  // Kept by the client: its connections are reused from one request to the next.
  const agent = new http.Agent({ keepAlive: true });
  // node:https (and with it tls and crypto, slow to load) only once an https URL is asked.
  let secured: { https: HttpModule; agent: object } | undefined;
  const tls = () => {
    if (secured === undefined) {
      const https = get('node:https') as HttpModule;
      secured = { https, agent: new https.Agent({ keepAlive: true }) };
    }
    return secured;
  };
  const decoder = new TextDecoder();
  const targets = new Map<string, Target>();
  const send = (input: RequestInfo | URL, init: RequestInit = {}): Promise<Response> => {
    const url = String(input);
    let target = targets.get(url);
    if (target === undefined) {
      const u = new URL(url);
      // A client sends to a few URLs (its nodes' routes): kept, so each request skips parsing one.
      target = { protocol: u.protocol, hostname: u.hostname.replace(/^\[(.*)\]$/, '$1'), port: u.port, path: u.pathname + u.search, host: u.host };
      if (targets.size < 64) targets.set(url, target);
    }
    const secure = target.protocol === 'https:';
    const body = typeof init.body === 'string' ? init.body : undefined;
    if (init.body != null && body === undefined) return Promise.reject(new TypeError('node transport: only a string body is sent'));
    // The headers as node:http's flat list of names and values: it writes
    // them as they are (still checked), where an object costs a setHeader
    // each. The request's own come first and win over the client's; Host
    // and Content-Length are this transport's.
    const head: (string | number)[] = [];
    const own = init.headers;
    if (own !== undefined) {
      // The transport gives a plain object; anything else (a Headers, a list of pairs) is read as fetch reads it.
      if (Array.isArray(own) || typeof (own as { entries?: unknown }).entries === 'function') for (const [k, v] of new Headers(own)) put(head, k, v, 0);
      else for (const k in own) put(head, k.toLowerCase(), (own as Record<string, string>)[k]!, 0);
    }
    const mine = head.length;
    for (const [k, v] of headers) put(head, k, v, mine);
    if (!has(head, 'host', head.length)) head.push('host', target.host);
    if (body !== undefined) head.push('content-length', bytes.byteLength(body));
    const signal = init.signal ?? undefined;
    return new Promise<Response>((resolve, reject) => {
      if (signal?.aborted) return reject(signal.reason);
      let req: OutgoingRequest | undefined;
      const onAbort = () => {
        req?.destroy();
        reject(signal!.reason);
      };
      const done = () => signal?.removeEventListener('abort', onAbort);
      const fail = (err: unknown) => {
        done();
        reject(err);
      };
      // A kept-alive connection the server closed while it lay idle (or a
      // node that died: its connections reset) fails the request sent on
      // it before any answer: the server read none of it. Sent again once,
      // on a new connection, as browsers do; that one meets the real state
      // (a dead node refuses it, and the client turns to another node).
      const issue = (again: boolean): boolean => {
        let answered = false;
        let sent: OutgoingRequest;
        try {
          const via = secure ? tls() : { https: http, agent };
          const t = target!;
          sent = via.https.request({ protocol: t.protocol, hostname: t.hostname, port: t.port, path: t.path, method: init.method ?? 'GET', headers: head, agent: via.agent }, (res) => {
            answered = true;
            const chunks: Uint8Array[] = [];
            res.on('data', (chunk) => chunks.push(chunk));
            res.on('error', fail);
            res.on('aborted', () => fail(Object.assign(new Error('the connection closed before the answer ended'), { code: 'ECONNRESET' })));
            res.on('end', () => {
              done();
              resolve(answer(res.statusCode ?? 0, res.headers, decoder.decode(chunks.length === 1 ? chunks[0] : bytes.concat(chunks))));
            });
          });
        } catch (err) {
          // A header value fetch would refuse too (a new line in a token): thrown as fetch throws it.
          fail(new TypeError(err instanceof Error ? err.message : String(err), { cause: err }));
          return false;
        }
        req = sent;
        sent.on('error', (err) => {
          const code = (err as { code?: unknown }).code;
          if (!again && !answered && sent.reusedSocket === true && (code === 'ECONNRESET' || code === 'EPIPE') && !signal?.aborted) {
            if (issue(true)) req!.end(body);
            return;
          }
          fail(err);
        });
        return true;
      };
      if (!issue(false)) return;
      signal?.addEventListener('abort', onAbort, { once: true });
      req!.end(body);
    });
  };
  return send as typeof fetch;
}

/**
 * Adds a header to a flat list of names and values (names in lower case)
 * unless it names the transport's own (`content-length`) or one already
 * among the first `upTo` entries: a request's own header wins over the
 * client's.
 */
function put(head: (string | number)[], name: string, value: string, upTo: number): void {
  if (name === 'content-length' || has(head, name, upTo)) return;
  head.push(name, value);
}

function has(head: (string | number)[], name: string, upTo: number): boolean {
  for (let i = 0; i < upTo; i += 2) if (head[i] === name) return true;
  return false;
}

/** The little of a Response the transport reads: status, headers, text. */
function answer(status: number, headers: Record<string, string | string[] | undefined>, text: string): Response {
  return { ok: status >= 200 && status < 300, status, headers: new AnswerHeaders(headers), text: () => Promise.resolve(text) } as unknown as Response;
}

/**
 * An answer's headers, read as a Headers is (`get`, `has`, iteration) from
 * node's object of them (names in lower case): Node's own Headers class
 * loads undici, whose start alone costs more than many requests.
 */
class AnswerHeaders {
  readonly #h: Record<string, string | string[] | undefined>;
  constructor(h: Record<string, string | string[] | undefined>) {
    this.#h = h;
  }

  get(name: string): string | null {
    const v = this.#h[name.toLowerCase()];
    return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
  }

  has(name: string): boolean {
    return this.#h[name.toLowerCase()] !== undefined;
  }

  *entries(): IterableIterator<[string, string]> {
    for (const k of Object.keys(this.#h).sort()) {
      const v = this.get(k);
      if (v !== null) yield [k, v];
    }
  }

  [Symbol.iterator](): IterableIterator<[string, string]> {
    return this.entries();
  }

  forEach(fn: (value: string, name: string) => void): void {
    for (const [k, v] of this.entries()) fn(v, k);
  }
}
