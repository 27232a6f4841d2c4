/**
 * Multi-stream prefix query (kv-events §8, routing.md `POST /v1/internal/kv-cache/query`): one
 * entry per stream, sorted by instance name then dp rank, each matched against that stream's own
 * index only — prefixes are never assembled across streams or DP ranks (§8, P2).
 *
 * Cost: the §4 key chain is computed once per distinct (block_size, hasher) per query, not once
 * per stream; each stream then walks the shared chain with O(1) lookups per block. Chain buffers
 * are kept between queries, so a steady query load allocates only the result objects.
 * Synchronous and pure: the hashers were created (asynchronously) when the indexes were built.
 */
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import type { PrefixHit, StreamIndex } from './stream-index.js';
import { sequenceForJson } from '../../shared/view/query-result.js';
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';

// The response types live in shared/ (the router answers the same JSON); re-exported by name for
// the directory's existing importers.
export type { QueryResult, StreamMatch };

/** One stream as the query sees it (the subscriber's published state, §8). */
export interface QueryableStream {
  instanceName: string;
  dpRank: number;
  blockSize: number;
  hashSeed: bigint;
  synchronized: boolean;
  /** `last`, −1n when none (§8: kept as unsigned 64-bit). */
  sequence: bigint;
  error: string;
  index: StreamIndex | null;
}

/** A key chain computed for one (block_size, hasher) during the current query. */
interface ChainSlot {
  blockSize: number;
  hasher: ContentKeyHasher;
  keys: Uint8Array;
  blocks: number;
  /** Query number this chain belongs to; stale slots are recomputed, not reallocated. */
  stamp: number;
}

/** Orders streams by instance name (UTF-16 code units, locale-independent), then dp rank. */
function byNameThenRank(a: QueryableStream, b: QueryableStream): number {
  if (a.instanceName !== b.instanceName) return a.instanceName < b.instanceName ? -1 : 1;
  return a.dpRank - b.dpRank;
}

export class StreamQuery {
  private readonly chains: ChainSlot[] = [];
  private stamp = 0;
  private readonly hit: PrefixHit = { deviceBlocks: 0, hostOnlyBlocks: 0 };

  /**
   * Prefix hits of `tokenIds` (already validated ints in [0, 2^31)) on every stream. A stream
   * that is not synchronized, or has no index, reports zero hits and zero block counts (§7, §8);
   * an empty token list reports state and block counts only.
   */
  query(tokenIds: ArrayLike<number>, streams: readonly QueryableStream[]): QueryResult {
    this.stamp++;
    const sorted = streams.slice().sort(byNameThenRank);
    const matches: StreamMatch[] = new Array<StreamMatch>(sorted.length);
    let commonBlockSize = sorted.length > 0 ? sorted[0].blockSize : 0;
    for (let i = 0; i < sorted.length; i++) {
      const s = sorted[i];
      if (s.blockSize !== commonBlockSize) commonBlockSize = 0;
      const index = s.synchronized ? s.index : null;
      let deviceHitTokens = 0;
      let hostOnlyHitTokens = 0;
      if (index !== null && tokenIds.length >= index.blockSize) {
        const chain = this.chainFor(tokenIds, index.blockSize, index.hasher);
        index.matchPrefix(chain.keys, chain.blocks, this.hit);
        deviceHitTokens = this.hit.deviceBlocks * index.blockSize;
        hostOnlyHitTokens = this.hit.hostOnlyBlocks * index.blockSize;
      }
      matches[i] = {
        instance_name: s.instanceName,
        dp_rank: s.dpRank,
        synchronized: s.synchronized,
        sequence: sequenceForJson(s.sequence),
        device_hit_tokens: deviceHitTokens,
        host_only_hit_tokens: hostOnlyHitTokens,
        reusable_prefix_tokens: deviceHitTokens + hostOnlyHitTokens,
        device_blocks: index === null ? 0 : index.deviceBlocks,
        host_blocks: index === null ? 0 : index.hostBlocks,
        error: s.error,
      };
    }
    return { input_tokens: tokenIds.length, block_size: commonBlockSize, matches };
  }

  /**
   * The chain of `tokenIds` for (blockSize, hasher), computed at most once per query. The index's
   * own hasher is used (not a lookup by the stream's hash_seed) because it is the one that built
   * the keys being matched.
   */
  private chainFor(tokenIds: ArrayLike<number>, blockSize: number, hasher: ContentKeyHasher): ChainSlot {
    let free: ChainSlot | null = null;
    for (let i = 0; i < this.chains.length; i++) {
      const c = this.chains[i];
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

  private fill(c: ChainSlot, tokenIds: ArrayLike<number>): void {
    const blocks = Math.floor(tokenIds.length / c.blockSize);
    if (c.keys.length < blocks * 16) c.keys = new Uint8Array(Math.max(blocks * 16, c.keys.length * 2));
    c.hasher.chain(tokenIds, c.blockSize, c.keys);
    c.blocks = blocks;
    c.stamp = this.stamp;
  }
}
