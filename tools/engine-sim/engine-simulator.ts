/**
 * An xLLM-compatible fake engine: one instance with `dpSize` DP ranks, each a block pool
 * (simulated KV cache) behind a RankPublisher speaking kv-events over real ZeroMQ (§1, §11).
 * Rank r binds events at `eventPortBase + r` and snapshots at `replayPortBase + r` (§1, §11.1).
 *
 * Only the KV event side exists so far; the control side (etcd registration, heartbeats, HTTP
 * /health, the OpenAI endpoint) will hang off this class, which is why it owns the instance
 * identity and the rank list rather than the ranks living on their own.
 */
import { silentLogger, type Logger } from '../../shared/log/logger.js';
import { BlockPool, type AdmitOptions, type AdmitResult, type OffloadMode } from './block-pool.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { replaysHistory } from '../../shared/config/engine-kind.js';
import type { ReplayLayout } from './history-buffer.js';
import { RankPublisher } from './rank-publisher.js';
import type { BatchForm } from './wire-encoding.js';
import { SimClosedError } from './sim-errors.js';
import type { WireEvent } from './wire-types.js';

export interface EngineSimulatorOptions {
  instanceName: string;
  /** DP ranks, ≥ 1. Default 1. */
  dpSize?: number;
  blockSize: number;
  /** Rank r binds its PUB at eventPortBase + r (§1). */
  eventPortBase: number;
  /** Rank r binds its ROUTER at replayPortBase + r (§1). */
  replayPortBase: number;
  /** Frame 0 of every live message (§2). Default ''. */
  topic?: string;
  /** Per rank. */
  deviceCapacityBlocks: number;
  /** Per rank; 0 (default) disables Host offload. */
  hostCapacityBlocks?: number;
  /** Interface to bind; default 127.0.0.1. */
  host?: string;
  /** §9; default 8 MiB. */
  maxMessageBytes?: number;
  /** ZMQ_SNDHWM of each event socket; default 1000. */
  sendHighWaterMark?: number;
  /** Default `sync` (see BlockPool). */
  offloadMode?: OffloadMode;
  /** A hybrid model: group 1's sliding window in tokens (BlockPool); 0 or absent = one group. */
  slidingWindowTokens?: number;
  /**
   * §11.7 SHOULD: publish `[AllBlocksCleared]` as batch 0 of each rank. Default true for xllm,
   * false for vllm/sglang (those engines publish nothing until their first cache change).
   */
  startupClear?: boolean;
  /** engines.md §5 `--engine_kind`. Default xllm. */
  engineKind?: EngineKind;
  /** vllm/sglang: `--batch_encoding` and `--omit_dp_rank`. */
  batchForm?: BatchForm;
  /** vllm/sglang: `--replay_buffer_steps`. */
  replayBufferSteps?: number;
  /** vllm/sglang: `--replay_layout`. */
  replayLayout?: ReplayLayout;
  logger?: Logger;
}

export interface PublishedStep extends AdmitResult {
  /** Seqs of the batches carrying the step's events (none when there were no events). */
  seqs: bigint[];
}

/** One DP rank: its pool and its publisher, kept in step. */
export class SimulatedRank {
  private constructor(
    readonly dpRank: number,
    readonly pool: BlockPool,
    readonly publisher: RankPublisher,
    private readonly startupClear: boolean,
  ) {
    // §11.8: snapshots come from the pool's current state, read synchronously per request.
    publisher.setSnapshotSource(() => pool.snapshot());
  }

  static async start(opts: EngineSimulatorOptions, dpRank: number): Promise<SimulatedRank> {
    const pool = new BlockPool({
      blockSize: opts.blockSize,
      deviceCapacityBlocks: opts.deviceCapacityBlocks,
      hostCapacityBlocks: opts.hostCapacityBlocks ?? 0,
      offloadMode: opts.offloadMode,
      slidingWindowTokens: opts.slidingWindowTokens,
    });
    const publisher = await RankPublisher.start({
      host: opts.host,
      eventPort: opts.eventPortBase + dpRank,
      replayPort: opts.replayPortBase + dpRank,
      dpRank,
      topic: opts.topic,
      blockSize: opts.blockSize,
      maxMessageBytes: opts.maxMessageBytes,
      sendHighWaterMark: opts.sendHighWaterMark,
      engineKind: opts.engineKind,
      batchForm: opts.batchForm,
      replayBufferSteps: opts.replayBufferSteps,
      replayLayout: opts.replayLayout,
      logger: opts.logger,
    });
    const startupClear = opts.startupClear ?? !replaysHistory(opts.engineKind ?? 'xllm');
    const rank = new SimulatedRank(dpRank, pool, publisher, startupClear);
    await rank.publishStartup();
    return rank;
  }

  /**
   * One prefill on this rank: the pool changes and the step's events go out as one batch (more
   * only when max_message_bytes forces a split, §11.3). The pool change and the seq allocation
   * happen together before any await, so snapshots stay exact (§11.8).
   */
  async admitPrompt(tokenIds: readonly number[], opts: AdmitOptions = {}): Promise<PublishedStep> {
    const result = this.pool.admitPrompt(tokenIds, opts);
    const seqs = await this.publisher.publishSplit(result.events);
    return { ...result, seqs };
  }

  /**
   * §11.7 cache reset of both tiers (null) or one. With null the batch is `[AllBlocksCleared]`,
   * a full-state batch (kv-events §7.3): what vLLM's `/reset_prefix_cache` publishes, and how an
   * operator clears `history_lost` (engines.md §3 rule 1).
   */
  clear(medium: 'gpu' | 'cpu' | null = null): Promise<bigint[]> {
    return this.publisher.publishSplit(this.pool.clear(medium));
  }

  /** §7.3: publish the whole state as one full-state batch (split only if it must be). */
  publishFullState(): Promise<bigint[]> {
    return this.publisher.publishSplit(this.pool.fullStateEvents());
  }

  /** Publish events the pool did not produce (they do not change the pool). */
  publishEvents(events: readonly WireEvent[]): Promise<bigint[]> {
    return this.publisher.publishSplit(events);
  }

  /**
   * A new engine process on the same ports (§2: seq restarts at 0). Without `keepState` the
   * cache starts empty; with it the cache survived (e.g. a sidecar restart) and batch 0 is a
   * full-state batch (§7.3) instead of a bare clear.
   */
  async restart(opts: { keepState?: boolean } = {}): Promise<void> {
    await this.publisher.restart({ keepState: opts.keepState });
    if (!opts.keepState) this.pool.reset();
    await this.publishStartup();
  }

  close(): Promise<void> {
    return this.publisher.close();
  }

  private async publishStartup(): Promise<void> {
    if (this.pool.deviceBlocks + this.pool.hostBlocks > 0) await this.publishFullState();
    else if (this.startupClear) await this.publisher.publish([{ type: 'AllBlocksCleared', medium: null }]);
  }
}

export class EngineSimulator {
  readonly instanceName: string;
  readonly dpSize: number;
  readonly blockSize: number;
  private closed = false;
  /** Next rank `admitPrompt` places a request on (round-robin, like an engine's DP dispatcher). */
  private nextRank = 0;

  private constructor(
    opts: EngineSimulatorOptions,
    private readonly ranks: readonly SimulatedRank[],
    private readonly log: Logger,
  ) {
    this.instanceName = opts.instanceName;
    this.dpSize = ranks.length;
    this.blockSize = opts.blockSize;
  }

  /** Bind every rank's sockets and publish each rank's batch 0. */
  static async start(opts: EngineSimulatorOptions): Promise<EngineSimulator> {
    const dpSize = opts.dpSize ?? 1;
    if (!Number.isInteger(dpSize) || dpSize < 1) throw new RangeError(`dpSize must be a positive integer, got ${dpSize}`);
    const log = (opts.logger ?? silentLogger).child({ component: 'engine-sim', instance: opts.instanceName });
    const ranks: SimulatedRank[] = [];
    try {
      for (let r = 0; r < dpSize; r++) ranks.push(await SimulatedRank.start({ ...opts, logger: log }, r));
    } catch (e) {
      await Promise.allSettled(ranks.map((rank) => rank.close()));
      throw e;
    }
    log.info({ dp_size: dpSize, event_port_base: opts.eventPortBase, replay_port_base: opts.replayPortBase }, 'engine simulator started');
    return new EngineSimulator(opts, ranks, log);
  }

  rank(dpRank: number): SimulatedRank {
    if (this.closed) throw new SimClosedError(`engine simulator ${this.instanceName} is closed`);
    const r = this.ranks[dpRank];
    if (r === undefined) throw new RangeError(`dp rank ${dpRank} out of range 0..${this.dpSize - 1}`);
    return r;
  }

  /**
   * One request's prefill on the instance: the engine, not the router, picks the DP rank
   * (routing.md: the router chooses an instance, not its rank), here round-robin. Used by the
   * simulator's OpenAI endpoint so a routed prompt becomes resident and is published.
   */
  admitPrompt(tokenIds: readonly number[], opts: AdmitOptions = {}): Promise<PublishedStep> {
    const r = this.nextRank;
    this.nextRank = (r + 1) % this.dpSize;
    return this.rank(r).admitPrompt(tokenIds, opts);
  }

  /** Every rank's event endpoint, rank order (connectable, §1). */
  get eventEndpoints(): string[] {
    return this.ranks.map((r) => r.publisher.eventEndpoint);
  }

  /** Every rank's snapshot endpoint, rank order. */
  get replayEndpoints(): string[] {
    return this.ranks.map((r) => r.publisher.replayEndpoint);
  }

  /** A process restart: every rank restarts (seq 0), empty unless `keepState`. */
  async restart(opts: { keepState?: boolean } = {}): Promise<void> {
    for (const r of this.ranks) await r.restart(opts);
    this.log.info({ keep_state: opts.keepState ?? false }, 'engine simulator restarted');
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled(this.ranks.map((r) => r.close()));
  }
}
