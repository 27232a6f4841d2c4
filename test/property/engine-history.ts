// Random engine histories for the property suites: a simulator BlockPool (random prompts with
// shared prefixes, capacities small enough that evictions and Host offloads happen) drives a real
// RankPublisher, and faults are injected through the publisher: dropped batches, duplicates re-sent
// with their old seq, restarts with or without kept state, snapshot replies without a terminator,
// truncated or garbled, dropped, delayed or late past the replay timeout.
//
// The history records the publisher's TRUE state after every batch, keyed by (epoch, seq), where
// an epoch is one publisher process (seq restarts at 0 in each). Seq −1 of an epoch is the state it
// started with (empty, or the kept state after a restart). A suite compares what a subscriber
// serves at seq S with `truthAt(epoch, S)`.
import fc from 'fast-check';
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { decodeSnapshotChunk } from '../../directory-svc/decoder/snapshot-decoder.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import { BlockPool } from '../../tools/engine-sim/block-pool.js';
import type { OffloadMode } from '../../tools/engine-sim/block-pool.js';
import type { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import { EMPTY_FRAME, TERMINATOR_WATERMARK, WireEncoder, encodeSnapshotChunks, u64be } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent, WireSnapshotBlock } from '../../tools/engine-sim/wire-types.js';

export const BLOCK_SIZE = 4;
/** Replay timeout of the subscribers under test; the 'late' snapshot fault waits longer. */
export const REPLAY_TIMEOUT_MS = 600;
const LATE_REPLY_MS = REPLAY_TIMEOUT_MS + 300;

/**
 * A batch a conformant publisher never sends; it consumes a seq and changes nothing at the
 * engine. Each starts with a valid-looking removal of a resident block, so a subscriber that
 * served partial effects of a failed batch (§5.2) would show it.
 */
export type CorruptBatchKind = 'dp_rank' | 'trailing_bytes' | 'unknown_parent' | 'bad_medium';

export type SnapshotFaultKind = 'omitTerminator' | 'truncate' | 'garble' | 'drop' | 'delay' | 'late';

export type HistoryAction =
  | { readonly kind: 'prompt'; readonly family: number; readonly sharedBlocks: number; readonly tail: readonly number[] }
  | { readonly kind: 'clear'; readonly medium: 'gpu' | 'cpu' | null }
  | { readonly kind: 'fullState' }
  | { readonly kind: 'drop' }
  | { readonly kind: 'duplicate'; readonly back: number }
  | { readonly kind: 'restart'; readonly keepState: boolean; readonly awaitSubscriber: boolean }
  | { readonly kind: 'snapshotFault'; readonly fault: SnapshotFaultKind }
  | { readonly kind: 'corrupt'; readonly fault: CorruptBatchKind }
  | { readonly kind: 'settle' };

export interface HistoryScenario {
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly offloadMode: OffloadMode;
  /** Blocks per snapshot chunk, so replies often span several chunks. */
  readonly chunkBlocks: number;
  readonly actions: readonly HistoryAction[];
}

const promptArb: fc.Arbitrary<HistoryAction> = fc.record({
  kind: fc.constant('prompt' as const),
  family: fc.integer({ min: 0, max: 2 }),
  sharedBlocks: fc.integer({ min: 0, max: 6 }),
  // Tail blocks from a small alphabet, so tails are shared too (and re-stored after eviction).
  tail: fc.array(fc.integer({ min: 0, max: 5 }), { maxLength: 4 }),
});

const faultArb: fc.Arbitrary<HistoryAction> = fc.oneof(
  { weight: 3, arbitrary: fc.constant({ kind: 'drop' as const }) },
  { weight: 2, arbitrary: fc.record({ kind: fc.constant('duplicate' as const), back: fc.integer({ min: 0, max: 3 }) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('restart' as const), keepState: fc.boolean(), awaitSubscriber: fc.boolean() }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('corrupt' as const), fault: fc.constantFrom<CorruptBatchKind>('dp_rank', 'trailing_bytes', 'unknown_parent', 'bad_medium') }),
  },
  {
    weight: 2,
    arbitrary: fc.record({
      kind: fc.constant('snapshotFault' as const),
      fault: fc.constantFrom<SnapshotFaultKind>('omitTerminator', 'truncate', 'garble', 'drop', 'delay', 'late'),
    }),
  },
);

/** One engine step: mostly prompts; engine resets, full-state batches, faults and pauses mixed in. */
export const historyActionArb: fc.Arbitrary<HistoryAction> = fc.oneof(
  { weight: 12, arbitrary: promptArb },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('clear' as const), medium: fc.constantFrom<'gpu' | 'cpu' | null>('gpu', 'cpu', null) }) },
  { weight: 1, arbitrary: fc.constant({ kind: 'fullState' as const }) },
  { weight: 5, arbitrary: faultArb },
  { weight: 2, arbitrary: fc.constant({ kind: 'settle' as const }) },
);

/** Pool shape of one engine (capacities small enough that evictions and offloads happen). */
export const poolShapeArb = fc.record({
  deviceCapacityBlocks: fc.integer({ min: 3, max: 12 }),
  hostCapacityBlocks: fc.integer({ min: 0, max: 8 }),
  offloadMode: fc.constantFrom<OffloadMode>('sync', 'async'),
  chunkBlocks: fc.integer({ min: 1, max: 8 }),
});

export function historyScenarioArb(maxActions: number): fc.Arbitrary<HistoryScenario> {
  return fc
    .tuple(poolShapeArb, fc.array(historyActionArb, { minLength: Math.min(10, maxActions), maxLength: maxActions }))
    .map(([shape, actions]) => ({ ...shape, actions }));
}

/** Prompt tokens: a family's shared prefix, then tail blocks drawn from a small alphabet. */
export function promptTokens(family: number, sharedBlocks: number, tail: readonly number[]): number[] {
  const out: number[] = [];
  for (let i = 0; i < sharedBlocks * BLOCK_SIZE; i++) out.push(1000 * (family + 1) + i);
  for (const t of tail) for (let i = 0; i < BLOCK_SIZE; i++) out.push(50_000 + 10 * t + i);
  return out;
}

/** Probes for hit checks: each family's longest prefix. */
export const PROBES: readonly number[][] = [0, 1, 2].map((f) => promptTokens(f, 6, [0, 1]));

export class EngineHistory {
  /** Publisher process number (0 = first start). */
  epoch = 0;
  /** Snapshot replies served: (epoch, W) per request, for failure reports. */
  readonly replies: string[] = [];
  /** Everything done, for failure reports. */
  readonly log: string[] = [];
  private readonly truth = new Map<string, readonly WireSnapshotBlock[]>();
  /** Events of each batch published in the current epoch (duplicates re-send them). */
  private sent = new Map<bigint, readonly WireEvent[]>();
  /** Every block ever resident: hash → parent and tokens (content is fixed by the hash). */
  private readonly blocks = new Map<bigint, { parent: bigint | null; tokens: readonly number[] }>();
  private readonly keyCache = new Map<bigint, string | null>();
  private readonly refCache = new Map<string, StreamIndex>();
  private readonly pendingSnapshotFaults: SnapshotFaultKind[] = [];
  private readonly encoder = new WireEncoder();
  private faultsOn = true;
  /** dropNextBatch() was called and no batch consumed it yet. */
  private dropPending = false;

  constructor(
    readonly pub: RankPublisher,
    readonly pool: BlockPool,
    private readonly hasher: ContentKeyHasher,
    private readonly chunkBlocks: number,
    /** vllm/sglang publisher (engines.md §3): it replays its own history; snapshot faults are skipped. */
    private readonly opts: { historyReplay?: boolean } = {},
  ) {
    this.record(-1n);
    // Every reply goes through here, so a fault can be applied to exactly one request.
    if (opts.historyReplay !== true) pub.snapshotFaults.overrideChunks = () => this.snapshotReply();
  }

  static poolFor(s: Omit<HistoryScenario, 'actions'>): BlockPool {
    return new BlockPool({ blockSize: BLOCK_SIZE, deviceCapacityBlocks: s.deviceCapacityBlocks, hostCapacityBlocks: s.hostCapacityBlocks, offloadMode: s.offloadMode });
  }

  /** Seq of the last batch published in the current epoch (−1 when none). */
  get lastSeq(): bigint {
    return this.pub.nextSeq - 1n;
  }

  /** The true state after batch `seq` of `epoch`; undefined when that seq was never published there. */
  truthAt(epoch: number, seq: bigint): readonly WireSnapshotBlock[] | undefined {
    return this.truth.get(`${epoch}:${seq}`);
  }

  /** Runs one action. `settle` waits (bounded) for the subscriber to catch up; it never fails. */
  async run(action: HistoryAction, settle: () => Promise<void>): Promise<void> {
    this.log.push(JSON.stringify(action));
    switch (action.kind) {
      case 'prompt':
        await this.publish(this.pool.admitPrompt(promptTokens(action.family, action.sharedBlocks, action.tail)).events);
        return;
      case 'clear':
        await this.publish(this.pool.clear(action.medium));
        return;
      case 'fullState':
        // §7.3 restores only when it is the whole state: skip while a block's parent is gone (the
        // pool cannot list such orphans in a full-state batch without breaking §11.5).
        if (this.hasOrphans()) return;
        await this.publish(this.pool.fullStateEvents());
        return;
      case 'drop':
        if (!this.faultsOn) return;
        this.pub.dropNextBatch();
        this.dropPending = true;
        return;
      case 'duplicate': {
        if (!this.faultsOn) return;
        const seq = this.lastSeq - BigInt(action.back);
        const events = this.sent.get(seq);
        if (events === undefined) return;
        // The same batch again under its old seq (a retransmitting publisher).
        const payload = this.encoder.encodeBatch(Date.now() / 1000, events.map((e) => this.encoder.encodeEvent(e)), this.pub.dpRank);
        await this.pub.publishPayload(payload, { seq, consumeSeq: false });
        return;
      }
      case 'restart':
        if (!this.faultsOn) return;
        await this.restartEngine(action.keepState);
        if (action.awaitSubscriber) await this.pub.waitForSubscribers(1, 10_000).catch(() => undefined);
        return;
      case 'snapshotFault':
        if (this.opts.historyReplay === true) return;
        if (this.faultsOn && this.pendingSnapshotFaults.length < 2) this.pendingSnapshotFaults.push(action.fault);
        return;
      case 'corrupt':
        if (this.faultsOn) await this.publishCorrupt(action.fault);
        return;
      case 'settle':
        await settle();
        return;
      default: {
        const impossible: never = action;
        throw new Error(`unknown action ${JSON.stringify(impossible)}`);
      }
    }
  }

  /** A new publisher process on the same ports (seq 0), its cache kept or empty. */
  async restartEngine(keepStateAsked: boolean): Promise<void> {
    // A vLLM/SGLang process keeps its KV cache in its own GPU memory: a restarted one starts
    // empty, and its history from seq 0 is its whole state (engines.md §3 rule 1).
    const keepState = keepStateAsked && this.opts.historyReplay !== true;
    await this.pub.restart({ keepState });
    this.dropPending = false; // restart() forgets a pending drop
    if (!keepState) this.pool.reset();
    this.epoch++;
    this.sent = new Map();
    this.record(-1n);
  }

  /**
   * Faults stop: later snapshot replies are honest, drops and restarts are ignored. A drop still
   * pending takes effect on the next batch (the publisher has no way to take it back), so that
   * batch is published here, as an empty one.
   */
  async endFaults(): Promise<void> {
    this.faultsOn = false;
    this.pendingSnapshotFaults.length = 0;
    if (this.dropPending) await this.publish([]);
  }

  /** Publish a batch (possibly empty: it still consumes a seq) and record the truth after it. */
  async publish(events: readonly WireEvent[]): Promise<void> {
    const sending = this.pub.publish(events);
    this.dropPending = false;
    // publish() takes the seq and changes the state synchronously, before its first await.
    const seq = this.lastSeq;
    this.sent.set(seq, events);
    this.record(seq);
    await sending;
  }

  private async publishCorrupt(kind: CorruptBatchKind): Promise<void> {
    const resident = this.pool.snapshot()[0];
    const events: WireEvent[] = [];
    if (resident !== undefined) events.push({ type: 'BlockRemoved', block_hashes: [resident.block_hash], medium: resident.media[0] ?? 'gpu' });
    // A parent no engine hash will ever equal (the pool's hashes are 64-bit digests).
    const orphanParent = 0xdead_beef_0000_0001n;
    if (kind === 'unknown_parent') events.push({ type: 'BlockStored', block_hashes: [0xdead_beef_0000_0002n], parent_block_hash: orphanParent, token_ids: [1, 2, 3, 4], block_size: BLOCK_SIZE, medium: 'gpu' });
    // vllm/sglang streams take any other medium string as a tier we do not serve (engines.md §2),
    // so their bad medium is a non-string (§3.4: `parse` for every kind).
    if (kind === 'bad_medium') {
      const medium = (this.opts.historyReplay === true ? 7 : 'tpu') as unknown as string;
      events.push({ type: 'BlockRemoved', block_hashes: [orphanParent], medium });
    }
    const encoded = events.map((e) => this.encoder.encodeEvent(e));
    let payload = this.encoder.encodeBatch(Date.now() / 1000, encoded, kind === 'dp_rank' ? this.pub.dpRank + 1 : this.pub.dpRank);
    if (kind === 'trailing_bytes') payload = Uint8Array.from([...payload, 0x00]);
    const sending = this.pub.publishPayload(payload);
    // The seq is taken synchronously; the engine's state is unchanged by this batch.
    this.record(this.lastSeq);
    await sending;
  }

  private record(seq: bigint): void {
    const state = this.pool.snapshot();
    for (const b of state) {
      const h = BigInt(b.block_hash as bigint);
      if (!this.blocks.has(h)) this.blocks.set(h, { parent: b.parent_block_hash === null ? null : BigInt(b.parent_block_hash as bigint), tokens: b.token_ids });
    }
    this.truth.set(`${this.epoch}:${seq}`, state);
    // The simulator's two views of the engine must agree: events replayed vs the pool itself.
    const model = stateKey(this.pub.publishedState());
    const pool = stateKey(state);
    if (model !== pool) this.log.push(`SIMULATOR MISMATCH at ${this.epoch}:${seq}: events say ${model}, pool says ${pool}`);
  }

  private hasOrphans(): boolean {
    const resident = new Set<bigint>();
    for (const b of this.pool.snapshot()) resident.add(BigInt(b.block_hash as bigint));
    return this.pool.snapshot().some((b) => b.parent_block_hash !== null && !resident.has(BigInt(b.parent_block_hash as bigint)));
  }

  private snapshotReply(): Uint8Array[][] {
    const { blocks, watermark } = this.pub.captureSnapshot();
    const fault = this.pendingSnapshotFaults.shift() ?? null;
    this.replies.push(`${this.epoch}:W=${watermark}${fault === null ? '' : ` ${fault}`}`);
    // Read right after this returns, so the delay applies to this reply only.
    this.pub.snapshotFaults.delayMs = fault === 'delay' ? 100 : fault === 'late' ? LATE_REPLY_MS : 0;
    const w = u64be(watermark);
    const chunks = encodeSnapshotChunks(this.encoder, blocks, this.pub.dpRank, this.pub.blockSize, this.pub.maxMessageBytes, this.chunkBlocks);
    const messages = chunks.map((c) => [EMPTY_FRAME, w, c]);
    switch (fault) {
      case 'drop':
        return [];
      case 'omitTerminator':
        return messages;
      case 'truncate': {
        const last = messages[messages.length - 1]!;
        last[2] = last[2]!.subarray(0, Math.max(1, last[2]!.length >> 1));
        break;
      }
      case 'garble': {
        const last = messages[messages.length - 1]!;
        const garbled = last[2]!.slice();
        garbled[0] = 0xc1; // never-used MessagePack byte
        last[2] = garbled;
        break;
      }
      default:
        break;
    }
    messages.push([EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME]);
    return messages;
  }

  /**
   * The state a correct index holds for `state`, built the §6 way from the same blocks (through
   * the real decoder), so `sameStateAs` compares engine hashes, tiers and keys (§7.5 equality).
   */
  referenceIndex(epoch: number, seq: bigint, maxEntries: number): StreamIndex | null {
    const id = `${epoch}:${seq}`;
    const cached = this.refCache.get(id);
    if (cached !== undefined) return cached;
    const state = this.truth.get(id);
    if (state === undefined) return null;
    const index = new StreamIndex({ blockSize: BLOCK_SIZE, hasher: this.hasher, maxEntries });
    const skipped = { outOfScope: 0, descendant: 0, orphan: 0 };
    for (const chunk of encodeSnapshotChunks(this.encoder, state, this.pub.dpRank, BLOCK_SIZE, 1 << 24, Number.POSITIVE_INFINITY)) {
      for (const b of decodeSnapshotChunk(chunk, { dpRank: this.pub.dpRank, blockSize: BLOCK_SIZE, maxMessageBytes: 1 << 24 })) index.addSnapshotBlock(b, skipped);
    }
    this.refCache.set(id, index);
    return index;
  }

  /** Content key (hex, §4) of an engine hash from its full token prefix; null when a parent was never seen. */
  keyHexOf(hash: bigint): string | null {
    if (this.keyCache.has(hash)) return this.keyCache.get(hash)!;
    const chain: (readonly number[])[] = [];
    let h: bigint | null = hash;
    while (h !== null) {
      const b = this.blocks.get(h);
      if (b === undefined) {
        this.keyCache.set(hash, null);
        return null;
      }
      chain.push(b.tokens);
      h = b.parent;
    }
    const tokens = chain.reverse().flat();
    const keys = this.hasher.chain(tokens, BLOCK_SIZE);
    const hex = Buffer.from(keys.buffer, keys.byteOffset + keys.length - 16, 16).toString('hex');
    this.keyCache.set(hash, hex);
    return hex;
  }

  /**
   * Residency mismatches of `residency` (key hex → tiers, from exportResidency) against the true
   * state: every served key is a resident block's key with exactly that block's tiers, and every
   * resident root block (no parent, so always indexed) is served. Empty when they agree.
   */
  residencyMismatches(epoch: number, seq: bigint, residency: ReadonlyMap<string, number>): string[] {
    const state = this.truth.get(`${epoch}:${seq}`) ?? [];
    const byKey = new Map<string, { tiers: number; root: boolean }>();
    for (const b of state) {
      const key = this.keyHexOf(BigInt(b.block_hash as bigint));
      if (key === null) continue;
      byKey.set(key, { tiers: tiersOf(b.media), root: b.parent_block_hash === null });
    }
    const out: string[] = [];
    for (const [key, tiers] of residency) {
      const t = byKey.get(key);
      if (t === undefined) out.push(`served key ${key} (tiers ${tiers}) is not resident at the publisher`);
      else if (t.tiers !== tiers) out.push(`key ${key}: served tiers ${tiers}, true tiers ${t.tiers}`);
    }
    for (const [key, t] of byKey) if (t.root && !residency.has(key)) out.push(`root key ${key} (tiers ${t.tiers}) resident at the publisher but not served`);
    return out;
  }
}

function tiersOf(media: readonly string[]): number {
  let t = 0;
  for (const m of media) t |= m.toLowerCase() === 'gpu' ? 1 : m.toLowerCase() === 'cpu' ? 2 : 0;
  return t;
}

/** Order-independent text of a state (hash:tiers), for the simulator cross-check. */
function stateKey(state: readonly WireSnapshotBlock[]): string {
  return state
    .map((b) => `${BigInt(b.block_hash as bigint).toString(16)}:${tiersOf(b.media)}`)
    .sort()
    .join(',');
}
