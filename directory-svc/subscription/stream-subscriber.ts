/**
 * The per-stream subscriber of kv-events §7: one SUB on the event endpoint, snapshot recovery on
 * fresh DEALERs, the §7 state machine, full-state restores (§7.3), backoff (§7.4) and periodic
 * reconciliation (§7.5). Its one promise: never credit a stale cache. Only SYNCHRONIZED serves
 * an index, and every index it serves was built beside the old one and swapped in by a single
 * reference assignment (§7.2 step 4), so a reader sees the old view or the new one.
 *
 * Edge module: owns the stream's timers and drives its parts (socket, decoder, index, sequence
 * rules, recovery buffer, backoff). Every move goes through `transition`, which checks the §7
 * table.
 *
 * Decisions where the spec is silent:
 * - `sync_lost{class}` counts every failure recorded in `error` (losses of SYNCHRONIZED and
 *   aborted recoveries), so `timeout` and recovery-time `limit` are visible too.
 * - A gap keeps `last` (it is the `start_seq` basis); a seq reset and a disconnect set it to −1.
 * - In RECOVERING a full-state batch is tried on arrival (before the seq and budget checks of
 *   §7.2), so a restore after a publisher restart never depends on the old buffer.
 * - Live-message errors in UNSYNCHRONIZED are logged only: the stream already lost sync.
 * - A disconnect during RECOVERING counts as an aborted recovery (§7.4 "aborts recovery").
 * - With `deps.recoveryAdmission` (our `max_concurrent_recoveries`, beyond §9), a RECOVERING
 *   stream waits for a directory-wide slot before sending its request (recovery-session.ts).
 *   While queued the stream buffers live batches as in §7.2 step 1; leaving RECOVERING
 *   (restore, full buffer, disconnect) or close cancels the wait.
 *
 * Split by job: the event socket (event-socket.ts), recovery exchanges under admission
 * (recovery/recovery-session.ts), the §7.5 check (reconciliation.ts), the §10 counters
 * (stream-counters.ts), what is told out (stream-observer.ts); this module is the §7 state
 * machine that drives them.
 */
import { replaysHistory } from '../../shared/config/engine-kind.js';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { Logger } from '../../shared/log/logger.js';
import { isFullStateBatch } from '../decoder/kv-batch.js';
import type { LiveBatch } from '../decoder/kv-batch.js';
import { decodeLiveMessage } from '../decoder/live-frame-decoder.js';
import type { LiveDecoderOptions } from '../decoder/live-frame-decoder.js';
import { ConnectingError, DisconnectedError, asStreamError, errorText } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { CacheGroupSelection } from '../index/cache-group-selection.js';
import { ServedResidency } from '../index/served-residency.js';
import { StreamIndex } from '../index/stream-index.js';
import type { SkipCounters } from '../index/stream-index.js';
import type { QueryableStream } from '../index/stream-query.js';
import { RecoveryBackoff } from '../recovery/backoff.js';
import type { RecoveryAdmission } from '../recovery/recovery-admission.js';
import { RecoveryBuffer } from '../recovery/recovery-buffer.js';
import { SnapshotBuilder } from '../recovery/snapshot-builder.js';
import { SnapshotExchange } from '../recovery/snapshot-exchange.js';
import type { SnapshotOutcome, SnapshotRequest } from '../recovery/snapshot-exchange.js';
import type { HistoryLostError } from '../errors/stream-errors.js';
import { EventSocket } from './event-socket.js';
import { HISTORY_LOST_RETRY_DEFAULT_MS, HistoryRecovery } from '../recovery/history-recovery.js';
import type { HistoryHost } from '../recovery/history-recovery.js';
import { RecoverySession, type Cancellable } from '../recovery/recovery-session.js';
import { Reconciliation, type ReconcileHost } from './reconciliation.js';
import { classifySeq, gapError, seqResetError } from '../recovery/sequence-rules.js';
import { IllegalTransitionError, isAllowedTransition } from './stream-state.js';
import type { StreamState } from './stream-state.js';
import { addSkips, countSyncLost, newStreamCounters, zeroSkips, type StreamCounters } from './stream-counters.js';
import { UNOBSERVED, type StreamObserver } from './stream-observer.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';
import type { StreamConfig } from './stream-config.js';

export interface StreamSubscriberDeps {
  logger?: Logger;
  /** [0, 1) source for the §7.4 jitter; injected by tests. */
  random?: () => number;
  /** Monotonic clock for the §7.4 10 s stability window (default performance.now); injected by tests. */
  nowMs?: () => number;
  /**
   * Directory-wide cap on concurrent snapshot exchanges, one instance shared by every stream.
   * Absent: every exchange starts at once (the §7 behaviour as written).
   */
  recoveryAdmission?: RecoveryAdmission;
  /**
   * The directory's residency groups (one shared instance): the stream's served residency is
   * mirrored into its (block_size, hash_seed) group, which the query view matches. Absent: a
   * private group of this stream alone.
   */
  residencyGroups?: ResidencyGroups;
}

/**
 * Everything the subscriber does is told to its one observer (stream-observer.ts: state moves,
 * applied batches, index swaps, residency changes of the served index, backoff, reconciliation),
 * set by `observe` before `start`. A listener leaving SYNCHRONIZED drops the stream's residency,
 * including any change reported by a batch that then failed part-way (§5.2: partial effects are
 * never served).
 */
export class StreamSubscriber {
  readonly config: StreamConfig;
  readonly limits: StreamLimits;
  readonly counters: StreamCounters;

  private readonly hasher: ContentKeyHasher;
  private readonly logger: Logger;
  private readonly random: () => number;
  private readonly nowMs: () => number;
  private observer: StreamObserver = UNOBSERVED;
  /** The served index's residency in the shared group (the §8 query view). */
  private readonly served: ServedResidency;
  private readonly decodeOpts: LiveDecoderOptions;
  private readonly backoff = new RecoveryBackoff();
  private readonly buffer: RecoveryBuffer;
  /** cache-identity §4 rule 4: the KV cache group this stream indexes, for its lifetime. */
  private readonly cacheGroup = new CacheGroupSelection();

  private current: StreamState = 'CONNECTING';
  private lastError: string;
  /** `last` of §7: seq of the last batch reflected in the live index, −1n when none. */
  private last = -1n;
  /** The index built for SYNCHRONIZED; never exposed in any other state. */
  private live: StreamIndex | null = null;
  private socket: EventSocket | null = null;
  /** vllm/sglang streams (engines.md §3): the history-replay policy; null for xllm. */
  private readonly history: HistoryRecovery | null;
  /** The RECOVERING exchange (snapshot or history) and its admission slot. */
  private readonly recovery: RecoverySession;
  /** §7.5 while SYNCHRONIZED. */
  private readonly reconciliation: Reconciliation;
  /** §7.4 delay: before the request in RECOVERING, or before leaving UNSYNCHRONIZED. */
  private backoffTimer: NodeJS.Timeout | null = null;
  private closed = false;

  private constructor(cfg: StreamConfig, limits: StreamLimits, hasher: ContentKeyHasher, deps: StreamSubscriberDeps) {
    this.config = Object.freeze({ ...cfg });
    this.limits = Object.freeze({ ...limits });
    this.hasher = hasher;
    this.logger = (deps.logger ?? silentLogger).child({
      component: 'stream-subscriber',
      instance: cfg.instanceName,
      dp_rank: cfg.dpRank,
    });
    this.random = deps.random ?? Math.random;
    this.nowMs = deps.nowMs ?? (() => performance.now());
    this.recovery = new RecoverySession(deps.recoveryAdmission, this.logger);
    this.served = new ServedResidency(deps.residencyGroups ?? new ResidencyGroups(), cfg.blockSize, hasher);
    this.decodeOpts = {
      topic: Buffer.from(cfg.topic, 'utf8'),
      dpRank: cfg.dpRank,
      maxMessageBytes: limits.maxMessageBytes,
      historyKindRules: replaysHistory(cfg.engineKind ?? 'xllm'),
    };
    this.buffer = new RecoveryBuffer(limits.maxBufferedBytes);
    this.history = this.decodeOpts.historyKindRules === true ? new HistoryRecovery(this.historyHost()) : null;
    this.counters = newStreamCounters();
    this.reconciliation = new Reconciliation(this.reconcileHost(deps.recoveryAdmission));
    this.lastError = errorText(new ConnectingError(cfg.endpoint));
  }

  /** Creates a stopped subscriber (the content-key hasher is created asynchronously). */
  static async create(cfg: StreamConfig, limits: StreamLimits, deps: StreamSubscriberDeps = {}): Promise<StreamSubscriber> {
    const hasher = await ContentKeyHasher.forSeed(cfg.hashSeed);
    return new StreamSubscriber(cfg, limits, hasher, deps);
  }

  /**
   * Sets the one observer of this stream (the Directory's fan-out, or a test's) and tells it the
   * current state at once. Call before `start`; a second call replaces the first.
   */
  observe(observer: StreamObserver): void {
    if (this.closed) return;
    this.observer = observer;
    observer.stateChanged(this.current, this.lastError, this.last);
  }

  /** Connects the event socket; the stream stays CONNECTING until its connected event. */
  start(): void {
    if (this.socket !== null || this.closed) return;
    const socket = new EventSocket(
      this.config.endpoint,
      this.config.topic,
      {
        onConnected: () => this.onConnected(),
        onDisconnected: () => this.onDisconnected(),
        onMessage: (frames) => this.onMessage(frames),
      },
      this.logger,
    );
    this.socket = socket;
    try {
      socket.start();
    } catch (e: unknown) {
      // zeromq refused the endpoint: stay CONNECTING with the reason (config validation should
      // have caught it; this stream alone is affected).
      this.lastError = errorText(new ConnectingError(`${this.config.endpoint}: ${e instanceof Error ? e.message : String(e)}`));
      this.logger.error({ err: e }, 'event socket connect failed');
    }
  }

  /** Stops everything: sockets closed, timers cleared, no further events. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Listeners first, so none of them sees the stream half closed (e.g. the view drops it).
    const observer = this.observer;
    this.observer = UNOBSERVED;
    observer.streamClosed();
    this.recovery.cancel();
    this.cancelBackoff();
    this.reconciliation.stop(false);
    this.socket?.close();
    this.socket = null;
    this.live = null;
    this.served.close();
  }

  get state(): StreamState {
    return this.current;
  }

  /** `<class>: <detail>` of the latest loss or failure; '' while SYNCHRONIZED. */
  get error(): string {
    return this.lastError;
  }

  /** `last` (§8 `sequence`), −1n when none. */
  get sequence(): bigint {
    return this.last;
  }

  /** The query view: the index only while SYNCHRONIZED, else null. Never a half-built index. */
  get index(): StreamIndex | null {
    return this.current === 'SYNCHRONIZED' ? this.live : null;
  }

  /** §7.4 consecutive-failure count n (diagnostics and tests). */
  get consecutiveFailures(): number {
    return this.backoff.failures;
  }

  toQueryable(): QueryableStream {
    const synchronized = this.current === 'SYNCHRONIZED';
    return {
      instanceName: this.config.instanceName,
      dpRank: this.config.dpRank,
      engineKind: this.config.engineKind,
      blockSize: this.config.blockSize,
      hashSeed: this.config.hashSeed,
      synchronized,
      sequence: this.last,
      error: this.lastError,
      index: synchronized ? this.live : null,
      residency: synchronized ? this.served : null,
    };
  }

  // ---- the state machine ------------------------------------------------------------------

  /**
   * The one place the state changes: checks the move against the §7 table, runs the exit and
   * entry rules, records the error, counts, logs and tells the observer.
   */
  private transition(next: StreamState, error: StreamError | null): void {
    const prev = this.current;
    if (!isAllowedTransition(prev, next)) throw new IllegalTransitionError(prev, next);
    const now = this.nowMs();
    // Exit rules.
    if (prev === 'SYNCHRONIZED') {
      // §7.5: leaving SYNCHRONIZED abandons a check in progress (reconcile_failures).
      if (this.reconciliation.stop(true)) this.observer.reconcileEnded('abandoned');
      this.backoff.onSyncLost(now);
    } else if (prev === 'RECOVERING') {
      this.recovery.cancel();
      this.cancelBackoff();
      this.buffer.clear();
    } else if (prev === 'UNSYNCHRONIZED') {
      this.cancelBackoff();
    }
    if (next !== 'SYNCHRONIZED') this.live = null;
    this.current = next;
    // Entry rules.
    if (next === 'SYNCHRONIZED') {
      this.lastError = '';
      this.backoff.onSynchronized(now);
      this.history?.onSynchronized();
      this.reconciliation.arm();
    } else if (error !== null) {
      this.lastError = errorText(error);
      countSyncLost(this.counters, error.class);
    }
    if (error !== null) this.logger.warn({ from: prev, to: next, error: errorText(error) }, 'stream state');
    else this.logger.info({ from: prev, to: next, sequence: this.last.toString() }, 'stream state');
    // The query view's group first: it is current before any listener runs.
    this.served.serve(next === 'SYNCHRONIZED' ? this.live : null);
    this.observer.stateChanged(next, this.lastError, this.last);
  }

  private onConnected(): void {
    if (this.closed || this.current !== 'CONNECTING') return;
    this.enterRecovering(null, null, false);
  }

  /** §7.4: CONNECTING at once, recovery aborted, index discarded. */
  private onDisconnected(): void {
    if (this.closed || this.current === 'CONNECTING') return;
    if (this.current === 'RECOVERING') this.countFailedRecovery();
    // engines.md §3 rule 4: hidden at once; kept for a resume only with an identity source.
    if (this.history !== null && this.current === 'SYNCHRONIZED') this.history.keepForDisconnect(this.live, this.last);
    else this.history?.discard();
    this.last = -1n;
    this.transition('CONNECTING', new DisconnectedError(this.config.endpoint));
  }

  /** Hot path: one call per live message. No closures, no JSON. */
  private onMessage(frames: readonly Uint8Array[]): void {
    if (this.closed || this.current === 'CONNECTING') return;
    let batch: LiveBatch;
    try {
      const result = decodeLiveMessage(frames, this.decodeOpts);
      if (result.kind === 'topic_mismatch') {
        // §2 check 1: ignored, no seq check.
        this.counters.topicMismatch++;
        return;
      }
      batch = result.batch;
    } catch (e: unknown) {
      this.onBatchError(asStreamError(e));
      return;
    }
    this.onBatch(batch);
  }

  private onBatch(batch: LiveBatch): void {
    switch (this.current) {
      case 'SYNCHRONIZED':
        this.applyLive(batch);
        return;
      case 'RECOVERING':
        this.bufferDuringRecovery(batch);
        return;
      case 'UNSYNCHRONIZED':
        // §7 table: only a full-state batch is used.
        if (isFullStateBatch(batch.events)) this.tryRestore(batch);
        // engines.md §3 rule 3: a vllm/sglang seq 0 is a (re)started engine's first batch.
        else if (this.history !== null && batch.seq === 0n) this.enterRecovering(null, batch, true);
        return;
      case 'CONNECTING':
        return;
      default: {
        const impossible: never = this.current;
        throw new Error(`unknown stream state ${String(impossible)}`);
      }
    }
  }

  private onBatchError(err: StreamError): void {
    switch (this.current) {
      case 'SYNCHRONIZED':
        // §7.1: parse/protocol/limit (decoder) → UNSYNCHRONIZED with that error.
        this.loseSync(err);
        return;
      case 'RECOVERING':
        this.abortRecovery(err);
        return;
      case 'UNSYNCHRONIZED':
        // engines.md §3 rule 6: the real cause stays visible (e.g. a missing dp_rank on xllm).
        this.lastError = errorText(err);
        countSyncLost(this.counters, err.class);
        this.logger.debug({ error: this.lastError }, 'live message failed while not synchronized');
        return;
      case 'CONNECTING':
        this.logger.debug({ error: errorText(err) }, 'live message ignored while not synchronized');
        return;
      default: {
        const impossible: never = this.current;
        throw new Error(`unknown stream state ${String(impossible)}`);
      }
    }
  }

  /** §7.1 while SYNCHRONIZED. */
  private applyLive(batch: LiveBatch): void {
    const live = this.live as StreamIndex;
    const verdict = classifySeq(this.last, batch.seq);
    if (verdict === 'next') {
      try {
        live.applyEvents(batch.events, this.counters.skipped);
      } catch (e: unknown) {
        // Not transactional: the index is discarded by the transition, never served half-applied.
        this.loseSync(asStreamError(e));
        return;
      }
      this.last = batch.seq;
      this.counters.batchesApplied++;
      this.reconciliation.onApplied(batch);
      this.history?.onLiveApplied(batch.seq);
      this.announceBatch();
      return;
    }
    let err: StreamError;
    if (verdict === 'gap') {
      err = gapError(this.last + 1n, batch.seq);
      // engines.md §3 rule 2: repaired from history without discarding the index.
      this.history?.keepForGap(live, this.last);
    } else {
      // A batch a history reconciliation already applied, arriving late: not a restart.
      if (this.history?.isReplayedDuplicate(batch.seq)) return;
      // §7.1: publisher restart: discard the index, then as for a gap.
      err = seqResetError(batch.seq, this.last);
      this.last = -1n;
      this.history?.discard();
    }
    this.enterRecovering(err, batch, false);
  }

  /** SYNCHRONIZED → UNSYNCHRONIZED with `err`, then the §7.4 retry. */
  private loseSync(err: StreamError): void {
    this.transition('UNSYNCHRONIZED', err);
    this.scheduleRetry();
  }

  // ---- recovery (§7.2) ----------------------------------------------------------------------

  /**
   * Enter RECOVERING with an empty buffer (holding `first` when a gap or reset revealed it) and
   * start the exchange, after the §7.4 delay unless `delayPaid` (it was spent in UNSYNCHRONIZED).
   */
  private enterRecovering(err: StreamError | null, first: LiveBatch | null, delayPaid: boolean): void {
    this.transition('RECOVERING', err);
    if (first !== null) {
      this.bufferDuringRecovery(first);
      if (this.current !== 'RECOVERING') return;
    }
    const delay = delayPaid ? 0 : this.backoff.nextDelayMs(this.random);
    if (!delayPaid) this.observer.backoffChosen(delay, this.backoff.failures);
    if (delay <= 0) {
      this.startRecoveryExchange();
      return;
    }
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      if (!this.closed && this.current === 'RECOVERING') this.startRecoveryExchange();
    }, delay);
  }

  /** §7.2 step 1, after a §7.3 restore attempt for full-state batches. */
  private bufferDuringRecovery(batch: LiveBatch): void {
    if (isFullStateBatch(batch.events) && this.tryRestore(batch)) return;
    try {
      this.buffer.push(batch);
    } catch (e: unknown) {
      this.abortRecovery(asStreamError(e));
      return;
    }
    if (this.history !== null && !this.history.hasReplayEndpoint) this.history.onBufferedWithoutEndpoint();
  }

  /** §7.2 step 2, after an admission slot when the directory caps concurrent exchanges. */
  private startRecoveryExchange(): void {
    if (this.recovery.pending) return;
    if (this.history !== null && !this.history.hasReplayEndpoint) {
      // engines.md §3: nothing to ask; the first buffered batch (maybe already here) decides.
      this.history.onBufferedWithoutEndpoint();
      return;
    }
    this.recovery.begin(
      () => !this.closed && this.current === 'RECOVERING',
      () => this.sendRecoveryRequest(),
    );
  }

  private sendRecoveryRequest(): Cancellable | null {
    if (this.history !== null) return this.history.startRecovery();
    const fresh = this.newIndex();
    const skipped = zeroSkips();
    const builder = new SnapshotBuilder(fresh, skipped);
    const ex: SnapshotExchange = SnapshotExchange.start(this.snapshotRequest(), builder, (outcome) =>
      this.onRecoveryExchangeEnd(ex, fresh, skipped, outcome),
    );
    return ex;
  }

  /** §7.2 steps 3–4: dedupe by W, apply the suffix to F, publish F in one assignment. */
  private onRecoveryExchangeEnd(ex: SnapshotExchange, fresh: StreamIndex, skipped: SkipCounters, outcome: SnapshotOutcome): void {
    if (!this.recovery.isCurrent(ex) || this.current !== 'RECOVERING' || this.closed) return;
    this.recovery.ended();
    if (outcome.kind === 'failed') {
      this.abortRecovery(outcome.error);
      return;
    }
    const watermark = outcome.watermark;
    let applied = 0;
    try {
      const suffix = this.buffer.suffixFrom(watermark);
      for (let i = 0; i < suffix.length; i++) {
        fresh.applyEvents(suffix[i].events, skipped);
        applied++;
      }
    } catch (e: unknown) {
      this.abortRecovery(asStreamError(e));
      return;
    }
    this.live = fresh;
    this.last = watermark - 1n + BigInt(applied);
    this.counters.batchesApplied += applied;
    addSkips(this.counters.skipped, skipped);
    this.counters.recoveriesOk++;
    this.transition('SYNCHRONIZED', null);
    this.announceIndex();
  }

  /** RECOVERING → UNSYNCHRONIZED: F and the buffer are discarded (by the transition). */
  private abortRecovery(err: StreamError): void {
    // A history exchange may have applied batches to a kept index: never resume from it.
    this.history?.discard();
    this.countFailedRecovery();
    this.transition('UNSYNCHRONIZED', err);
    this.scheduleRetry();
  }

  private countFailedRecovery(): void {
    this.counters.recoveriesFailed++;
    this.backoff.onRecoveryFailed();
  }

  /** §7.4: UNSYNCHRONIZED → RECOVERING when the delay expires (a 0 delay still yields a tick). */
  private scheduleRetry(): void {
    this.cancelBackoff();
    const delay = this.backoff.nextDelayMs(this.random);
    this.observer.backoffChosen(delay, this.backoff.failures);
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      if (!this.closed && this.current === 'UNSYNCHRONIZED') this.enterRecovering(null, null, true);
    }, delay);
  }

  /**
   * §7.3: apply a full-state batch to an empty index; on success publish it, `last = seq`,
   * cancel exchange/backoff (by the transition), count a restore. Returns false on failure,
   * leaving everything as it was.
   */
  private tryRestore(batch: LiveBatch): boolean {
    const fresh = this.newIndex();
    const skipped = zeroSkips();
    try {
      fresh.applyEvents(batch.events, skipped);
    } catch (e: unknown) {
      this.logger.info({ error: errorText(asStreamError(e)), seq: batch.seq.toString() }, 'full-state batch restored nothing');
      return false;
    }
    this.live = fresh;
    this.last = batch.seq;
    this.counters.batchesApplied++;
    addSkips(this.counters.skipped, skipped);
    this.counters.restores++;
    this.transition('SYNCHRONIZED', null);
    this.announceIndex();
    return true;
  }

  // ---- history replay (engines.md §3, vllm/sglang) ----------------------------------------

  /** The subscriber as the history policy sees it (history-recovery.ts). */
  private historyHost(): HistoryHost {
    return {
      logger: this.logger,
      replayEndpoint: this.config.replayEndpoint,
      identity: this.config.identity,
      decode: this.decodeOpts,
      replayTimeoutMs: this.limits.replayTimeoutMs,
      buffer: this.buffer,
      newIndex: () => this.newIndex(),
      zeroSkips,
      publishRecovered: (index, last, applied, skipped) => {
        this.live = index;
        this.last = last;
        this.counters.batchesApplied += applied;
        addSkips(this.counters.skipped, skipped);
        this.counters.recoveriesOk++;
        this.transition('SYNCHRONIZED', null);
        this.announceIndex();
      },
      abortRecovery: (err) => {
        if (this.current === 'RECOVERING') this.abortRecovery(err);
      },
      historyLost: (err) => this.historyLost(err),
      isCurrent: (ex) => this.recovery.isCurrent(ex) && this.current === 'RECOVERING' && !this.closed,
      exchangeEnded: () => this.recovery.ended(),
    };
  }

  /** The subscriber as its §7.5 check sees it (reconciliation.ts). */
  private reconcileHost(admission: RecoveryAdmission | undefined): ReconcileHost {
    return {
      logger: this.logger,
      limits: this.limits,
      counters: this.counters,
      history: this.history,
      admission,
      synchronized: () => !this.closed && this.current === 'SYNCHRONIZED',
      closed: () => this.closed,
      last: () => this.last,
      live: () => this.live as StreamIndex,
      newIndex: () => this.newIndex(),
      snapshotRequest: () => this.snapshotRequest(),
      replaceIndex: (candidate, last) => {
        this.live = candidate;
        this.last = last;
        this.announceIndex();
      },
      applyInPlace: (batch) => {
        (this.live as StreamIndex).applyEvents(batch.events, this.counters.skipped);
        this.last = batch.seq;
        this.counters.batchesApplied++;
        this.announceBatch();
      },
      loseSync: (err) => this.loseSync(err),
      recover: (err, resetLast) => {
        if (resetLast) this.last = -1n;
        this.enterRecovering(err, null, false);
      },
      historyLost: (err) => this.historyLost(err),
      ended: (outcome) => this.observer.reconcileEnded(outcome),
    };
  }

  /**
   * engines.md §3 rule 1: UNSYNCHRONIZED with `history_lost` until a full-state batch or a
   * restart's seq 0; retried at most every resync_interval_ms (30 s when 0), never with backoff.
   */
  private historyLost(err: HistoryLostError): void {
    if (this.current === 'RECOVERING') this.countFailedRecovery();
    this.last = -1n;
    this.history?.discard();
    this.history?.onSyncLost();
    this.transition('UNSYNCHRONIZED', err);
    this.cancelBackoff();
    if (this.history === null || !this.history.hasReplayEndpoint) return;
    const delay = this.limits.resyncIntervalMs > 0 ? this.limits.resyncIntervalMs : HISTORY_LOST_RETRY_DEFAULT_MS;
    this.observer.backoffChosen(delay, this.backoff.failures);
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      if (!this.closed && this.current === 'UNSYNCHRONIZED') this.enterRecovering(null, null, true);
    }, delay);
  }

  // ---- what the observer is told -----------------------------------------------------------

  /** After one live batch applied in place to the served index. */
  private announceBatch(): void {
    const live = this.live as StreamIndex;
    this.observer.batchApplied(this.last, live.deviceBlocks, live.hostBlocks);
  }

  /** After `live` was swapped in (the transition into SYNCHRONIZED, if any, came first). */
  private announceIndex(): void {
    const live = this.live as StreamIndex;
    this.served.serve(live);
    this.observer.indexReplaced(this.last, this.served, live.exportResidency());
  }

  // ---- helpers ------------------------------------------------------------------------------

  /**
   * A fresh index with one forwarding closure (per index, not per event) that reports to the
   * shared group and the observer only while that index is the one being served.
   */
  private newIndex(): StreamIndex {
    const served = this.served;
    const index: StreamIndex = new StreamIndex({
      blockSize: this.config.blockSize,
      hasher: this.hasher,
      maxEntries: this.limits.maxBlocksPerStream,
      // The group's key ids: every index of every stream of the group shares one copy of a key.
      keySpace: served.group,
      cacheGroup: this.cacheGroup,
      onResidencyChange: (words, offset, oldTiers, newTiers) => {
        if (this.live !== index || this.current !== 'SYNCHRONIZED') return;
        served.change(index, words, offset, newTiers);
        this.observer.residencyChanged(words, offset, oldTiers, newTiers);
      },
    });
    return index;
  }

  private snapshotRequest(): SnapshotRequest {
    return {
      replayEndpoint: this.config.replayEndpoint,
      // §6: start_seq = last + 1, 0 when last = −1.
      startSeq: this.last < 0n ? 0n : this.last + 1n,
      dpRank: this.config.dpRank,
      blockSize: this.config.blockSize,
      maxMessageBytes: this.limits.maxMessageBytes,
      timeoutMs: this.limits.replayTimeoutMs,
    };
  }

  private cancelBackoff(): void {
    if (this.backoffTimer !== null) clearTimeout(this.backoffTimer);
    this.backoffTimer = null;
  }
}
