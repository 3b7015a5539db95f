import { ERROR_CODES, type ErrorCode } from './generated/transport.js';

/**
 * The codes of a {@link FenecError} (docs/sdks.md, "Errors"): the server's,
 * generated from openapi.yaml's `ErrorCode` (`bad_request` 400,
 * `unauthorized` 401, `forbidden` 403, `not_found` 404, `conflict` 409,
 * `unmet` 412, `too_large` 413, `key_reused` 422, `internal` 500,
 * `unavailable` 503, …), and the client's own:
 * - `network`: the request could not be sent or its answer read (the
 *   message names host:port and the cause, such as "connection refused");
 * - `timeout`: no answer within the timeout (plus the wait); the message
 *   says which and how long;
 * - `unexpected`: an answer that is not the API's JSON (a proxy's 502 page,
 *   say); the message holds the status and the start of the body.
 */
export type FenecErrorCode = ErrorCode | 'network' | 'timeout' | 'unexpected';

/** Every code a {@link FenecError} can carry. */
export const FENEC_ERROR_CODES: readonly FenecErrorCode[] = [...ERROR_CODES, 'network', 'timeout', 'unexpected'];

const SERVER_CODES: ReadonlySet<string> = new Set(ERROR_CODES);

/** A request Fenec refused, or one that got no answer, or no answer of Fenec's. */
export class FenecError extends Error {
  override readonly name = 'FenecError';
  /** The HTTP status; 0 when there was no answer (`timeout`, `network`). */
  readonly status: number;
  /** What kind of error it is. */
  readonly code: FenecErrorCode;
  /** In a batch, the 0-based statement that was refused. */
  readonly at: number | undefined;
  /**
   * On a 403 `forbidden` from a cluster node that is not the leader, the
   * leader's URL its `Fenec-Leader` header named; else null
   * (docs/sdks.md, "Several nodes").
   */
  readonly leader: string | null;
  /** The request that failed, as the client sent it: `POST /query`, `POST /batch`, `GET /collections`. */
  method: string | undefined;
  /** The node (host:port) the request was sent to last. */
  node: string | undefined;
  /** The statement sent (a batch's first), cut to 200 characters. */
  statement: string | undefined;
  /** The `Idempotency-Key` the request carried, if any (one the client made for its retries, or the caller's). */
  idempotencyKey: string | undefined;

  constructor(message: string, status: number, code: FenecErrorCode, at?: number, options?: ErrorOptions & { leader?: string | null }) {
    super(message, options);
    this.status = status;
    this.code = code;
    this.at = at;
    this.leader = options?.leader ?? null;
    this.method = undefined;
    this.node = undefined;
    this.statement = undefined;
    this.idempotencyKey = undefined;
  }

  /**
   * Whether the same request sent again may succeed: no answer (`network`,
   * `timeout`), the server's `unavailable` or `internal`, or a proxy's 502,
   * 503 or 504 page. `maxRetries` retries these (a write only under an
   * `Idempotency-Key`, so it never applies twice).
   */
  get retryable(): boolean {
    switch (this.code) {
      case 'network':
      case 'timeout':
      case 'unavailable':
      case 'internal':
        return true;
      case 'unexpected':
        return this.status === 502 || this.status === 503 || this.status === 504;
      default:
        return false;
    }
  }

  /**
   * The error an answer's status and body describe: the server's error when
   * the body is one (`{"error": …, "code": …}` with a code openapi.yaml
   * knows), else `unexpected`, naming the status and the start of the body.
   * `leader` is the answer's `Fenec-Leader` header, kept on a `forbidden`.
   */
  static fromAnswer(status: number, body: unknown, text: string, from = 'the server', leader: string | null = null): FenecError {
    if (typeof body === 'object' && body !== null) {
      const { error, code, at } = body as Record<string, unknown>;
      if (typeof error === 'string' && typeof code === 'string' && SERVER_CODES.has(code)) {
        const named = code === 'forbidden' && leader ? { leader } : undefined;
        return new FenecError(error, status, code as ErrorCode, typeof at === 'number' ? at : undefined, named);
      }
    }
    return FenecError.unexpected(status, text, from);
  }

  /** An answer that is not the API's: the status and the start of the body. */
  static unexpected(status: number, text: string, from = 'the server'): FenecError {
    const start = text.replace(/\s+/g, ' ').trim();
    const shown = start.length > 200 ? `${start.slice(0, 200)}…` : start;
    return new FenecError(`unexpected answer from ${from}: HTTP ${status}${shown ? `: ${shown}` : ', no body'}`, status, 'unexpected');
  }
}
