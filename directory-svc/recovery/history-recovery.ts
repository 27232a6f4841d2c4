/**
 * The history-replay recovery policy of vllm/sglang streams (engines.md §3 subscriber rules
 * 1–5), driven by the stream subscriber in place of the xLLM snapshot recovery (kv-events §7.2,
 * §7.5). States, errors, counters and atomic publication stay the subscriber's; this module
 * decides what to request and what a reply means:
 *
 * 1. First connect (`last = −1`): request 0; a reply from 0, contiguous, is applied to an empty
 *    index, then the buffered suffix; an empty reply with nothing (or a suffix from 0) buffered is
 *    an engine that published nothing yet. A reply starting above 0 is `history_lost`.
 * 2. Gap: the index is kept (hidden) and `last + 1` requested; a contiguous reply from there
 *    repairs it without discarding it.
 * 3. Seq reset: the subscriber discards the index; then as 1.
 * 4. Disconnect: the index is kept only with an identity source, and resumed (as 2) only when a
 *    scrape taken after the reconnect shows the identity it was synchronized under.
 * 5. Reconciliation: request `last + 1`; an empty reply is healthy; unseen tail batches are
 *    applied in place (`silent_loss`); a reply starting later is `history_lost`.
 * Without a replay endpoint only a live seq 0 (or a full-state batch, the subscriber's §7.3)
 * synchronizes, and any loss is `history_lost`.
 *
 * Decisions where the spec is silent:
 * - An exchange that fails part-way (parse, protocol, inconsistent, limit, timeout) discards the
 *   kept index too: history batches may already be in it. The retry is a first connect.
 * - A live batch at or below `last` whose seq a reconciliation just applied from history is a
 *   late duplicate, dropped, not a seq reset.
 * - The identity compared on reconnect is the one current when the stream last entered
 *   SYNCHRONIZED; none then (no scrape yet, or multiprocess metrics) means no resume.
 * - An empty reply while the buffered suffix does not continue `last` is a `gap` (retried with
 *   the §7.4 backoff): the reply raced batches published after it was served.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { LiveBatch } from '../decoder/kv-batch.js';
import type { HistoryDecoderOptions } from '../decoder/history-decoder.js';
import { HistoryLostError, ParseError, isStreamError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';
import type { EngineIdentity, EngineIdentitySource } from '../engines/engine-identity.js';
import type { SkipCounters, StreamIndex } from '../index/stream-index.js';
import { HistoryExchange } from './history-exchange.js';
import type { HistoryOutcome } from './history-exchange.js';
import type { RecoveryBuffer } from './recovery-buffer.js';
import { gapError } from './sequence-rules.js';
import type { Cancellable } from './recovery-session.js';

/** engines.md §3 rule 1: history_lost retries at most this often when resync_interval_ms is 0. */
export const HISTORY_LOST_RETRY_DEFAULT_MS = 30_000;
/** Rule 4: pause between identity scrapes while the engine's /metrics is still unreachable. */
const IDENTITY_RETRY_MS = 100;

/** What the policy needs from its subscriber. */
export interface HistoryHost {
  readonly logger: Logger;
  readonly replayEndpoint: string;
  readonly identity: EngineIdentitySource | undefined;
  readonly decode: HistoryDecoderOptions;
  readonly replayTimeoutMs: number;
  /** The recovery buffer (kv-events §7.2 step 1) of live batches while RECOVERING. */
  readonly buffer: RecoveryBuffer;
  newIndex(): StreamIndex;
  zeroSkips(): SkipCounters;
  /** RECOVERING → SYNCHRONIZED with `index` as the live index and `last`; one indexReplaced. */
  publishRecovered(index: StreamIndex, last: bigint, applied: number, skipped: SkipCounters): void;
  /** RECOVERING → UNSYNCHRONIZED with the §7.4 retry. */
  abortRecovery(err: StreamError): void;
  /** → UNSYNCHRONIZED with `history_lost`, retried only after the history_lost period. */
  historyLost(err: HistoryLostError): void;
  /** Called when a recovery exchange ends (current or not): the subscriber clears its slot. */
  isCurrent(ex: Cancellable): boolean;
  exchangeEnded(): void;
}


/** The rule 1 / 2 wording of `error`, exactly as engines.md §3 writes it. */
export function historyLostError(startsAt: bigint, needed: bigint): HistoryLostError {
  return new HistoryLostError(`replay starts at ${startsAt}, needed ${needed}; waiting for a full-state batch`);
}

/** Without a replay endpoint (engines.md §3): what was seen instead of what was needed. */
export function noReplayError(seen: bigint, needed: bigint): HistoryLostError {
  return new HistoryLostError(`no replay endpoint; live starts at ${seen}, needed ${needed}; waiting for a full-state batch`);
}

interface KeptIndex {
  readonly index: StreamIndex;
  readonly last: bigint;
  /** Rule 4: kept across a disconnect, resumed only after a fresh identity scrape matches. */
  readonly identity: string | null;
}

/** A pending identity check, then the exchange: cancelling either ends both. */
class PendingRecovery implements Cancellable {
  exchange: HistoryExchange | null = null;
  readonly abort = new AbortController();
  private timer: NodeJS.Timeout | null = null;
  cancelled = false;

  sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.timer = setTimeout(() => {
        this.timer = null;
        resolve();
      }, ms);
    });
  }

  cancel(): void {
    this.cancelled = true;
    this.abort.abort();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
    this.exchange?.cancel();
  }
}

export class HistoryRecovery {
  private kept: KeptIndex | null = null;
  /** Identity current when the stream last entered SYNCHRONIZED (rule 4). */
  private syncIdentity: EngineIdentity = undefined;
  /** Seqs a reconciliation applied from history: late live copies of them are dropped. */
  private replayedFrom = -1n;
  private replayedTo = -1n;

  constructor(private readonly host: HistoryHost) {}

  get hasReplayEndpoint(): boolean {
    return this.host.replayEndpoint !== '';
  }

  /** Reconciliation is off without a replay endpoint (engines.md §3). */
  get reconciles(): boolean {
    return this.hasReplayEndpoint;
  }

  /** Rule 2: keep the index across a gap's RECOVERING. */
  keepForGap(index: StreamIndex, last: bigint): void {
    this.kept = { index, last, identity: null };
  }

  /** Rule 4: keep the index across a disconnect only when it can be resumed safely. */
  keepForDisconnect(index: StreamIndex | null, last: bigint): void {
    const id = this.syncIdentity;
    if (index === null || last < 0n || this.host.identity === undefined || typeof id !== 'string') {
      this.kept = null;
      return;
    }
    this.kept = { index, last, identity: id };
  }

  discard(): void {
    this.kept = null;
  }

  /** Entering SYNCHRONIZED: note the identity the index belongs to. */
  onSynchronized(): void {
    this.syncIdentity = this.host.identity?.current();
    this.kept = null;
    // A duplicate window belongs to the index it was applied to, never to a new one.
    this.replayedFrom = this.replayedTo = -1n;
  }

  /** Leaving SYNCHRONIZED for good (not a gap or a disconnect): no duplicate window survives. */
  onSyncLost(): void {
    this.replayedFrom = this.replayedTo = -1n;
  }

  /** A live seq ≤ last that a reconciliation applied from history: a late duplicate. */
  isReplayedDuplicate(seq: bigint): boolean {
    return this.replayedTo >= 0n && seq >= this.replayedFrom && seq <= this.replayedTo;
  }

  /** A live batch above the replayed range was applied: later low seqs are real resets. */
  onLiveApplied(seq: bigint): void {
    if (seq > this.replayedTo) this.replayedFrom = this.replayedTo = -1n;
  }

  /**
   * Rules 1, 2, 4: the request for RECOVERING (after the admission slot). Without a replay
   * endpoint nothing is requested (null): the first buffered batch decides.
   */
  startRecovery(): Cancellable | null {
    if (!this.hasReplayEndpoint) return null;
    const pending = new PendingRecovery();
    const kept = this.kept;
    if (kept !== null && kept.identity !== null) {
      void this.checkIdentityThenRequest(pending, kept);
    } else {
      this.request(pending);
    }
    return pending;
  }

  /** Without a replay endpoint (RECOVERING): decide on the buffered batches. */
  onBufferedWithoutEndpoint(): void {
    const batches = this.host.buffer.batches;
    if (batches.length === 0) return;
    const kept = this.kept;
    const needed = kept === null ? 0n : kept.last + 1n;
    const first = batches[0].seq;
    if (first === 0n) {
      // The engine's first ever batch (or a restarted one's): nothing was missed.
      this.kept = null;
      this.applySuffixAndPublish(this.host.newIndex(), -1n, 0, this.host.zeroSkips());
      return;
    }
    if (kept !== null && first === needed) {
      this.applySuffixAndPublish(kept.index, kept.last, 0, this.host.zeroSkips());
      return;
    }
    this.kept = null;
    this.host.historyLost(noReplayError(first, needed));
  }

  /**
   * Rule 5: one reconciliation exchange while SYNCHRONIZED. `live()` is read per batch (the live
   * index and `last` move while it runs); `applyTail` applies one unseen batch to it.
   */
  startReconcile(
    lastNow: () => bigint,
    applyTail: (batch: LiveBatch) => void,
    onEnd: (result: { kind: 'equal' | 'replaced' } | { kind: 'lost'; error: HistoryLostError } | { kind: 'failed'; error: StreamError }) => void,
  ): Cancellable {
    const startSeq = lastNow() + 1n;
    let applied = 0;
    const sink = {
      accept: (batch: LiveBatch): void => {
        // Seen live since the request: nothing lost.
        if (batch.seq <= lastNow()) return;
        applyTail(batch);
        if (applied === 0) this.replayedFrom = batch.seq;
        this.replayedTo = batch.seq;
        applied++;
      },
    };
    return HistoryExchange.start(
      { replayEndpoint: this.host.replayEndpoint, startSeq, decode: this.host.decode, timeoutMs: this.host.replayTimeoutMs },
      sink,
      (outcome) => {
        if (outcome.kind === 'complete') onEnd({ kind: applied > 0 ? 'replaced' : 'equal' });
        else if (outcome.kind === 'lost') onEnd({ kind: 'lost', error: historyLostError(outcome.got, outcome.expected) });
        else onEnd({ kind: 'failed', error: outcome.error });
      },
    );
  }

  private async checkIdentityThenRequest(pending: PendingRecovery, kept: KeptIndex): Promise<void> {
    const source = this.host.identity as EngineIdentitySource;
    const deadline = performance.now() + this.host.replayTimeoutMs;
    // A scrape that hangs is cut at the deadline too (the signal aborts it).
    const cutOff = setTimeout(() => pending.abort.abort(), this.host.replayTimeoutMs);
    let seen: string | null | undefined = undefined;
    while (!pending.cancelled && seen === undefined && performance.now() < deadline) {
      try {
        seen = await source.scrapeNow(pending.abort.signal);
      } catch {
        // /metrics still unreachable: the index stays hidden; try again until the deadline.
        if (!pending.cancelled && performance.now() < deadline) await pending.sleep(IDENTITY_RETRY_MS);
      }
    }
    clearTimeout(cutOff);
    if (pending.cancelled) return;
    if (seen !== kept.identity) {
      this.host.logger.info({ was: kept.identity, now: seen ?? 'unreadable' }, 'engine identity changed or unknown after reconnect; index discarded');
      this.kept = null;
    }
    this.request(pending);
  }

  private request(pending: PendingRecovery): void {
    const kept = this.kept;
    const base = kept === null ? -1n : kept.last;
    const index = kept === null ? this.host.newIndex() : kept.index;
    const skipped = this.host.zeroSkips();
    const sink = { accept: (batch: LiveBatch): void => index.applyEvents(batch.events, skipped) };
    pending.exchange = HistoryExchange.start(
      { replayEndpoint: this.host.replayEndpoint, startSeq: base + 1n, decode: this.host.decode, timeoutMs: this.host.replayTimeoutMs },
      sink,
      (outcome) => this.onRecoveryEnd(pending, index, base, skipped, outcome),
    );
  }

  private onRecoveryEnd(pending: PendingRecovery, index: StreamIndex, base: bigint, skipped: SkipCounters, outcome: HistoryOutcome): void {
    if (!this.host.isCurrent(pending)) return;
    this.host.exchangeEnded();
    if (outcome.kind === 'failed') {
      this.kept = null;
      this.host.abortRecovery(outcome.error);
      return;
    }
    if (outcome.kind === 'lost') {
      this.kept = null;
      this.host.historyLost(historyLostError(outcome.got, outcome.expected));
      return;
    }
    // An empty reply leaves `base` as the last applied seq (lastSeq = start_seq − 1 = base).
    this.applySuffixAndPublish(index, outcome.lastSeq < base ? base : outcome.lastSeq, outcome.batches, skipped);
  }

  /** The buffered suffix after `last`, contiguous, onto `index`; then publish. */
  private applySuffixAndPublish(index: StreamIndex, last: bigint, applied: number, skipped: SkipCounters): void {
    let expected = last + 1n;
    const batches = this.host.buffer.batches;
    try {
      for (let i = 0; i < batches.length; i++) {
        const b = batches[i];
        if (b.seq < expected) continue; // duplicate by seq
        if (b.seq !== expected) throw gapError(expected, b.seq);
        index.applyEvents(b.events, skipped);
        expected++;
        applied++;
      }
    } catch (e: unknown) {
      this.kept = null;
      this.host.abortRecovery(isStreamError(e) ? e : new ParseError(`unexpected failure: ${e instanceof Error ? e.message : String(e)}`));
      return;
    }
    this.kept = null;
    this.host.publishRecovered(index, expected - 1n, applied, skipped);
  }
}
