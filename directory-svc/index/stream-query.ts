/**
 * Multi-stream prefix query (kv-events §8, routing.md `POST /v1/internal/kv-cache/query`): one
 * entry per stream, sorted by instance name then dp rank, each stream's prefix its own — never
 * assembled across streams or DP ranks (§8, P2).
 *
 * Cost: each stream's served residency is a slot of its (block_size, hash_seed) group's shared
 * ResidencyIndex (shared/index), and each group is matched once for all its synchronized streams:
 * about one key lookup per prompt block, hashing lazily (block i only while some stream still
 * matches 0..i−1). A steady query load allocates only the result objects.
 * Synchronous and pure: the hashers were created (asynchronously) when the streams were.
 */
import type { GroupSlot } from '../../shared/index/residency-groups.js';
import type { ResidencyIndex } from '../../shared/index/residency-index.js';
import type { StreamIndex } from './stream-index.js';
import { commonBlockSize, streamMatch } from '../../shared/view/query-result.js';
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';
import { byNameThenRank } from '../../shared/keys/stream-key.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';

// The response types live in shared/ (the router answers the same JSON); re-exported by name for
// the directory's existing importers.
export type { QueryResult, StreamMatch };

/** One stream as the query sees it (the subscriber's published state, §8). */
export interface QueryableStream {
  instanceName: string;
  /** engines.md §1; absent = xllm. */
  engineKind?: EngineKind;
  dpRank: number;
  blockSize: number;
  hashSeed: bigint;
  synchronized: boolean;
  /** `last`, −1n when none (§8: kept as unsigned 64-bit). */
  sequence: bigint;
  error: string;
  /** The served index (block counts, view-stream export); null unless synchronized. */
  index: StreamIndex | null;
  /** The served index's residency in its shared group (what is matched); null unless synchronized. */
  residency: GroupSlot | null;
}

/**
 * A query's cache identity (cache-identity §2): the key identity its prompt is hashed under, and
 * which instances are in scope (those serving its model or with an unknown list); null = all.
 * Streams out of scope are left out of the answer, not listed with zero hits: a zero-hit row would
 * read as a cold candidate, and a caller picking the best row could pick an engine of another model.
 */
export interface QueryScope {
  readonly identity: KeyIdentity;
  readonly admits: ((instanceName: string) => boolean) | null;
}

export class StreamQuery {
  /** Groups of the current query (reused). */
  private readonly groups: ResidencyIndex[] = [];

  /**
   * Prefix hits of `tokenIds` (already validated ints in [0, 2^31)) on every stream, keyed under
   * `identity` (cache-identity §3; plain by default). A stream that is not synchronized, or has no
   * index, reports zero hits and zero block counts (§7, §8); an empty token list reports state
   * and block counts only.
   */
  query(tokenIds: ArrayLike<number>, streams: readonly QueryableStream[], identity: KeyIdentity = PLAIN_IDENTITY): QueryResult {
    const sorted = streams.slice().sort(byNameThenRank);
    const groups = this.groups;
    groups.length = 0;
    for (const s of sorted) {
      const r = s.synchronized && s.index !== null ? s.residency : null;
      if (r === null) continue;
      if (!groups.includes(r.group)) {
        r.group.clearCandidates();
        groups.push(r.group);
      }
      r.group.addCandidate(r.slot);
    }
    for (const g of groups) g.match(tokenIds, identity);
    const matches: StreamMatch[] = new Array<StreamMatch>(sorted.length);
    for (let i = 0; i < sorted.length; i++) {
      const s = sorted[i]!;
      const index = s.synchronized ? s.index : null;
      const r = index !== null ? s.residency : null;
      const deviceHitTokens = r === null ? 0 : r.group.deviceHitBlocks(r.slot) * s.blockSize;
      const hostOnlyHitTokens = r === null ? 0 : r.group.hostOnlyHitBlocks(r.slot) * s.blockSize;
      matches[i] = streamMatch(s, s.synchronized, deviceHitTokens, hostOnlyHitTokens, index === null ? 0 : index.deviceBlocks, index === null ? 0 : index.hostBlocks, s.error);
    }
    groups.length = 0;
    return { input_tokens: tokenIds.length, block_size: commonBlockSize(sorted), matches };
  }
}
