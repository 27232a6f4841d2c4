// Shared setup of the kv-events protocol suites: one StreamSubscriber against one engine-simulator
// RankPublisher over real TCP ZeroMQ sockets on free ports, with a log of every state and view
// change so a suite can check, after the fact, that no index was ever served outside
// SYNCHRONIZED (kv-events §7, §8). The member API is the one the R1–R12 suite's in-file Rig
// grew, so that suite can move here unchanged.
//
//   StreamSubscriber SUB  ◀──[topic, seq, batch]──  XPUB  RankPublisher (eventPort)
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER (replayPort)
//                           ◀──["", W, chunk]… ["", ff×8, ""]──
//
// Hits are read two ways: `hits`/`tierHits` walk the served index directly (blocks), `query`
// goes through StreamQuery so the routing.md JSON entry is what a suite asserts.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import type { ResidencyObserver } from '../../directory-svc/index/stream-index.js';
import type { RecoveryAdmission } from '../../directory-svc/recovery/recovery-admission.js';
import { slotHits, type PrefixHit } from './index-prefix.js';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { StreamObservers, type ReconcileOutcome, type StreamListener } from '../../directory-svc/subscription/stream-observer.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import type { EngineIdentitySource } from '../../directory-svc/engines/engine-identity.js';
import type { ReplayLayout } from '../../tools/engine-sim/history-buffer.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import type { BatchForm } from '../../tools/engine-sim/wire-encoding.js';
import { WireEncoder } from '../../tools/engine-sim/wire-encoding.js';
import type {
  WireAllBlocksCleared,
  WireBlockRemoved,
  WireBlockStored,
  WireEvent,
  WireSnapshotBlock,
} from '../../tools/engine-sim/wire-types.js';
import { freePort, freePortRange, waitFor } from './ports.js';

export const BLOCK_SIZE = 4;
export const SEED = 1024n;

/** §9 minimums where a test wants small budgets; replay timeout short so R7-style waits are quick. */
export const BASE_LIMITS: StreamLimits = {
  maxBlocksPerStream: 100_000,
  maxMessageBytes: 65_536,
  maxBufferedBytes: 65_536,
  replayTimeoutMs: 300,
  resyncIntervalMs: 0,
};

/** Tokens of block `n` (block_size 4): [4n+1 .. 4n+4]; block 0 is the §4 vector's 1..4. */
export function blockTokens(n: number): number[] {
  return [4 * n + 1, 4 * n + 2, 4 * n + 3, 4 * n + 4];
}

/** Tokens of `count` consecutive blocks starting at block `tokenBase`. */
export function chainTokens(tokenBase: number, count: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(...blockTokens(tokenBase + i));
  return out;
}

/** Canonical map-form BlockStored (§3.2) at block_size 4. */
export function stored(hashes: number[], parent: number | null, tokens: number[], medium = 'gpu'): WireBlockStored {
  return { type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: tokens, block_size: BLOCK_SIZE, medium };
}

/** Tokenless replica notice (§5.1), e.g. a completed Host copy. */
export function replica(hashes: number[], medium = 'cpu'): WireBlockStored {
  return { type: 'BlockStored', block_hashes: hashes, parent_block_hash: null, token_ids: [], block_size: null, medium };
}

export function removed(hashes: number[], medium: string | null = 'gpu'): WireBlockRemoved {
  return { type: 'BlockRemoved', block_hashes: hashes, medium };
}

/** `AllBlocksCleared`; nil medium clears both tiers (§3.4). */
export function cleared(medium: string | null = null): WireAllBlocksCleared {
  return { type: 'AllBlocksCleared', medium };
}

export function snapBlock(hash: number, parent: number | null, tokens: number[], media: string[] = ['gpu']): WireSnapshotBlock {
  return { block_hash: hash, parent_block_hash: parent, token_ids: tokens, media };
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/**
 * A clock on which every loss of synchronization happens more than 10 s after entering
 * SYNCHRONIZED, so the §7.4 failure count n stays 0 and each injected fault is followed by an
 * immediate recovery. For suites that inject many faults in a row and do not test backoff.
 */
export function stableClock(): () => number {
  let t = 0;
  return () => (t += 20_000);
}

export interface Sample {
  state: StreamState;
  sequence: bigint;
  /** Hits (blocks) per probe, in probe order; 0 when there is no index. */
  hits: number[];
}

export interface StreamRigOptions {
  limits?: Partial<StreamLimits>;
  /** dp_rank the publisher stamps and puts in its chunks (default: the stream's). */
  pubDpRank?: number;
  /** block_size of the publisher's chunks (default: the stream's). */
  pubBlockSize?: number;
  /** §7.4 jitter source; default 0 (the low end of [d/2, d]). */
  random?: () => number;
  /** §7.4 stability clock; see stableClock. */
  nowMs?: () => number;
  /** Residency changes of the served index (view deltas). */
  onResidencyChange?: ResidencyObserver;
  /** Directory-wide snapshot admission, shared by the rigs that pass the same instance. */
  recoveryAdmission?: RecoveryAdmission;
  instanceName?: string;
  /** The stream's dp_rank (default 0). */
  dpRank?: number;
  /** The stream's block_size (default 4). */
  blockSize?: number;
  /** The stream's hash_seed (default 1024). */
  hashSeed?: bigint;
  /** The stream's exact topic (default ''). */
  topic?: string;
  /** The publisher's topic (default: the stream's). */
  pubTopic?: string;
  /** Fixed ports (the §1 base + rank layout); free ports otherwise. */
  eventPort?: number;
  replayPort?: number;
  /** engines.md §1 kind of both the stream and the publisher (default xllm). */
  engineKind?: EngineKind;
  /** vllm/sglang publisher: batch form, history ring size, reply layout (engines.md §5). */
  batchForm?: BatchForm;
  replayBufferSteps?: number;
  replayLayout?: ReplayLayout;
  /** engines.md §3 rule 4 identity source of the stream. */
  identity?: EngineIdentitySource;
}

/** One subscriber + one rank publisher, with a log of every state and view change. */
export class StreamRig {
  readonly samples: Sample[] = [];
  readonly states: StreamState[] = [];
  /** The `error` told with each state move, parallel to `states`. */
  readonly errors: string[] = [];
  readonly backoffs: { delayMs: number; failures: number }[] = [];
  readonly reconciles: ReconcileOutcome[] = [];
  /** Set when an event fired with a non-SYNCHRONIZED state and a non-null index. */
  staleViewSeen = false;
  probes: number[][] = [];
  private readonly queries = new StreamQuery();
  private readonly listeners: Pick<StreamListener, 'stateChanged' | 'batchApplied' | 'indexReplaced'>[] = [];
  /** Encodes fault batches that must not change the publisher's modelled state. */
  private readonly encoder = new WireEncoder();

  private constructor(
    readonly pub: RankPublisher,
    readonly sub: StreamSubscriber,
    readonly hasher: ContentKeyHasher,
    onResidencyChange: ResidencyObserver | undefined,
  ) {
    // `observe` tells the state the stream is in (CONNECTING) at once: that is not a §7 move.
    let told = false;
    const log: StreamListener = {
      stateChanged: (state, error) => {
        if (!told) {
          told = true;
          return;
        }
        this.states.push(state);
        this.errors.push(error);
        this.sample();
        for (const l of this.listeners) l.stateChanged?.(state, error, sub.sequence);
      },
      batchApplied: (seq, device, host) => {
        this.sample();
        for (const l of this.listeners) l.batchApplied?.(seq, device, host);
      },
      indexReplaced: (seq, served, residency) => {
        this.sample();
        for (const l of this.listeners) l.indexReplaced?.(seq, served, residency);
      },
      backoffChosen: (delayMs, failures) => this.backoffs.push({ delayMs, failures }),
      reconcileEnded: (o) => this.reconciles.push(o),
    };
    sub.observe(new StreamObservers(onResidencyChange === undefined ? [log] : [log, { residencyChanged: onResidencyChange }]));
  }

  /** A suite's own listener for state moves, batches and swaps, told after the rig's log. */
  listen(listener: Pick<StreamListener, 'stateChanged' | 'batchApplied' | 'indexReplaced'>): void {
    this.listeners.push(listener);
  }

  static async open(opts: StreamRigOptions = {}): Promise<StreamRig> {
    const eventPort = opts.eventPort ?? (await freePort());
    const replayPort = opts.replayPort ?? (await freePort());
    const dpRank = opts.dpRank ?? 0;
    const blockSize = opts.blockSize ?? BLOCK_SIZE;
    const hashSeed = opts.hashSeed ?? SEED;
    const topic = opts.topic ?? '';
    const pub = await RankPublisher.start({
      eventPort,
      replayPort,
      dpRank: opts.pubDpRank ?? dpRank,
      blockSize: opts.pubBlockSize ?? blockSize,
      topic: opts.pubTopic ?? topic,
      maxMessageBytes: 65_536,
      engineKind: opts.engineKind,
      batchForm: opts.batchForm,
      replayBufferSteps: opts.replayBufferSteps,
      replayLayout: opts.replayLayout,
    });
    const sub = await StreamSubscriber.create(
      {
        instanceName: opts.instanceName ?? 'engine-a',
        dpRank,
        blockSize,
        endpoint: pub.eventEndpoint,
        replayEndpoint: pub.replayEndpoint,
        topic,
        hashSeed,
        ...(opts.engineKind !== undefined ? { engineKind: opts.engineKind } : {}),
        ...(opts.identity !== undefined ? { identity: opts.identity } : {}),
      },
      { ...BASE_LIMITS, ...opts.limits },
      { random: opts.random ?? (() => 0), nowMs: opts.nowMs, recoveryAdmission: opts.recoveryAdmission },
    );
    const hasher = await ContentKeyHasher.forSeed(hashSeed);
    return new StreamRig(pub, sub, hasher, opts.onResidencyChange);
  }

  /**
   * `ranks` DP ranks of one instance laid out as §1 says: rank r's event endpoint at Be + r and
   * its snapshot endpoint at Br + r, on two ranges of consecutive free ports.
   */
  static async openRanks(ranks: number, opts: Omit<StreamRigOptions, 'dpRank' | 'eventPort' | 'replayPort'> = {}): Promise<StreamRig[]> {
    const eventBase = await freePortRange(ranks);
    const replayBase = await freePortRange(ranks);
    const rigs: StreamRig[] = [];
    try {
      for (let r = 0; r < ranks; r++) rigs.push(await StreamRig.open({ ...opts, dpRank: r, eventPort: eventBase + r, replayPort: replayBase + r }));
    } catch (e) {
      await Promise.all(rigs.map((rig) => rig.close()));
      throw e;
    }
    return rigs;
  }

  get blockSize(): number {
    return this.sub.config.blockSize;
  }

  /** Reusable-prefix hits in blocks for `tokens` on the current query view (0 when none). */
  hits(tokens: number[]): number {
    const h = this.tierHits(tokens);
    return h.deviceBlocks + h.hostOnlyBlocks;
  }

  /** Same, split by tier: the subscriber's served residency in its shared group. */
  tierHits(tokens: number[]): PrefixHit {
    const r = this.sub.toQueryable().residency;
    return r === null ? { deviceBlocks: 0, hostOnlyBlocks: 0 } : slotHits(r, tokens);
  }

  /** This stream's routing.md `matches` entry for `tokens`, through StreamQuery. */
  query(tokens: readonly number[]): StreamMatch {
    return this.queries.query(tokens, [this.sub.toQueryable()]).matches[0];
  }

  /** Residency (tier bits, 0 = absent) of a 16-byte content key as the served index holds it. */
  residencyOf(key: Uint8Array): number {
    const index = this.sub.index;
    return index === null ? 0 : index.residencyOf(key, 0);
  }

  /**
   * Publish a batch that a conformant publisher would never send (a wrong field, a bad parent):
   * consumes a seq like any batch but leaves the publisher's modelled state, and so its snapshot
   * replies, untouched, so recovery afterwards restores the truthful state.
   */
  publishFault(events: readonly WireEvent[], opts: { dpRank?: number | null } = {}): Promise<bigint> {
    const encoded = events.map((e) => this.encoder.encodeEvent(e));
    const dpRank = opts.dpRank === undefined ? this.pub.dpRank : opts.dpRank;
    return this.pub.publishPayload(this.encoder.encodeBatch(Date.now() / 1000, encoded, dpRank));
  }

  /** Publish a conformant batch and wait until the stream applied it. */
  async apply(events: readonly WireEvent[]): Promise<bigint> {
    const seq = await this.pub.publish(events);
    await this.atSequence(seq);
    return seq;
  }

  /**
   * Inject one fault, then wait until it cost synchronization with error class `cls` and the
   * stream recovered from a snapshot. Throws unless the moves were exactly UNSYNCHRONIZED →
   * RECOVERING → SYNCHRONIZED (use stableClock so the §7.4 retry is immediate). Returns the
   * error the UNSYNCHRONIZED transition carried.
   */
  async faultThenRecover(cls: string, inject: () => Promise<unknown>, timeoutMs = 10_000): Promise<string> {
    const lostBefore = this.sub.counters.syncLost[cls] ?? 0;
    const okBefore = this.sub.counters.recoveriesOk;
    const statesBefore = this.states.length;
    await inject();
    await waitFor(
      () => (this.sub.counters.syncLost[cls] ?? 0) === lostBefore + 1 && this.sub.counters.recoveriesOk === okBefore + 1 && this.sub.state === 'SYNCHRONIZED',
      timeoutMs,
      `${cls} then recovery (now ${this.sub.state}, ${this.sub.error})`,
    );
    const moves = this.states.slice(statesBefore).join(' → ');
    if (moves !== 'UNSYNCHRONIZED → RECOVERING → SYNCHRONIZED') throw new Error(`unexpected moves after a ${cls} fault: ${moves}`);
    return this.errors[statesBefore];
  }

  async atSequence(seq: bigint, timeoutMs = 5000): Promise<void> {
    await waitFor(
      () => this.sub.state === 'SYNCHRONIZED' && this.sub.sequence === seq,
      timeoutMs,
      `sequence ${seq} (now ${this.sub.state} at ${this.sub.sequence}, ${this.sub.error})`,
    );
  }

  private sample(): void {
    const state = this.sub.state;
    if (state !== 'SYNCHRONIZED' && this.sub.index !== null) this.staleViewSeen = true;
    if (state !== 'SYNCHRONIZED' && this.sub.toQueryable().index !== null) this.staleViewSeen = true;
    this.samples.push({ state, sequence: this.sub.sequence, hits: this.probes.map((p) => this.hits(p)) });
  }

  async synchronized(timeoutMs = 5000): Promise<void> {
    await waitFor(() => this.sub.state === 'SYNCHRONIZED', timeoutMs, `SYNCHRONIZED (now ${this.sub.state}, ${this.sub.error})`);
  }

  async inState(state: StreamState, timeoutMs = 5000): Promise<void> {
    await waitFor(() => this.sub.state === state, timeoutMs, `${state} (now ${this.sub.state}, ${this.sub.error})`);
  }

  /** Start the subscriber, wait for SYNCHRONIZED and for the SUB to be attached at the publisher. */
  async startSynchronized(): Promise<void> {
    this.sub.start();
    await this.synchronized();
    await this.pub.waitForSubscribers(1);
  }

  errorClass(): string {
    const e = this.sub.error;
    return e === '' ? '' : e.slice(0, e.indexOf(':'));
  }

  async close(): Promise<void> {
    await this.sub.close();
    await this.pub.close();
  }
}

/**
 * The rigs a test opened. `closeAll` (the suite's afterEach) checks that none let an index be
 * seen outside SYNCHRONIZED, then closes them all.
 */
export class OpenRigs {
  private rigs: StreamRig[] = [];

  async open(opts?: StreamRigOptions): Promise<StreamRig> {
    const rig = await StreamRig.open(opts);
    this.rigs.push(rig);
    return rig;
  }

  async openRanks(...args: Parameters<typeof StreamRig.openRanks>): Promise<StreamRig[]> {
    const opened = await StreamRig.openRanks(...args);
    this.rigs.push(...opened);
    return opened;
  }

  async closeAll(): Promise<void> {
    const all = this.rigs;
    this.rigs = [];
    for (const r of all) expect(r.staleViewSeen, 'an index was visible outside SYNCHRONIZED').to.equal(false);
    await Promise.all(all.map((r) => r.close()));
  }
}

/** One routing.md query over several rigs' streams (sorted by instance name, then rank). */
export function queryStreams(rigs: readonly StreamRig[], tokens: readonly number[]): QueryResult {
  return new StreamQuery().query(
    tokens,
    rigs.map((r) => r.sub.toQueryable()),
  );
}

