/**
 * The simulated engine's paged KV block pool for one DP rank (pure: no sockets, no clock).
 *
 * Device (GPU) and Host (CPU) hold a finite number of blocks each. A prompt's complete blocks
 * are looked up by engine hash (content + prefix, §11.4); a resident prefix is reused (LRU touch
 * only, a Host-only block is loaded back to Device), the rest is stored on Device. Room on Device
 * is made by evicting its least recently used block, which is offloaded to Host when Host is
 * enabled; room on Host by dropping Host's least recently used block. Every change is reported as
 * kv-events in the order it happens, so each batch obeys §11:
 *   - §11.5 a stored block's parent is resident when the store is emitted (the prompt's own
 *     blocks are pinned for the whole step; a Host copy whose parent left both tiers is dropped);
 *   - §11.6 a Host `BlockStored` only once the copy completed: tokenless while the hash is still
 *     resident somewhere, token-bearing otherwise;
 *   - §11.7 `BlockRemoved` per tier, `AllBlocksCleared` on reset.
 *
 * Offload modes: `sync` copies to Host before freeing Device (always tokenless); `async` frees
 * Device first and completes the copies at the end of the step (token-bearing unless the block
 * came back meanwhile), as engines with asynchronous offload do.
 *
 * Cache identity (cache-identity §6), exactly as vLLM keys its prefix cache: a LoRA request's
 * blocks all carry the adapter name in their hash and `extra_keys`, a request's `cache_salt` only
 * its first block (the rest differ through the parent), so requests under different identities
 * never share a block and the same identity with the same tokens always does.
 *
 * Hybrid models (`slidingWindowTokens` > 0): the pool itself is the full-attention group 0
 * (`group_idx` 0, `full_attention`) and its residency is exactly that of a plain pool; a second,
 * sliding-window group (`group_idx` 1) mirrors every Device store with the same hashes, drops the
 * blocks a request's window has passed (vLLM's `get_num_skipped_tokens`: the first
 * floor((tokens − window + 1) / block_size) blocks) and every block group 0 evicts from Device.
 * Its events follow group 0's in the step, as vLLM's per-group managers emit them.
 *
 * Cost per admitted prompt: O(blocks · block_size) hashing plus O(evictions · pinned) LRU scans.
 */
import { engineHashOf, extraKeyWords, NO_EXTRA_KEYS, type ExtraKeyWords } from './engine-hash.js';
import { EventBuilder, type KvCacheGroup, type StoredBlockIdentity } from './event-builder.js';
import { TIER_DEVICE, TIER_HOST } from '../../shared/keys/tier-bits.js';
import { mediaOf } from './residency-model.js';
import type { WireEvent, WireSnapshotBlock } from './wire-types.js';

export type OffloadMode = 'sync' | 'async';

export interface BlockPoolOptions {
  blockSize: number;
  /** Device (GPU) capacity in blocks, ≥ 1. */
  deviceCapacityBlocks: number;
  /** Host (CPU) capacity in blocks; 0 disables offloading. */
  hostCapacityBlocks: number;
  /** Default `sync`. */
  offloadMode?: OffloadMode;
  /** Hybrid model: the sliding-window group's window in tokens; 0 or absent = one group. */
  slidingWindowTokens?: number;
}

/** The request's cache identity (cache-identity §6). */
export interface AdmitOptions {
  /** LoRA adapter name: every block of the request is keyed and marked with it. */
  loraName?: string | null;
  /** vLLM's adapter id, published as the deprecated `lora_id` beside the name; never hashed. */
  loraId?: number | null;
  /** vLLM `cache_salt`: keys the request's first block only; null or '' = unsalted. */
  cacheSalt?: string | null;
}

export interface AdmitResult {
  /** Events of this step in order (empty when the whole prompt was already on Device). */
  events: WireEvent[];
  /** Blocks of the matched prefix resident on Device before the step (§8 device hits). */
  hitBlocks: number;
  /** Blocks of the matched prefix resident on Host only before the step (§8 host-only hits). */
  hostHitBlocks: number;
  /** Complete blocks of the prompt (floor(tokens / block_size)). */
  promptBlocks: number;
  /** Blocks now on Device; fewer than promptBlocks only when Device cannot hold the prompt. */
  placedBlocks: number;
}

interface PoolBlock extends StoredBlockIdentity {
  readonly hash: bigint;
  readonly parent: bigint | null;
  readonly tokenIds: readonly number[];
  onDevice: boolean;
  onHost: boolean;
  /** An async Host copy started and not yet completed. */
  copyPending: boolean;
  /** Step number that pinned the block; pinned blocks are never evicted in that step. */
  pinnedStep: number;
}

function tierBitsOf(b: PoolBlock): number {
  return (b.onDevice ? TIER_DEVICE : 0) | (b.onHost ? TIER_HOST : 0);
}

/**
 * One request's identity resolved once (not per block): the hash words and `extra_keys` entry of
 * its first block (LoRA name, then salt) and of every later block (LoRA name only), as vLLM's
 * `generate_block_hash_extra_keys` builds them.
 */
interface RequestKeys {
  readonly loraName: string | null;
  readonly loraId: number | null;
  readonly rootWords: ExtraKeyWords;
  readonly chainWords: ExtraKeyWords;
  readonly rootExtra: readonly string[] | null;
  readonly chainExtra: readonly string[] | null;
}

const PLAIN_KEYS: RequestKeys = Object.freeze({
  loraName: null,
  loraId: null,
  rootWords: NO_EXTRA_KEYS,
  chainWords: NO_EXTRA_KEYS,
  rootExtra: null,
  chainExtra: null,
});

function requestKeys(opts: AdmitOptions): RequestKeys {
  const loraName = opts.loraName ?? null;
  const salt = opts.cacheSalt === undefined || opts.cacheSalt === null || opts.cacheSalt === '' ? null : opts.cacheSalt;
  const loraId = opts.loraId ?? null;
  if (loraName === null && salt === null && loraId === null) return PLAIN_KEYS;
  const chainExtra = loraName === null ? null : Object.freeze([loraName]);
  const rootExtra = salt === null ? chainExtra : Object.freeze(loraName === null ? [salt] : [loraName, salt]);
  return {
    loraName,
    loraId,
    rootWords: extraKeyWords(loraName, salt),
    chainWords: extraKeyWords(loraName, null),
    rootExtra,
    chainExtra,
  };
}

const FULL_ATTENTION_GROUP: KvCacheGroup = Object.freeze({ idx: 0, kind: 'full_attention', slidingWindowTokens: null });

export class BlockPool {
  readonly blockSize: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly offloadMode: OffloadMode;
  /** Hybrid: the sliding-window group's window in tokens; 0 = one group (no group fields). */
  readonly slidingWindowTokens: number;
  /** Every block resident somewhere or with a copy in flight, in creation order. */
  private readonly blocks = new Map<bigint, PoolBlock>();
  /** Map insertion order is the LRU order: first = least recently used. */
  private readonly deviceLru = new Map<bigint, PoolBlock>();
  private readonly hostLru = new Map<bigint, PoolBlock>();
  private pendingCopies: PoolBlock[] = [];
  private step = 0;
  /** Hybrid: group 0's spec (stamped on its events), group 1's, and what group 1 holds (Device). */
  private readonly fullGroup: KvCacheGroup | null;
  private readonly slidingGroup: KvCacheGroup | null;
  private readonly slidingResident = new Set<bigint>();
  /** Group 1's events of the step in progress (evictions happen deep inside it). */
  private slidingOut: EventBuilder | null = null;

  constructor(opts: BlockPoolOptions) {
    if (!Number.isInteger(opts.blockSize) || opts.blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${opts.blockSize}`);
    if (!Number.isInteger(opts.deviceCapacityBlocks) || opts.deviceCapacityBlocks < 1) {
      throw new RangeError(`deviceCapacityBlocks must be a positive integer, got ${opts.deviceCapacityBlocks}`);
    }
    if (!Number.isInteger(opts.hostCapacityBlocks) || opts.hostCapacityBlocks < 0) {
      throw new RangeError(`hostCapacityBlocks must be a non-negative integer, got ${opts.hostCapacityBlocks}`);
    }
    this.blockSize = opts.blockSize;
    this.deviceCapacityBlocks = opts.deviceCapacityBlocks;
    this.hostCapacityBlocks = opts.hostCapacityBlocks;
    this.offloadMode = opts.offloadMode ?? 'sync';
    const window = opts.slidingWindowTokens ?? 0;
    if (!Number.isInteger(window) || window < 0) throw new RangeError(`slidingWindowTokens must be a non-negative integer, got ${window}`);
    this.slidingWindowTokens = window;
    this.fullGroup = window > 0 ? FULL_ATTENTION_GROUP : null;
    this.slidingGroup = window > 0 ? Object.freeze({ idx: 1, kind: 'sliding_window', slidingWindowTokens: window }) : null;
  }

  /** Hybrid: whether the sliding-window group (1) holds `hash`. */
  inSlidingGroup(hash: bigint): boolean {
    return this.slidingResident.has(hash);
  }

  get deviceBlocks(): number {
    return this.deviceLru.size;
  }

  get hostBlocks(): number {
    return this.hostLru.size;
  }

  /** Tier bits of an engine hash: 1 Device, 2 Host, 3 both, 0 absent. */
  tiersOf(hash: bigint): number {
    const b = this.blocks.get(hash);
    return b === undefined ? 0 : tierBitsOf(b);
  }

  /** Engine hashes of the prompt's complete blocks under its identity (what admitPrompt would look up). */
  hashesOf(tokenIds: readonly number[], opts: AdmitOptions = {}): bigint[] {
    return this.hashesUnder(tokenIds, requestKeys(opts));
  }

  private hashesUnder(tokenIds: readonly number[], keys: RequestKeys): bigint[] {
    const n = Math.floor(tokenIds.length / this.blockSize);
    const out: bigint[] = [];
    let parent: bigint | null = null;
    for (let i = 0; i < n; i++) {
      parent = engineHashOf(parent, tokenIds, i * this.blockSize, this.blockSize, i === 0 ? keys.rootWords : keys.chainWords);
      out.push(parent);
    }
    return out;
  }

  /**
   * One prefill: reuse the resident prefix, store the rest on Device (evicting and offloading
   * as needed). Returns the events in emission order and the prefix hits found before the step.
   */
  admitPrompt(tokenIds: readonly number[], opts: AdmitOptions = {}): AdmitResult {
    const keys = requestKeys(opts);
    const hashes = this.hashesUnder(tokenIds, keys);
    const step = ++this.step;
    const out = new EventBuilder(this.blockSize, this.fullGroup);
    const sliding = this.slidingGroup === null ? null : new EventBuilder(this.blockSize, this.slidingGroup);
    this.slidingOut = sliding;

    // §8 semantics: walk from block 0, stop at the first block resident nowhere.
    let hitBlocks = 0;
    let hostHitBlocks = 0;
    for (const h of hashes) {
      const b = this.blocks.get(h);
      if (b === undefined || (!b.onDevice && !b.onHost)) break;
      if (b.onDevice) hitBlocks++;
      else hostHitBlocks++;
      b.pinnedStep = step;
    }

    let placed = 0;
    for (let i = 0; i < hashes.length; i++) {
      const h = hashes[i];
      let b = this.blocks.get(h);
      if (b !== undefined && b.onDevice) {
        b.pinnedStep = step;
        placed++;
        continue;
      }
      if (!this.makeDeviceRoom(step, out)) break;
      // Making room may have dropped this block's Host copy: look it up again.
      b = this.blocks.get(h);
      if (b === undefined) {
        const start = i * this.blockSize;
        b = {
          hash: h,
          parent: i === 0 ? null : hashes[i - 1],
          tokenIds: tokenIds.slice(start, start + this.blockSize),
          loraName: keys.loraName,
          loraId: keys.loraId,
          extraKey: i === 0 ? keys.rootExtra : keys.chainExtra,
          onDevice: false,
          onHost: false,
          copyPending: false,
          pinnedStep: step,
        };
        this.blocks.set(h, b);
      }
      b.pinnedStep = step;
      // §11.6 (same rule for both tiers here): a Host-only block loaded back to Device is
      // still resident, so tokenless; a new block is token-bearing, its parent (block i−1 of
      // this prompt) on Device by now (§11.5).
      const resident = b.onHost;
      b.onDevice = true;
      this.deviceLru.set(h, b);
      out.stored(h, b.parent, resident ? null : b.tokenIds, 'gpu', b);
      if (sliding !== null && !this.slidingResident.has(h)) {
        // Group 1 mirrors the store with the same hash; it never held this block (group 0 had
        // it off Device, and every group 0 Device eviction leaves group 1 too), so token-bearing.
        this.slidingResident.add(h);
        sliding.stored(h, b.parent, b.tokenIds, 'gpu', b);
      }
      placed++;
    }

    // Touch the prompt's blocks child-first so parents end up most recently used and a prefix
    // is evicted from its tail, never from its root.
    for (let i = hashes.length - 1; i >= 0; i--) {
      const b = this.blocks.get(hashes[i]);
      if (b === undefined) continue;
      if (b.onDevice) touch(this.deviceLru, b);
      if (b.onHost) touch(this.hostLru, b);
    }

    this.completeCopies(step, out);
    const events = out.finish();
    if (sliding !== null) {
      // vLLM SlidingWindowManager: after the prefill the window covers the last `window` tokens;
      // blocks wholly before it are freed from this group.
      const skipped = Math.min(hashes.length, Math.max(0, Math.floor((tokenIds.length - this.slidingWindowTokens + 1) / this.blockSize)));
      for (let i = 0; i < skipped; i++) if (this.slidingResident.delete(hashes[i])) sliding.removed(hashes[i], 'gpu');
      this.slidingOut = null;
      for (const e of sliding.finish()) events.push(e);
    }
    return { events, hitBlocks, hostHitBlocks, promptBlocks: hashes.length, placedBlocks: placed };
  }

  /**
   * §11.7 cache reset: every tier (null), or one tier. Copies in flight are abandoned.
   */
  clear(medium: 'gpu' | 'cpu' | null = null): WireEvent[] {
    const out = new EventBuilder(this.blockSize);
    out.cleared(medium);
    // The event names no group: it clears every group's Device blocks (group 1 holds no others).
    if (medium !== 'cpu') this.slidingResident.clear();
    if (medium === null || medium === 'gpu') {
      for (const b of this.deviceLru.values()) b.onDevice = false;
      this.deviceLru.clear();
    }
    if (medium === null || medium === 'cpu') {
      for (const b of this.hostLru.values()) b.onHost = false;
      this.hostLru.clear();
    }
    for (const b of this.pendingCopies) b.copyPending = false;
    this.pendingCopies = [];
    for (const b of [...this.blocks.values()]) this.dropIfGone(b);
    return out.finish();
  }

  /** Forget everything without events (a new engine process: §11.2 restarts from nothing). */
  reset(): void {
    this.blocks.clear();
    this.deviceLru.clear();
    this.hostLru.clear();
    this.pendingCopies = [];
    this.slidingResident.clear();
  }

  /**
   * §6/§11.8 snapshot: each resident block once, parent-first, with its current media and its
   * parent hash even when the parent left both tiers.
   */
  snapshot(): WireSnapshotBlock[] {
    const out: WireSnapshotBlock[] = [];
    this.walkParentFirst((b) => {
      const block: { -readonly [K in keyof WireSnapshotBlock]: WireSnapshotBlock[K] } = {
        block_hash: b.hash,
        parent_block_hash: b.parent,
        token_ids: b.tokenIds,
        media: mediaOf(tierBitsOf(b)),
      };
      // §11.8: scope fields as the block's own one-hash BlockStored would carry them.
      if (b.loraId !== null) block.lora_id = b.loraId;
      if (b.loraName !== null) block.lora_name = b.loraName;
      if (b.extraKey !== null) block.extra_keys = [b.extraKey];
      out.push(block);
    });
    return out;
  }

  /**
   * §7.3 full-state batch: `AllBlocksCleared` then a store per resident block and tier,
   * parent-first. Blocks whose parent left both tiers (and their descendants) cannot be stored
   * without breaking §11.5 and are left out; they could never be matched anyway (§6 orphans).
   */
  fullStateEvents(): WireEvent[] {
    const out = new EventBuilder(this.blockSize, this.fullGroup);
    out.cleared(null);
    const sliding = this.slidingGroup === null ? null : new EventBuilder(this.blockSize, this.slidingGroup);
    const listed = new Set<bigint>();
    this.walkParentFirst((b) => {
      if (b.parent !== null && !listed.has(b.parent)) return;
      listed.add(b.hash);
      if (b.onDevice) out.stored(b.hash, b.parent, b.tokenIds, 'gpu', b);
      if (b.onHost) out.stored(b.hash, b.parent, b.onDevice ? null : b.tokenIds, 'cpu', b);
      if (sliding !== null && this.slidingResident.has(b.hash)) sliding.stored(b.hash, b.parent, b.tokenIds, 'gpu', b);
    });
    const events = out.finish();
    if (sliding !== null) for (const e of sliding.finish()) events.push(e);
    return events;
  }

  private walkParentFirst(visit: (b: PoolBlock) => void): void {
    const done = new Set<bigint>();
    const chain: PoolBlock[] = [];
    for (const start of this.blocks.values()) {
      chain.length = 0;
      let b: PoolBlock | undefined = start;
      while (b !== undefined && !done.has(b.hash) && chain.length <= this.blocks.size) {
        chain.push(b);
        b = b.parent === null ? undefined : this.blocks.get(b.parent);
      }
      for (let i = chain.length - 1; i >= 0; i--) {
        const c = chain[i];
        if (done.has(c.hash)) continue;
        done.add(c.hash);
        if (c.onDevice || c.onHost) visit(c);
      }
    }
  }

  private makeDeviceRoom(step: number, out: EventBuilder): boolean {
    while (this.deviceLru.size >= this.deviceCapacityBlocks) {
      const victim = oldestUnpinned(this.deviceLru, step);
      if (victim === undefined) return false;
      this.evictFromDevice(victim, step, out);
    }
    return true;
  }

  private evictFromDevice(b: PoolBlock, step: number, out: EventBuilder): void {
    if (this.hostCapacityBlocks > 0 && !b.onHost && !b.copyPending) {
      if (this.offloadMode === 'sync') this.copyToHost(b, step, out);
      else {
        b.copyPending = true;
        this.pendingCopies.push(b);
      }
    }
    b.onDevice = false;
    this.deviceLru.delete(b.hash);
    out.removed(b.hash, 'gpu');
    if (this.slidingOut !== null && this.slidingResident.delete(b.hash)) this.slidingOut.removed(b.hash, 'gpu');
    this.dropIfGone(b);
  }

  /**
   * Completes the step's async copies. A copy whose parent is itself still being copied waits
   * for it (§11.5 needs the parent resident for a token-bearing store); one whose parent is
   * gone for good is dropped.
   */
  private completeCopies(step: number, out: EventBuilder): void {
    let pending = this.pendingCopies;
    this.pendingCopies = [];
    while (pending.length > 0) {
      const deferred: PoolBlock[] = [];
      for (const b of pending) {
        if (!b.copyPending) continue;
        const parent = b.parent === null ? undefined : this.blocks.get(b.parent);
        if (!b.onDevice && parent !== undefined && parent.copyPending && !parent.onDevice && !parent.onHost) {
          deferred.push(b);
          continue;
        }
        b.copyPending = false;
        this.copyToHost(b, step, out);
        this.dropIfGone(b);
      }
      if (deferred.length === pending.length) {
        // Cannot happen with acyclic parents; drop rather than loop forever.
        for (const b of deferred) {
          b.copyPending = false;
          this.dropIfGone(b);
        }
        return;
      }
      pending = deferred;
    }
  }

  /** The copy has completed: make room on Host, then report it (§11.6). */
  private copyToHost(b: PoolBlock, step: number, out: EventBuilder): void {
    if (b.onHost) return;
    if (!this.makeHostRoom(step, out)) return;
    const resident = b.onDevice;
    // §11.5: a token-bearing store needs its parent resident; checked after making room, which
    // may itself have dropped the parent from Host.
    if (!resident && b.parent !== null && this.tiersOf(b.parent) === 0) return;
    b.onHost = true;
    this.hostLru.set(b.hash, b);
    out.stored(b.hash, b.parent, resident ? null : b.tokenIds, 'cpu', b);
  }

  private makeHostRoom(step: number, out: EventBuilder): boolean {
    while (this.hostLru.size >= this.hostCapacityBlocks) {
      const victim = oldestUnpinned(this.hostLru, step);
      if (victim === undefined) return false;
      victim.onHost = false;
      this.hostLru.delete(victim.hash);
      out.removed(victim.hash, 'cpu');
      this.dropIfGone(victim);
    }
    return true;
  }

  private dropIfGone(b: PoolBlock): void {
    if (!b.onDevice && !b.onHost && !b.copyPending) this.blocks.delete(b.hash);
  }
}

function touch(lru: Map<bigint, PoolBlock>, b: PoolBlock): void {
  lru.delete(b.hash);
  lru.set(b.hash, b);
}

function oldestUnpinned(lru: Map<bigint, PoolBlock>, step: number): PoolBlock | undefined {
  for (const b of lru.values()) if (b.pinnedStep !== step) return b;
  return undefined;
}
