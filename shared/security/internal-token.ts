/**
 * The one `X-Internal-Token` check of both services (discovery.md "Heartbeats", routing.md
 * "HTTP API", and the directory's gRPC metadata): required when `--internal_api_token` is set.
 * Both sides are hashed to 32 bytes first, so `timingSafeEqual` always compares equal lengths and
 * the time taken says nothing about the token, not even its length. The token is never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

/** The HTTP header and the gRPC metadata key (both lowercase on the wire). */
export const INTERNAL_TOKEN_HEADER = 'x-internal-token';

/** The answer every internal endpoint gives a missing or wrong token (401 / UNAUTHENTICATED). */
export const INVALID_TOKEN_MESSAGE = 'invalid internal token';

export class InternalTokenCheck {
  private readonly digest: Buffer | null;

  /** `token` '' = no token required. */
  constructor(token: string) {
    this.digest = token === '' ? null : sha256(token);
  }

  get required(): boolean {
    return this.digest !== null;
  }

  /**
   * `sent` is the header or metadata value: undefined when absent; an array (a repeated header)
   * is refused, as is ''.
   */
  accepts(sent: string | readonly string[] | undefined): boolean {
    if (this.digest === null) return true;
    if (typeof sent !== 'string' || sent === '') return false;
    return timingSafeEqual(sha256(sent), this.digest);
  }
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
