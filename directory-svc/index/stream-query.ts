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
import { KeyChainCache } from '../../shared/keys/key-chain-cache.js';
import type { PrefixHit } from '../../shared/keys/content-key-table.js';
import type { StreamIndex } from './stream-index.js';
import { commonBlockSize, streamMatch } from '../../shared/view/query-result.js';
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

/** Orders streams by instance name (UTF-16 code units, locale-independent), then dp rank. */
function byNameThenRank(a: QueryableStream, b: QueryableStream): number {
  if (a.instanceName !== b.instanceName) return a.instanceName < b.instanceName ? -1 : 1;
  return a.dpRank - b.dpRank;
}

export class StreamQuery {
  private readonly chains = new KeyChainCache();
  private readonly hit: PrefixHit = { deviceBlocks: 0, hostOnlyBlocks: 0 };

  /**
   * Prefix hits of `tokenIds` (already validated ints in [0, 2^31)) on every stream. A stream
   * that is not synchronized, or has no index, reports zero hits and zero block counts (§7, §8);
   * an empty token list reports state and block counts only.
   */
  query(tokenIds: ArrayLike<number>, streams: readonly QueryableStream[]): QueryResult {
    this.chains.nextCall();
    const sorted = streams.slice().sort(byNameThenRank);
    const matches: StreamMatch[] = new Array<StreamMatch>(sorted.length);
    for (let i = 0; i < sorted.length; i++) {
      const s = sorted[i];
      const index = s.synchronized ? s.index : null;
      let deviceHitTokens = 0;
      let hostOnlyHitTokens = 0;
      if (index !== null && tokenIds.length >= index.blockSize) {
        // The index's own hasher (not a lookup by the stream's hash_seed): it built the keys matched.
        const chain = this.chains.chainFor(tokenIds, index.blockSize, index.hasher);
        index.matchPrefix(chain.keys, chain.blocks, this.hit);
        deviceHitTokens = this.hit.deviceBlocks * index.blockSize;
        hostOnlyHitTokens = this.hit.hostOnlyBlocks * index.blockSize;
      }
      matches[i] = streamMatch(s, s.synchronized, deviceHitTokens, hostOnlyHitTokens, index === null ? 0 : index.deviceBlocks, index === null ? 0 : index.hostBlocks, s.error);
    }
    return { input_tokens: tokenIds.length, block_size: commonBlockSize(sorted), matches };
  }
}
