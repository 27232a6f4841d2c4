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
 * Cost per admitted prompt: O(blocks · block_size) hashing plus O(evictions · pinned) LRU scans.
 */
import { engineHashOf, loraSalt } from './engine-hash.js';
import { EventBuilder } from './event-builder.js';
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
}

export interface AdmitOptions {
  /** Adapter name: the blocks are LoRA blocks, out of the index's scope (§3.4, §11.7). */
  loraName?: string | null;
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

interface PoolBlock {
  readonly hash: bigint;
  readonly parent: bigint | null;
  readonly tokenIds: readonly number[];
  readonly loraName: string | null;
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

export class BlockPool {
  readonly blockSize: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly offloadMode: OffloadMode;
  /** Every block resident somewhere or with a copy in flight, in creation order. */
  private readonly blocks = new Map<bigint, PoolBlock>();
  /** Map insertion order is the LRU order: first = least recently used. */
  private readonly deviceLru = new Map<bigint, PoolBlock>();
  private readonly hostLru = new Map<bigint, PoolBlock>();
  private pendingCopies: PoolBlock[] = [];
  private step = 0;

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

  /** Engine hashes of the prompt's complete blocks (what admitPrompt would look up). */
  hashesOf(tokenIds: readonly number[], opts: AdmitOptions = {}): bigint[] {
    const salt = loraSalt(opts.loraName ?? null);
    const n = Math.floor(tokenIds.length / this.blockSize);
    const out: bigint[] = [];
    let parent: bigint | null = null;
    for (let i = 0; i < n; i++) {
      parent = engineHashOf(parent, tokenIds, i * this.blockSize, this.blockSize, salt);
      out.push(parent);
    }
    return out;
  }

  /**
   * One prefill: reuse the resident prefix, store the rest on Device (evicting and offloading
   * as needed). Returns the events in emission order and the prefix hits found before the step.
   */
  admitPrompt(tokenIds: readonly number[], opts: AdmitOptions = {}): AdmitResult {
    const loraName = opts.loraName ?? null;
    const hashes = this.hashesOf(tokenIds, opts);
    const step = ++this.step;
    const out = new EventBuilder(this.blockSize);

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
          loraName,
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
      out.stored(h, b.parent, resident ? null : b.tokenIds, 'gpu', b.loraName);
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
    return { events: out.finish(), hitBlocks, hostHitBlocks, promptBlocks: hashes.length, placedBlocks: placed };
  }

  /**
   * §11.7 cache reset: every tier (null), or one tier. Copies in flight are abandoned.
   */
  clear(medium: 'gpu' | 'cpu' | null = null): WireEvent[] {
    const out = new EventBuilder(this.blockSize);
    out.cleared(medium);
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
      if (b.loraName !== null) block.lora_name = b.loraName;
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
    const out = new EventBuilder(this.blockSize);
    out.cleared(null);
    const listed = new Set<bigint>();
    this.walkParentFirst((b) => {
      if (b.parent !== null && !listed.has(b.parent)) return;
      listed.add(b.hash);
      if (b.onDevice) out.stored(b.hash, b.parent, b.tokenIds, 'gpu', b.loraName);
      if (b.onHost) out.stored(b.hash, b.parent, b.onDevice ? null : b.tokenIds, 'cpu', b.loraName);
    });
    return out.finish();
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
    out.stored(b.hash, b.parent, resident ? null : b.tokenIds, 'cpu', b.loraName);
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
