/**
 * Capped exponential backoff with jitter for recoveries (kv-events §7.4). Pure: time is passed
 * in (`nowMs`) and randomness injected, so tests set both.
 *
 *   n = consecutive failures (aborted recoveries, and losses of synchronization within 10 s of
 *       last entering SYNCHRONIZED); reset after 10 s of continuous SYNCHRONIZED
 *   delay = 0 when n = 0, else uniform in [d/2, d], d = min(10000, 100 · 2^(n−1)) ms
 */
export const BACKOFF_BASE_MS = 100;
export const BACKOFF_MAX_MS = 10_000;
/** §7.4: a loss this long after entering SYNCHRONIZED no longer counts, and n starts over. */
export const BACKOFF_STABLE_MS = 10_000;

/** §7.4 delay before recovery number n+1; `random` returns [0, 1). */
export function backoffDelayMs(failures: number, random: () => number): number {
  if (failures <= 0) return 0;
  // 2^(n−1) passes the cap at n = 8; clamp the exponent so it never overflows.
  const exp = Math.min(failures - 1, 30);
  const d = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** exp);
  return d / 2 + random() * (d / 2);
}

/** The failure count `n` of one stream and the rules that move it. */
export class RecoveryBackoff {
  private n = 0;
  private synchronizedAtMs: number | null = null;

  get failures(): number {
    return this.n;
  }

  /** Entering SYNCHRONIZED starts the 10 s stability window. */
  onSynchronized(nowMs: number): void {
    this.synchronizedAtMs = nowMs;
  }

  /** Leaving SYNCHRONIZED: counts only within 10 s of entering it; after that n restarts at 0. */
  onSyncLost(nowMs: number): void {
    const since = this.synchronizedAtMs;
    this.synchronizedAtMs = null;
    if (since !== null && nowMs - since >= BACKOFF_STABLE_MS) this.n = 0;
    else this.n++;
  }

  /** An aborted recovery always counts. */
  onRecoveryFailed(): void {
    this.n++;
  }

  /** 0 when n = 0 (recover immediately), else the §7.4 jittered delay. */
  nextDelayMs(random: () => number): number {
    return backoffDelayMs(this.n, random);
  }
}
