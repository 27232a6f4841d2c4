/**
 * The recovery exchange of one stream (kv-events §7.2 step 2) under the directory's
 * `max_concurrent_recoveries` cap (recovery-admission.ts): at most one exchange per stream,
 * started at once without a cap, or once a slot is granted. `replay_timeout_ms` starts with the
 * exchange (§6), so queueing never counts toward it. Cancelling (leaving RECOVERING, close)
 * leaves the queue or stops the exchange, and every slot goes back exactly once.
 */
import type { Logger } from '../../shared/log/logger.js';
import { isAdmissionCancelled } from './recovery-admission.js';
import type { RecoveryAdmission, ReleaseSlot } from './recovery-admission.js';

export interface Cancellable {
  cancel(): void;
}

export class RecoverySession {
  private exchange: Cancellable | null = null;
  /** Set while waiting for a slot; aborting it leaves the queue. */
  private wait: AbortController | null = null;
  /** The slot held by `exchange` (granted, not yet released). */
  private slot: ReleaseSlot | null = null;

  /** `admission` absent: every exchange starts at once (the §7 behaviour as written). */
  constructor(
    private readonly admission: RecoveryAdmission | undefined,
    private readonly logger: Logger,
  ) {}

  /** An exchange runs or waits for its slot. */
  get pending(): boolean {
    return this.exchange !== null || this.wait !== null;
  }

  /**
   * Runs `send` now, or once a slot is granted if `stillWanted()` holds then (a slot no longer
   * wanted goes straight back). No-op while an exchange is pending. `send` may start nothing
   * (null): the slot is then held until `ended` or `cancel`, as for an exchange.
   */
  begin(stillWanted: () => boolean, send: () => Cancellable | null): void {
    if (this.pending) return;
    const admission = this.admission;
    if (admission === undefined) {
      this.exchange = send();
      return;
    }
    const wait = new AbortController();
    this.wait = wait;
    admission.acquire(wait.signal).then(
      (release) => {
        if (this.wait !== wait || !stillWanted()) {
          release();
          return;
        }
        this.wait = null;
        this.slot = release;
        this.exchange = send();
      },
      (e: unknown) => {
        if (!isAdmissionCancelled(e)) this.logger.error({ err: e }, 'snapshot admission failed');
      },
    );
  }

  /** `ex` is the exchange running now (a late reply of a cancelled one is not). */
  isCurrent(ex: Cancellable): boolean {
    return this.exchange === ex;
  }

  /** The running exchange ended by itself: its slot goes back. */
  ended(): void {
    this.exchange = null;
    this.releaseSlot();
  }

  /** Cancels the exchange or the wait for its slot, and releases any slot held. */
  cancel(): void {
    this.exchange?.cancel();
    this.exchange = null;
    if (this.wait !== null) {
      this.wait.abort();
      this.wait = null;
    }
    this.releaseSlot();
  }

  private releaseSlot(): void {
    const release = this.slot;
    this.slot = null;
    release?.();
  }
}
