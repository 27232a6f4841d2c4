/**
 * Directory-wide cap on concurrent snapshot exchanges (recoveries, §7.2, and reconciliations,
 * §7.5): a FIFO counting semaphore shared by every stream subscriber. Our extension beyond
 * kv-events §9 (`max_concurrent_recoveries`): when every publisher restarts at once, all streams
 * would otherwise request ~180 MB replies together, share the machine, and time out (§6 `timeout`)
 * far more often than they finish.
 *
 * Pure apart from promises: no timers, sockets or clock. A released slot passes straight to the
 * oldest waiter (never back to the pool while someone waits), so `tryAcquire` cannot overtake
 * the queue. Each release function frees its slot once; calling it again does nothing.
 */
import { DomainError } from '../../shared/errors/domain-error.js';

/** Gives back one slot; idempotent. */
export type ReleaseSlot = () => void;

/** The wait for a slot was cancelled (its AbortSignal fired) before a slot was granted. */
export class AdmissionCancelledError extends DomainError {
  readonly class = 'admission_cancelled' as const;
  constructor() {
    super('wait for a snapshot slot cancelled');
  }
}

export function isAdmissionCancelled(e: unknown): e is AdmissionCancelledError {
  return e instanceof AdmissionCancelledError;
}

interface Waiter {
  readonly grant: (release: ReleaseSlot) => void;
  readonly signal: AbortSignal | undefined;
  readonly onAbort: () => void;
}

export class RecoveryAdmission {
  private used = 0;
  /** FIFO of waiters. At most one per stream (≤ max_streams), so shift/indexOf stay cheap. */
  private readonly waiters: Waiter[] = [];

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`capacity must be an integer >= 1, got ${capacity}`);
  }

  /** Slots held now. */
  get inUse(): number {
    return this.used;
  }

  /** Waiters queued now. */
  get queued(): number {
    return this.waiters.length;
  }

  /** A slot now, or null when all are held or someone is already queued (FIFO is kept). */
  tryAcquire(): ReleaseSlot | null {
    if (this.used >= this.capacity || this.waiters.length > 0) return null;
    this.used++;
    return this.releaser();
  }

  /**
   * Resolves with a release function once a slot is free, in request order. When `signal` fires
   * first, the waiter leaves the queue and the promise rejects with AdmissionCancelledError; no
   * slot is taken. A signal firing after the grant changes nothing: the caller holds the slot
   * and must release it.
   */
  acquire(signal?: AbortSignal): Promise<ReleaseSlot> {
    if (signal?.aborted === true) return Promise.reject(new AdmissionCancelledError());
    const now = this.tryAcquire();
    if (now !== null) return Promise.resolve(now);
    return new Promise<ReleaseSlot>((resolve, reject) => {
      const onAbort = (): void => {
        const i = this.waiters.indexOf(waiter);
        if (i < 0) return;
        this.waiters.splice(i, 1);
        reject(new AdmissionCancelledError());
      };
      const waiter: Waiter = { grant: resolve, signal, onAbort };
      this.waiters.push(waiter);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  private releaser(): ReleaseSlot {
    let held = true;
    return () => {
      if (!held) return;
      held = false;
      this.release();
    };
  }

  /** Hands the slot to the oldest waiter (`used` unchanged), else returns it to the pool. */
  private release(): void {
    const w = this.waiters.shift();
    if (w === undefined) {
      this.used--;
      return;
    }
    w.signal?.removeEventListener('abort', w.onAbort);
    w.grant(this.releaser());
  }
}
