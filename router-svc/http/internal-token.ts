/**
 * `X-Internal-Token` on internal endpoints (routing.md "HTTP API"): required when
 * `--internal_api_token` is set. Both sides are hashed to 32 bytes first, so `timingSafeEqual`
 * compares equal lengths and the time taken says nothing about the token. The token is never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';

export const INTERNAL_TOKEN_HEADER = 'x-internal-token';

export class InternalTokenCheck {
  private readonly digest: Buffer | null;

  /** `token` '' = no token required. */
  constructor(token: string) {
    this.digest = token === '' ? null : sha256(token);
  }

  get required(): boolean {
    return this.digest !== null;
  }

  /** `sent` is the header value (undefined when absent). */
  accepts(sent: string | readonly string[] | undefined): boolean {
    if (this.digest === null) return true;
    if (typeof sent !== 'string' || sent === '') return false;
    return timingSafeEqual(sha256(sent), this.digest);
  }
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
