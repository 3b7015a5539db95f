import type { ErrorCode } from './generated/transport.js';

/**
 * The codes of a {@link FenecError}: the server's (`bad_request` 400,
 * `unauthorized` 401, `forbidden` 403, `not_found` 404, `conflict` 409,
 * `unmet` 412, `too_large` 413, `key_reused` 422, `internal` 500,
 * `unavailable` 503, …) and the client's own: `timeout` (no answer within
 * the timeout plus the wait), `network` (the request could not be sent or
 * its answer read) and `unknown` (a refusal whose body is not a Fenec error,
 * from a proxy, say).
 */
export type FenecErrorCode = ErrorCode | 'timeout' | 'network' | 'unknown';

/** A request Fenec refused, or one that got no answer. */
export class FenecError extends Error {
  override readonly name = 'FenecError';
  /** The HTTP status; 0 when there was no answer (`timeout`, `network`). */
  readonly status: number;
  /** What kind of error it is. */
  readonly code: FenecErrorCode;
  /** In a batch, the 0-based statement that was refused. */
  readonly at: number | undefined;

  constructor(message: string, status: number, code: FenecErrorCode, at?: number, options?: ErrorOptions) {
    super(message, options);
    this.status = status;
    this.code = code;
    this.at = at;
  }

  /** The error a refusal's status and body describe. */
  static fromAnswer(status: number, body: unknown, text: string): FenecError {
    if (typeof body === 'object' && body !== null) {
      const { error, code, at } = body as Record<string, unknown>;
      if (typeof error === 'string' && typeof code === 'string') {
        return new FenecError(error, status, code as ErrorCode, typeof at === 'number' ? at : undefined);
      }
    }
    return new FenecError(text.trim() || `HTTP ${status}`, status, 'unknown');
  }
}
