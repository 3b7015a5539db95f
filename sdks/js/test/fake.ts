/** A fetch that records what it is sent and answers what a test says. */

export interface Sent {
  url: string;
  method: string;
  headers: Record<string, string>;
  body: unknown;
}

/** Answers a request; may wait on its signal. */
export type Answerer = (req: Sent, signal: AbortSignal | undefined) => Response | Promise<Response>;

/**
 * A fetch over `answer`, and the requests it was sent. `GET /collections`
 * (which the client sends before a statement that answers rows, for the
 * field types) is answered `schema` and not recorded.
 */
export function fakeFetch(answer: Answerer, schema: unknown = { collections: [] }): { fetch: typeof fetch; sent: Sent[] } {
  const sent: Sent[] = [];
  const fetcher = async (input: string | URL | Request, init: RequestInit = {}): Promise<Response> => {
    if (String(input).endsWith('/collections')) return json(200, schema);
    const req: Sent = {
      url: String(input),
      method: init.method ?? 'GET',
      headers: Object.fromEntries(new Headers(init.headers).entries()),
      body: typeof init.body === 'string' ? JSON.parse(init.body) : undefined,
    };
    sent.push(req);
    init.signal?.throwIfAborted();
    return answer(req, init.signal ?? undefined);
  };
  return { fetch: fetcher, sent };
}

/** A JSON response. */
export function json(status: number, body: unknown, headers: Record<string, string> = {}): Response {
  return new Response(JSON.stringify(body), { status, headers: { 'Content-Type': 'application/json', ...headers } });
}

/**
 * An answer that never comes: fetch rejects as fetch does when the request is
 * given up. The timer holds the process up as a real connection would.
 */
export function never(_req: Sent, signal: AbortSignal | undefined): Promise<Response> {
  return new Promise((_, reject) => {
    const open = setInterval(() => {}, 60_000);
    signal?.addEventListener('abort', () => {
      clearInterval(open);
      reject(signal.reason);
    }, { once: true });
  });
}
