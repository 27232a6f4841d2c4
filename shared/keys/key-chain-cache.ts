/**
 * The kv-events §4 key chains of one request's tokens, computed at most once per distinct
 * (block_size, hasher) per call and kept in buffers reused by the next call. The directory's
 * multi-stream query and the router's view cache walk every stream against these chains, so a
 * steady request load allocates nothing here. Pure: no I/O.
 */
import type { ContentKeyHasher } from './content-key.js';

/** A key chain computed for one (block_size, hasher) during the current call. */
export interface KeyChain {
  blockSize: number;
  hasher: ContentKeyHasher;
  /** `blocks` × 16 key bytes (the buffer may be longer). */
  keys: Uint8Array;
  blocks: number;
  /** Call number this chain belongs to; stale slots are recomputed, not reallocated. */
  stamp: number;
}

export class KeyChainCache {
  private readonly chains: KeyChain[] = [];
  private stamp = 0;

  /** Starts a new call: every chain computed before is stale. */
  nextCall(): void {
    this.stamp++;
  }

  /**
   * The chain of `tokenIds` for (blockSize, hasher), computed at most once per call. Valid until
   * the next nextCall(); do not keep it.
   */
  chainFor(tokenIds: ArrayLike<number>, blockSize: number, hasher: ContentKeyHasher): KeyChain {
    let free: KeyChain | null = null;
    for (let i = 0; i < this.chains.length; i++) {
      const c = this.chains[i]!;
      if (c.blockSize === blockSize && c.hasher === hasher) {
        if (c.stamp !== this.stamp) this.fill(c, tokenIds);
        return c;
      }
      if (free === null && c.stamp !== this.stamp) free = c;
    }
    if (free === null) {
      free = { blockSize, hasher, keys: new Uint8Array(0), blocks: 0, stamp: 0 };
      this.chains.push(free);
    }
    free.blockSize = blockSize;
    free.hasher = hasher;
    this.fill(free, tokenIds);
    return free;
  }

  private fill(c: KeyChain, tokenIds: ArrayLike<number>): void {
    const blocks = Math.floor(tokenIds.length / c.blockSize);
    if (c.keys.length < blocks * 16) c.keys = new Uint8Array(Math.max(blocks * 16, c.keys.length * 2));
    c.hasher.chain(tokenIds, c.blockSize, c.keys);
    c.blocks = blocks;
    c.stamp = this.stamp;
  }
}
