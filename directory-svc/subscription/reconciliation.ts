/**
 * Periodic reconciliation of a SYNCHRONIZED stream (kv-events §7.5; engines.md §3 rule 5 for
 * vllm/sglang): every `resync_interval_ms` a check compares the served index with the publisher's
 * state and swaps in the publisher's when they differ. This module owns the check's record, its
 * timers and its copy buffer; states, `last` and the served index stay the subscriber's, changed
 * only through `ReconcileHost`.
 *
 * xLLM (§7.5): 1. request a snapshot into a candidate C while copying every live batch applied
 * meanwhile; 2. a reply whose watermark W − 1 is below the `last` at the request is a restart
 * (seq_reset); 3. once `last ≥ W − 1`, bring C up to `last` with the copies and compare; not
 * reached within `replay_timeout_ms`: batches last+1 … W−1 were lost, C is served at W − 1.
 *
 * Decisions where the spec is silent:
 * - Exceeding `max_buffered_bytes` with the copy counts `reconcile_failures`.
 * - A check that finds no free admission slot is skipped until the next interval (not a failure):
 *   reconciliations never queue behind recoveries. The slot is released when the exchange ends.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';
import type { LiveBatch } from '../decoder/kv-batch.js';
import type { HistoryLostError, StreamError } from '../errors/stream-errors.js';
import type { SkipCounters, StreamIndex } from '../index/stream-index.js';
import type { HistoryRecovery } from '../recovery/history-recovery.js';
import type { RecoveryAdmission, ReleaseSlot } from '../recovery/recovery-admission.js';
import { RecoveryBuffer } from '../recovery/recovery-buffer.js';
import type { Cancellable } from '../recovery/recovery-session.js';
import { seqResetError } from '../recovery/sequence-rules.js';
import { SnapshotBuilder } from '../recovery/snapshot-builder.js';
import { SnapshotExchange } from '../recovery/snapshot-exchange.js';
import type { SnapshotOutcome, SnapshotRequest } from '../recovery/snapshot-exchange.js';
import { addSkips, zeroSkips, type StreamCounters } from './stream-counters.js';
import { asStreamError, errorText } from '../errors/stream-errors.js';
import type { ReconcileOutcome } from './stream-observer.js';

/** What a check needs from its subscriber. */
export interface ReconcileHost {
  readonly logger: Logger;
  readonly limits: StreamLimits;
  readonly counters: StreamCounters;
  /** vllm/sglang: the history policy (rule 5); null for xllm. */
  readonly history: HistoryRecovery | null;
  readonly admission: RecoveryAdmission | undefined;
  /** Not closed and SYNCHRONIZED: a check runs only then. */
  synchronized(): boolean;
  closed(): boolean;
  /** `last` of §7. */
  last(): bigint;
  /** The served index (only called while synchronized). */
  live(): StreamIndex;
  newIndex(): StreamIndex;
  snapshotRequest(): SnapshotRequest;
  /** Serve `candidate` at `last` in one assignment (silent loss found). */
  replaceIndex(candidate: StreamIndex, last: bigint): void;
  /** Rule 5: one unseen history batch applied in place to the served index. */
  applyInPlace(batch: LiveBatch): void;
  /** SYNCHRONIZED → UNSYNCHRONIZED with `err`, then the §7.4 retry. */
  loseSync(err: StreamError): void;
  /** SYNCHRONIZED → RECOVERING with `err` (`resetLast`: a restart, `last` becomes −1). */
  recover(err: StreamError, resetLast: boolean): void;
  /** → UNSYNCHRONIZED with `history_lost`. */
  historyLost(err: HistoryLostError): void;
  /** The check ended (the observer's `reconcileEnded`). */
  ended(outcome: ReconcileOutcome): void;
}

/** §7.5 check in progress: the snapshot exchange, then the wait for `last ≥ W − 1`. */
interface SnapshotCheck {
  readonly l0: bigint;
  readonly candidate: StreamIndex;
  readonly skipped: SkipCounters;
  /** Copies of live batches applied since the request (§7.5 step 1). */
  readonly copy: RecoveryBuffer;
  exchange: SnapshotExchange | null;
  /** The admission slot held for `exchange`; null without admission or once released. */
  releaseSlot: ReleaseSlot | null;
  watermark: bigint | null;
  waitTimer: NodeJS.Timeout | null;
}

/** A rule 5 history check in flight, with its admission slot. */
interface HistoryCheck {
  ex: Cancellable | null;
  releaseSlot: ReleaseSlot | null;
}

export class Reconciliation {
  private timer: NodeJS.Timeout | null = null;
  private check: SnapshotCheck | null = null;
  private historyCheck: HistoryCheck | null = null;

  constructor(private readonly host: ReconcileHost) {}

  /** (Re)starts the period; a no-op when reconciliation is off for this stream. */
  arm(): void {
    this.clearTimer();
    const host = this.host;
    if (host.limits.resyncIntervalMs <= 0 || host.closed()) return;
    // engines.md §3: no replay endpoint, no reconciliation.
    if (host.history !== null && !host.history.reconciles) return;
    this.timer = setTimeout(() => {
      this.timer = null;
      this.start();
    }, host.limits.resyncIntervalMs);
  }

  /**
   * Stops the period and any check in progress (leaving SYNCHRONIZED: `countFailure`, a
   * reconcile_failure; close: not). True when a check was in progress.
   */
  stop(countFailure: boolean): boolean {
    this.clearTimer();
    return this.cancel(countFailure);
  }

  /** §7.5 step 1: a live batch was applied to the served index while a check may run. */
  onApplied(batch: LiveBatch): void {
    const check = this.check;
    if (check === null) return;
    try {
      check.copy.push(batch);
    } catch (e: unknown) {
      this.host.logger.info({ error: errorText(asStreamError(e)) }, 'reconciliation abandoned');
      this.end('abandoned');
      return;
    }
    // Step 3: maybe `last ≥ W − 1` now.
    if (check.watermark !== null && this.host.last() >= check.watermark - 1n) this.reached(check);
  }

  private start(): void {
    const host = this.host;
    if (!host.synchronized() || this.check !== null || this.historyCheck !== null) return;
    let releaseSlot: ReleaseSlot | null = null;
    if (host.admission !== undefined) {
      // Never queue a check behind recoveries: no free slot now, try again next interval.
      releaseSlot = host.admission.tryAcquire();
      if (releaseSlot === null) {
        host.logger.debug({ in_use: host.admission.inUse, queued: host.admission.queued }, 'reconciliation skipped: no snapshot slot free');
        this.arm();
        return;
      }
    }
    if (host.history !== null) {
      this.startHistory(host.history, releaseSlot);
      return;
    }
    const candidate = host.newIndex();
    const skipped = zeroSkips();
    const check: SnapshotCheck = {
      l0: host.last(),
      candidate,
      skipped,
      copy: new RecoveryBuffer(host.limits.maxBufferedBytes),
      exchange: null,
      releaseSlot,
      watermark: null,
      waitTimer: null,
    };
    this.check = check;
    check.exchange = SnapshotExchange.start(host.snapshotRequest(), new SnapshotBuilder(candidate, skipped), (outcome) =>
      this.onExchangeEnd(check, outcome),
    );
  }

  private onExchangeEnd(check: SnapshotCheck, outcome: SnapshotOutcome): void {
    const host = this.host;
    if (this.check !== check || !host.synchronized()) return;
    check.exchange = null;
    // The exchange is over: the step 3 wait holds no snapshot traffic.
    releaseCheckSlot(check);
    if (outcome.kind === 'failed') {
      if (outcome.error.class === 'timeout') {
        host.logger.info({ error: errorText(outcome.error) }, 'reconciliation abandoned');
        this.end('abandoned');
      } else {
        // §7.5 step 2: parse/protocol/limit in the reply → UNSYNCHRONIZED with it.
        this.end('failed');
        host.loseSync(outcome.error);
      }
      return;
    }
    const watermark = outcome.watermark;
    if (watermark - 1n < check.l0) {
      // §7.5 step 2: the publisher's state predates what we applied: a restart (§7.1).
      this.end('failed');
      host.recover(seqResetError(watermark - 1n, check.l0), true);
      return;
    }
    check.watermark = watermark;
    if (host.last() >= watermark - 1n) {
      this.reached(check);
      return;
    }
    check.waitTimer = setTimeout(() => {
      check.waitTimer = null;
      if (this.check === check && host.synchronized()) this.notReached(check);
    }, host.limits.replayTimeoutMs);
  }

  /** §7.5 step 3, reached: bring C up to `last`, compare, swap only when they differ. */
  private reached(check: SnapshotCheck): void {
    const host = this.host;
    const watermark = check.watermark as bigint;
    const candidate = check.candidate;
    const copied = check.copy.batches;
    try {
      for (let i = 0; i < copied.length; i++) {
        if (copied[i].seq >= watermark) candidate.applyEvents(copied[i].events, check.skipped);
      }
    } catch (e: unknown) {
      this.end('failed');
      host.recover(asStreamError(e), false);
      return;
    }
    if (!candidate.sameStateAs(host.live())) {
      addSkips(host.counters.skipped, check.skipped);
      host.counters.silentLoss++;
      host.logger.warn({ sequence: host.last().toString() }, 'reconciliation found silent loss; index replaced');
      host.replaceIndex(candidate, host.last());
      this.end('replaced');
      return;
    }
    this.end('equal');
  }

  /** §7.5 step 3, not reached: batches last+1 … W−1 were lost. */
  private notReached(check: SnapshotCheck): void {
    const host = this.host;
    const watermark = check.watermark as bigint;
    const lostFrom = host.last() + 1n;
    addSkips(host.counters.skipped, check.skipped);
    host.counters.silentLoss++;
    host.logger.warn({ lost_from: lostFrom.toString(), lost_to: (watermark - 1n).toString() }, 'reconciliation found lost batches; index replaced');
    host.replaceIndex(check.candidate, watermark - 1n);
    this.end('lost');
  }

  /** Ends the current check; re-arms the period while still SYNCHRONIZED. */
  private end(outcome: ReconcileOutcome): void {
    this.cancel(outcome === 'abandoned');
    if (this.host.synchronized()) this.arm();
    this.host.ended(outcome);
  }

  /** engines.md §3 rule 5: request last + 1; unseen tail batches are applied in place. */
  private startHistory(history: HistoryRecovery, releaseSlot: ReleaseSlot | null): void {
    const host = this.host;
    const check: HistoryCheck = { ex: null, releaseSlot };
    this.historyCheck = check;
    check.ex = history.startReconcile(
      () => host.last(),
      (batch) => host.applyInPlace(batch),
      (result) => {
        if (this.historyCheck !== check || !host.synchronized()) return;
        this.historyCheck = null;
        check.releaseSlot?.();
        if (result.kind === 'equal' || result.kind === 'replaced') {
          if (result.kind === 'replaced') {
            host.counters.silentLoss++;
            host.logger.warn({ sequence: host.last().toString() }, 'reconciliation found unseen history batches; applied');
          }
          this.arm();
          host.ended(result.kind);
        } else if (result.kind === 'failed' && result.error.class === 'timeout') {
          host.counters.reconcileFailures++;
          this.arm();
          host.ended('abandoned');
        } else {
          host.ended('failed');
          if (result.kind === 'lost') host.historyLost(result.error);
          else if (result.kind === 'failed') host.loseSync(result.error);
        }
      },
    );
  }

  /** Drops the check in progress, if any; true when there was one. */
  private cancel(countFailure: boolean): boolean {
    let had = false;
    const hc = this.historyCheck;
    if (hc !== null) {
      had = true;
      this.historyCheck = null;
      hc.ex?.cancel();
      hc.releaseSlot?.();
      if (countFailure) this.host.counters.reconcileFailures++;
    }
    const check = this.check;
    if (check === null) return had;
    this.check = null;
    check.exchange?.cancel();
    check.exchange = null;
    releaseCheckSlot(check);
    if (check.waitTimer !== null) clearTimeout(check.waitTimer);
    check.waitTimer = null;
    if (countFailure) this.host.counters.reconcileFailures++;
    return true;
  }

  private clearTimer(): void {
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }
}

function releaseCheckSlot(check: SnapshotCheck): void {
  const release = check.releaseSlot;
  check.releaseSlot = null;
  release?.();
}
