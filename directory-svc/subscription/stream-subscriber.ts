/**
 * The per-stream subscriber of kv-events §7: one SUB on the event endpoint, snapshot recovery on
 * fresh DEALERs, the §7 state machine, full-state restores (§7.3), backoff (§7.4) and periodic
 * reconciliation (§7.5). Its one promise: never credit a stale cache. Only SYNCHRONIZED serves
 * an index, and every index it serves was built beside the old one and swapped in by a single
 * reference assignment (§7.2 step 4), so a reader sees the old view or the new one.
 *
 * Edge module: owns sockets and timers, calls the pure core (decoder, index, sequence rules,
 * recovery buffer, backoff). Every move goes through `transition`, which checks the §7 table.
 *
 * Decisions where the spec is silent:
 * - `sync_lost{class}` counts every failure recorded in `error` (losses of SYNCHRONIZED and
 *   aborted recoveries), so `timeout` and recovery-time `limit` are visible too.
 * - A gap keeps `last` (it is the `start_seq` basis); a seq reset and a disconnect set it to −1.
 * - In RECOVERING a full-state batch is tried on arrival (before the seq and budget checks of
 *   §7.2), so a restore after a publisher restart never depends on the old buffer.
 * - Live-message errors in UNSYNCHRONIZED are logged only: the stream already lost sync.
 * - A disconnect during RECOVERING counts as an aborted recovery (§7.4 "aborts recovery").
 * - Exceeding `max_buffered_bytes` with the reconciliation copy counts `reconcile_failures`.
 * - With `deps.recoveryAdmission` (our `max_concurrent_recoveries`, beyond §9), a RECOVERING
 *   stream waits for a directory-wide slot before sending its request; `replay_timeout_ms`
 *   starts at the request (§6), so queueing never counts toward it. While queued the stream
 *   buffers live batches as in §7.2 step 1; leaving RECOVERING (restore, full buffer,
 *   disconnect) or close cancels the wait. A §7.5 check that finds no free slot is skipped
 *   until the next interval (not a reconcile failure): reconciliations never queue behind
 *   recoveries. Each slot is released when its exchange ends or is cancelled.
 */
import { EventEmitter } from 'node:events';
import { replaysHistory } from '../../shared/config/engine-kind.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import type { EngineIdentitySource } from '../engines/engine-identity.js';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { Logger } from '../../shared/log/logger.js';
import { isFullStateBatch } from '../decoder/kv-batch.js';
import type { LiveBatch } from '../decoder/kv-batch.js';
import { decodeLiveMessage } from '../decoder/live-frame-decoder.js';
import type { LiveDecoderOptions } from '../decoder/live-frame-decoder.js';
import { ConnectingError, DisconnectedError, ParseError, isStreamError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { ServedResidency } from '../index/served-residency.js';
import { StreamIndex } from '../index/stream-index.js';
import type { ResidencyObserver, SkipCounters } from '../index/stream-index.js';
import type { QueryableStream } from '../index/stream-query.js';
import { RecoveryBackoff } from '../recovery/backoff.js';
import { isAdmissionCancelled } from '../recovery/recovery-admission.js';
import type { RecoveryAdmission, ReleaseSlot } from '../recovery/recovery-admission.js';
import { RecoveryBuffer } from '../recovery/recovery-buffer.js';
import { SnapshotBuilder } from '../recovery/snapshot-builder.js';
import { SnapshotExchange } from '../recovery/snapshot-exchange.js';
import type { SnapshotOutcome, SnapshotRequest } from '../recovery/snapshot-exchange.js';
import type { HistoryLostError } from '../errors/stream-errors.js';
import { EventSocket } from './event-socket.js';
import { HISTORY_LOST_RETRY_DEFAULT_MS, HistoryRecovery } from './history-recovery.js';
import type { Cancellable, HistoryHost } from './history-recovery.js';
import { classifySeq, gapError, seqResetError } from './sequence-rules.js';
import { IllegalTransitionError, isAllowedTransition } from './stream-state.js';
import type { StreamState } from './stream-state.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';

/** One stream (§9 static `streams` entry, or derived from discovery). */
export interface StreamConfig {
  instanceName: string;
  dpRank: number;
  blockSize: number;
  /** Event endpoint, connectable `tcp://host:port` (§1). */
  endpoint: string;
  /** Snapshot endpoint, connectable `tcp://host:port` (§1). */
  replayEndpoint: string;
  /** Exact frame-0 topic (§2); '' by default. */
  topic: string;
  /** Content-key seed (§4), default 1024. */
  hashSeed: bigint;
  /** engines.md §1; absent = xllm. vllm/sglang recover from history (history-recovery.ts). */
  engineKind?: EngineKind;
  /** engines.md §3 rule 4: lets a vllm/sglang stream resume its index after a reconnect. */
  identity?: EngineIdentitySource;
}

/** Per-stream counters of §10 (labels `instance`, `dp_rank` are added by the metrics wrapper). */
export interface StreamCounters {
  batchesApplied: number;
  topicMismatch: number;
  skipped: SkipCounters;
  /** Keyed by StreamError class. */
  syncLost: Record<string, number>;
  recoveriesOk: number;
  recoveriesFailed: number;
  restores: number;
  silentLoss: number;
  reconcileFailures: number;
}

export interface StreamSubscriberDeps {
  logger?: Logger;
  /** [0, 1) source for the §7.4 jitter; injected by tests. */
  random?: () => number;
  /** Monotonic clock for the §7.4 10 s stability window (default performance.now); injected by tests. */
  nowMs?: () => number;
  /**
   * Residency changes of the SERVED index only (view deltas): changes while building F, a
   * restore or a reconciliation candidate are never reported; their publication is a 'view'
   * event of kind 'reset', after which the whole index replaces the stream's residency. Leaving
   * SYNCHRONIZED (a 'state' event) empties the stream's residency, including any change
   * reported by a batch that then failed part-way (§5.2: partial effects are never served).
   */
  onResidencyChange?: ResidencyObserver;
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

/** 'batch': one live batch applied in place; 'reset': a new index swapped in (§7.2–§7.5). */
export type ViewChange = 'batch' | 'reset';

/** §7.5 check in progress: the snapshot exchange, then the wait for `last ≥ W − 1`. */
interface ReconcileCheck {
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

function zeroSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

function addSkips(into: SkipCounters, from: SkipCounters): void {
  into.outOfScope += from.outOfScope;
  into.descendant += from.descendant;
  into.orphan += from.orphan;
  if (from.medium !== undefined) into.medium = (into.medium ?? 0) + from.medium;
}

function releaseCheckSlot(check: ReconcileCheck): void {
  const release = check.releaseSlot;
  check.releaseSlot = null;
  release?.();
}

/** `<class>: <detail>` (§10), built from the two stable fields. */
function errorText(err: StreamError): string {
  return `${err.class}: ${err.detail}`;
}

/** Index and decoder throw StreamErrors; anything else is a bug, surfaced as `parse`, never a crash. */
function asStreamError(e: unknown): StreamError {
  if (isStreamError(e)) return e;
  return new ParseError(`unexpected failure: ${e instanceof Error ? e.message : String(e)}`);
}

/** Outcome of one §7.5 check, emitted as 'reconcile' (metrics, logs, tests). */
export type ReconcileOutcome = 'equal' | 'replaced' | 'lost' | 'abandoned' | 'failed';

/**
 * Events: 'state' (state, error) on every transition; 'view' (ViewChange) after each applied
 * batch ('batch') or atomic swap ('reset'; the 'state' event entering SYNCHRONIZED comes first);
 * 'backoff' (delayMs, failures) when a §7.4 delay is chosen; 'reconcile' (outcome) when a
 * §7.5 check ends ('equal', 'replaced' = silent loss found, 'lost' = not reached, 'abandoned' =
 * reconcile_failures, 'failed' = the reply's error moved the stream out of SYNCHRONIZED).
 */
export class StreamSubscriber extends EventEmitter {
  readonly config: StreamConfig;
  readonly limits: StreamLimits;
  readonly counters: StreamCounters;

  private readonly hasher: ContentKeyHasher;
  private readonly logger: Logger;
  private readonly random: () => number;
  private readonly nowMs: () => number;
  private readonly residencyObserver: ResidencyObserver | undefined;
  private readonly admission: RecoveryAdmission | undefined;
  /** The served index's residency in the shared group (the §8 query view). */
  private readonly served: ServedResidency;
  private readonly decodeOpts: LiveDecoderOptions;
  private readonly backoff = new RecoveryBackoff();
  private readonly buffer: RecoveryBuffer;

  private current: StreamState = 'CONNECTING';
  private lastError: string;
  /** `last` of §7: seq of the last batch reflected in the live index, −1n when none. */
  private last = -1n;
  /** The index built for SYNCHRONIZED; never exposed in any other state. */
  private live: StreamIndex | null = null;
  private socket: EventSocket | null = null;
  private exchange: Cancellable | null = null;
  /** vllm/sglang streams (engines.md §3): the history-replay policy; null for xllm. */
  private readonly history: HistoryRecovery | null;
  /** A rule 5 history reconciliation in flight, with its admission slot. */
  private historyCheck: { ex: Cancellable | null; releaseSlot: ReleaseSlot | null } | null = null;
  /** Set while RECOVERING waits for an admission slot; aborting it leaves the queue. */
  private admissionWait: AbortController | null = null;
  /** The admission slot held by the recovery exchange (granted, not yet released). */
  private recoverySlot: ReleaseSlot | null = null;
  /** §7.4 delay: before the request in RECOVERING, or before leaving UNSYNCHRONIZED. */
  private backoffTimer: NodeJS.Timeout | null = null;
  private resyncTimer: NodeJS.Timeout | null = null;
  private reconcile: ReconcileCheck | null = null;
  private closed = false;

  private constructor(cfg: StreamConfig, limits: StreamLimits, hasher: ContentKeyHasher, deps: StreamSubscriberDeps) {
    super();
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
    this.residencyObserver = deps.onResidencyChange;
    this.admission = deps.recoveryAdmission;
    this.served = new ServedResidency(deps.residencyGroups ?? new ResidencyGroups(), cfg.blockSize, hasher);
    // The group follows the served index as the view stream does: a reset on every swap, empty
    // outside SYNCHRONIZED. Registered first, so it is current before any other listener runs
    // (entering SYNCHRONIZED, `live` is already the index about to be announced by 'reset').
    this.on('state', (state: StreamState) => {
      this.served.serve(state === 'SYNCHRONIZED' ? this.live : null);
    });
    this.on('view', (change: ViewChange) => {
      if (change === 'reset') this.served.serve(this.live);
    });
    this.decodeOpts = {
      topic: Buffer.from(cfg.topic, 'utf8'),
      dpRank: cfg.dpRank,
      maxMessageBytes: limits.maxMessageBytes,
      historyKindRules: replaysHistory(cfg.engineKind ?? 'xllm'),
    };
    this.buffer = new RecoveryBuffer(limits.maxBufferedBytes);
    this.history = this.decodeOpts.historyKindRules === true ? new HistoryRecovery(this.historyHost()) : null;
    this.counters = {
      batchesApplied: 0,
      topicMismatch: 0,
      skipped: zeroSkips(),
      syncLost: {},
      recoveriesOk: 0,
      recoveriesFailed: 0,
      restores: 0,
      silentLoss: 0,
      reconcileFailures: 0,
    };
    this.lastError = errorText(new ConnectingError(cfg.endpoint));
  }

  /** Creates a stopped subscriber (the content-key hasher is created asynchronously). */
  static async create(cfg: StreamConfig, limits: StreamLimits, deps: StreamSubscriberDeps = {}): Promise<StreamSubscriber> {
    const hasher = await ContentKeyHasher.forSeed(cfg.hashSeed);
    return new StreamSubscriber(cfg, limits, hasher, deps);
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
    this.cancelExchange();
    this.cancelBackoff();
    this.cancelReconcile(false);
    this.clearResyncTimer();
    this.socket?.close();
    this.socket = null;
    this.live = null;
    this.served.close();
    this.removeAllListeners();
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
   * entry rules, records the error, counts, logs and emits 'state'.
   */
  private transition(next: StreamState, error: StreamError | null): void {
    const prev = this.current;
    if (!isAllowedTransition(prev, next)) throw new IllegalTransitionError(prev, next);
    const now = this.nowMs();
    // Exit rules.
    if (prev === 'SYNCHRONIZED') {
      this.clearResyncTimer();
      // §7.5: leaving SYNCHRONIZED abandons a check in progress (reconcile_failures).
      if (this.reconcile !== null || this.historyCheck !== null) {
        this.cancelReconcile(true);
        this.emit('reconcile', 'abandoned');
      }
      this.backoff.onSyncLost(now);
    } else if (prev === 'RECOVERING') {
      this.cancelExchange();
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
      this.armResync();
    } else if (error !== null) {
      this.lastError = errorText(error);
      this.counters.syncLost[error.class] = (this.counters.syncLost[error.class] ?? 0) + 1;
    }
    if (error !== null) this.logger.warn({ from: prev, to: next, error: errorText(error) }, 'stream state');
    else this.logger.info({ from: prev, to: next, sequence: this.last.toString() }, 'stream state');
    this.emit('state', next, this.lastError);
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
        this.counters.syncLost[err.class] = (this.counters.syncLost[err.class] ?? 0) + 1;
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
      if (this.reconcile !== null) this.reconcileOnApplied(this.reconcile, batch);
      this.history?.onLiveApplied(batch.seq);
      this.emit('view', 'batch');
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
    if (!delayPaid) this.emit('backoff', delay, this.backoff.failures);
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
    if (this.exchange !== null || this.admissionWait !== null) return;
    if (this.history !== null && !this.history.hasReplayEndpoint) {
      // engines.md §3: nothing to ask; the first buffered batch (maybe already here) decides.
      this.history.onBufferedWithoutEndpoint();
      return;
    }
    const admission = this.admission;
    if (admission === undefined) {
      this.sendRecoveryRequest();
      return;
    }
    const wait = new AbortController();
    this.admissionWait = wait;
    admission.acquire(wait.signal).then(
      (release) => this.onAdmitted(wait, release),
      (e: unknown) => {
        if (!isAdmissionCancelled(e)) this.logger.error({ err: e }, 'snapshot admission failed');
      },
    );
  }

  /** A slot was granted; one no longer wanted (wait cancelled meanwhile) goes straight back. */
  private onAdmitted(wait: AbortController, release: ReleaseSlot): void {
    if (this.admissionWait !== wait || this.closed || this.current !== 'RECOVERING') {
      release();
      return;
    }
    this.admissionWait = null;
    this.recoverySlot = release;
    this.sendRecoveryRequest();
  }

  private sendRecoveryRequest(): void {
    if (this.history !== null) {
      this.exchange = this.history.startRecovery();
      return;
    }
    const fresh = this.newIndex();
    const skipped = zeroSkips();
    const builder = new SnapshotBuilder(fresh, skipped);
    const ex = SnapshotExchange.start(this.snapshotRequest(), builder, (outcome) =>
      this.onRecoveryExchangeEnd(ex, fresh, skipped, outcome),
    );
    this.exchange = ex;
  }

  /** §7.2 steps 3–4: dedupe by W, apply the suffix to F, publish F in one assignment. */
  private onRecoveryExchangeEnd(ex: SnapshotExchange, fresh: StreamIndex, skipped: SkipCounters, outcome: SnapshotOutcome): void {
    if (this.exchange !== ex || this.current !== 'RECOVERING' || this.closed) return;
    this.exchange = null;
    this.releaseRecoverySlot();
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
    this.emit('view', 'reset');
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
    this.emit('backoff', delay, this.backoff.failures);
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
    this.emit('view', 'reset');
    return true;
  }

  // ---- reconciliation (§7.5) ----------------------------------------------------------------

  private armResync(): void {
    this.clearResyncTimer();
    if (this.limits.resyncIntervalMs <= 0 || this.closed) return;
    // engines.md §3: no replay endpoint, no reconciliation.
    if (this.history !== null && !this.history.reconciles) return;
    this.resyncTimer = setTimeout(() => {
      this.resyncTimer = null;
      this.startReconcile();
    }, this.limits.resyncIntervalMs);
  }

  private startReconcile(): void {
    if (this.closed || this.current !== 'SYNCHRONIZED' || this.reconcile !== null || this.historyCheck !== null) return;
    let releaseSlot: ReleaseSlot | null = null;
    if (this.admission !== undefined) {
      // Never queue a check behind recoveries: no free slot now, try again next interval.
      releaseSlot = this.admission.tryAcquire();
      if (releaseSlot === null) {
        this.logger.debug({ in_use: this.admission.inUse, queued: this.admission.queued }, 'reconciliation skipped: no snapshot slot free');
        this.armResync();
        return;
      }
    }
    if (this.history !== null) {
      this.startHistoryReconcile(this.history, releaseSlot);
      return;
    }
    const candidate = this.newIndex();
    const skipped = zeroSkips();
    const check: ReconcileCheck = {
      l0: this.last,
      candidate,
      skipped,
      copy: new RecoveryBuffer(this.limits.maxBufferedBytes),
      exchange: null,
      releaseSlot,
      watermark: null,
      waitTimer: null,
    };
    this.reconcile = check;
    check.exchange = SnapshotExchange.start(this.snapshotRequest(), new SnapshotBuilder(candidate, skipped), (outcome) =>
      this.onReconcileExchangeEnd(check, outcome),
    );
  }

  /** §7.5 step 1: copy each batch applied while the check runs; step 3: maybe `last ≥ W − 1` now. */
  private reconcileOnApplied(check: ReconcileCheck, batch: LiveBatch): void {
    try {
      check.copy.push(batch);
    } catch (e: unknown) {
      this.logger.info({ error: errorText(asStreamError(e)) }, 'reconciliation abandoned');
      this.endReconcile('abandoned');
      return;
    }
    if (check.watermark !== null && this.last >= check.watermark - 1n) this.reconcileReached(check);
  }

  private onReconcileExchangeEnd(check: ReconcileCheck, outcome: SnapshotOutcome): void {
    if (this.reconcile !== check || this.current !== 'SYNCHRONIZED' || this.closed) return;
    check.exchange = null;
    // The exchange is over: the step 3 wait holds no snapshot traffic.
    releaseCheckSlot(check);
    if (outcome.kind === 'failed') {
      if (outcome.error.class === 'timeout') {
        this.logger.info({ error: errorText(outcome.error) }, 'reconciliation abandoned');
        this.endReconcile('abandoned');
      } else {
        // §7.5 step 2: parse/protocol/limit in the reply → UNSYNCHRONIZED with it.
        this.endReconcile('failed');
        this.loseSync(outcome.error);
      }
      return;
    }
    const watermark = outcome.watermark;
    if (watermark - 1n < check.l0) {
      // §7.5 step 2: the publisher's state predates what we applied: a restart (§7.1).
      this.endReconcile('failed');
      const err = seqResetError(watermark - 1n, check.l0);
      this.last = -1n;
      this.enterRecovering(err, null, false);
      return;
    }
    check.watermark = watermark;
    if (this.last >= watermark - 1n) {
      this.reconcileReached(check);
      return;
    }
    check.waitTimer = setTimeout(() => {
      check.waitTimer = null;
      if (this.reconcile === check && this.current === 'SYNCHRONIZED') this.reconcileNotReached(check);
    }, this.limits.replayTimeoutMs);
  }

  /** §7.5 step 3, reached: bring C up to `last`, compare, swap only when they differ. */
  private reconcileReached(check: ReconcileCheck): void {
    const watermark = check.watermark as bigint;
    const candidate = check.candidate;
    const copied = check.copy.batches;
    try {
      for (let i = 0; i < copied.length; i++) {
        if (copied[i].seq >= watermark) candidate.applyEvents(copied[i].events, check.skipped);
      }
    } catch (e: unknown) {
      this.endReconcile('failed');
      this.enterRecovering(asStreamError(e), null, false);
      return;
    }
    const live = this.live as StreamIndex;
    if (!candidate.sameStateAs(live)) {
      this.live = candidate;
      addSkips(this.counters.skipped, check.skipped);
      this.counters.silentLoss++;
      this.logger.warn({ sequence: this.last.toString() }, 'reconciliation found silent loss; index replaced');
      this.emit('view', 'reset');
      this.endReconcile('replaced');
      return;
    }
    this.endReconcile('equal');
  }

  /** §7.5 step 3, not reached: batches last+1 … W−1 were lost. */
  private reconcileNotReached(check: ReconcileCheck): void {
    const watermark = check.watermark as bigint;
    const lostFrom = this.last + 1n;
    this.live = check.candidate;
    this.last = watermark - 1n;
    addSkips(this.counters.skipped, check.skipped);
    this.counters.silentLoss++;
    this.logger.warn({ lost_from: lostFrom.toString(), lost_to: this.last.toString() }, 'reconciliation found lost batches; index replaced');
    this.emit('view', 'reset');
    this.endReconcile('lost');
  }

  /** Ends the current check; re-arms the period while still SYNCHRONIZED. */
  private endReconcile(outcome: ReconcileOutcome): void {
    this.cancelReconcile(outcome === 'abandoned');
    if (this.current === 'SYNCHRONIZED') this.armResync();
    this.emit('reconcile', outcome);
  }

  private cancelReconcile(countFailure: boolean): void {
    const hc = this.historyCheck;
    if (hc !== null) {
      this.historyCheck = null;
      hc.ex?.cancel();
      hc.releaseSlot?.();
      if (countFailure) this.counters.reconcileFailures++;
    }
    const check = this.reconcile;
    if (check === null) return;
    this.reconcile = null;
    check.exchange?.cancel();
    check.exchange = null;
    releaseCheckSlot(check);
    if (check.waitTimer !== null) clearTimeout(check.waitTimer);
    check.waitTimer = null;
    if (countFailure) this.counters.reconcileFailures++;
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
        this.emit('view', 'reset');
      },
      abortRecovery: (err) => {
        if (this.current === 'RECOVERING') this.abortRecovery(err);
      },
      historyLost: (err) => this.historyLost(err),
      isCurrent: (ex) => this.exchange === ex && this.current === 'RECOVERING' && !this.closed,
      exchangeEnded: () => {
        this.exchange = null;
        this.releaseRecoverySlot();
      },
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
    this.emit('backoff', delay, this.backoff.failures);
    this.backoffTimer = setTimeout(() => {
      this.backoffTimer = null;
      if (!this.closed && this.current === 'UNSYNCHRONIZED') this.enterRecovering(null, null, true);
    }, delay);
  }

  /** engines.md §3 rule 5: request last + 1; unseen tail batches are applied in place. */
  private startHistoryReconcile(history: HistoryRecovery, releaseSlot: ReleaseSlot | null): void {
    const check: { ex: Cancellable | null; releaseSlot: ReleaseSlot | null } = { ex: null, releaseSlot };
    this.historyCheck = check;
    check.ex = history.startReconcile(
      () => this.last,
      (batch) => {
        (this.live as StreamIndex).applyEvents(batch.events, this.counters.skipped);
        this.last = batch.seq;
        this.counters.batchesApplied++;
        this.emit('view', 'batch');
      },
      (result) => {
        if (this.historyCheck !== check || this.closed || this.current !== 'SYNCHRONIZED') return;
        this.historyCheck = null;
        check.releaseSlot?.();
        if (result.kind === 'equal' || result.kind === 'replaced') {
          if (result.kind === 'replaced') {
            this.counters.silentLoss++;
            this.logger.warn({ sequence: this.last.toString() }, 'reconciliation found unseen history batches; applied');
          }
          this.armResync();
          this.emit('reconcile', result.kind);
        } else if (result.kind === 'failed' && result.error.class === 'timeout') {
          this.counters.reconcileFailures++;
          this.armResync();
          this.emit('reconcile', 'abandoned');
        } else {
          this.emit('reconcile', 'failed');
          if (result.kind === 'lost') this.historyLost(result.error);
          else if (result.kind === 'failed') this.loseSync(result.error);
        }
      },
    );
  }

  // ---- helpers ------------------------------------------------------------------------------

  /**
   * A fresh index with one forwarding closure (per index, not per event) that reports to the
   * shared group and the residency observer only while that index is the one being served.
   */
  private newIndex(): StreamIndex {
    const observer = this.residencyObserver;
    const served = this.served;
    const index: StreamIndex = new StreamIndex({
      blockSize: this.config.blockSize,
      hasher: this.hasher,
      maxEntries: this.limits.maxBlocksPerStream,
      // The group's key ids: every index of every stream of the group shares one copy of a key.
      keySpace: served.group,
      onResidencyChange: (words, offset, oldTiers, newTiers) => {
        if (this.live !== index || this.current !== 'SYNCHRONIZED') return;
        served.change(index, words, offset, newTiers);
        observer?.(words, offset, oldTiers, newTiers);
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

  /** Cancels the recovery exchange or the wait for its slot, and releases any slot held. */
  private cancelExchange(): void {
    this.exchange?.cancel();
    this.exchange = null;
    if (this.admissionWait !== null) {
      this.admissionWait.abort();
      this.admissionWait = null;
    }
    this.releaseRecoverySlot();
  }

  private releaseRecoverySlot(): void {
    const release = this.recoverySlot;
    this.recoverySlot = null;
    release?.();
  }

  private cancelBackoff(): void {
    if (this.backoffTimer !== null) clearTimeout(this.backoffTimer);
    this.backoffTimer = null;
  }

  private clearResyncTimer(): void {
    if (this.resyncTimer !== null) clearTimeout(this.resyncTimer);
    this.resyncTimer = null;
  }
}
