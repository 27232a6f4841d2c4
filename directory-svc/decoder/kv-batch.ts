/**
 * Decoded forms of the kv-events wire messages (§3, §6). Produced by the decoder, consumed by
 * the index and the subscriber. Wire field names never appear past the decoder.
 */
import type { KeyIdentity } from '../../shared/keys/cache-identity.js';
import { TIER_BOTH, type TierBits } from '../../shared/keys/tier-bits.js';

/**
 * An engine hash (the opaque 64-bit block id on the wire), always reduced modulo 2^64 to an
 * unsigned bigint (§3.3). Branded so it is never mixed up with a content-key id.
 */
export type EngineHash = bigint & { readonly __brand: 'EngineHash' };

export interface BlockStoredEvent {
  readonly kind: 'stored';
  /**
   * Engine hashes, unsigned 64-bit. A typed array so the hot path never allocates one bigint
   * per block: the index reads it through a Uint32Array view (lo = [2i], hi = [2i+1]).
   */
  readonly blockHashes: BigUint64Array;
  /** null = first block of a sequence. */
  readonly parentBlockHash: EngineHash | null;
  /** Empty = tokenless (replica notice). Every id already checked to fit int32. */
  readonly tokenIds: Int32Array;
  /** null when absent on the wire. */
  readonly blockSize: number | null;
  /**
   * Exactly one tier (medium nil → Device); TIER_UNSERVED for a medium we do not serve or a
   * `locality` of `"REMOTE"` (cache-identity §4 rule 5).
   */
  readonly tier: 0 | 1 | 2;
  /**
   * Every block is out of scope (cache-identity §4 rule 1: `lora_id` without `lora_name`, or an
   * empty name or salt): recorded UNINDEXED, counted `out_of_scope`, never an error for scope.
   */
  readonly outOfScope: boolean;
  /**
   * The chain's identity (cache-identity §3–§4): its LoRA name, and the salt of block 0 when the
   * event has no parent. Block 0 of a parentless event is keyed with `rootSuffix`, every other
   * block with `chainSuffix`. Shared instances (PLAIN_IDENTITY for plain text): never copied.
   */
  readonly identity: KeyIdentity;
  /**
   * cache-identity §4 rule 2: blocks [0, reproducibleBlocks) have keys a text request can
   * reproduce; the block at `reproducibleBlocks` carries multimodal items or prompt embeddings, so
   * it and every later block of the event (its descendants) are UNINDEXED, counted `multimodal`.
   * Equal to the hash count when every block is reproducible.
   */
  readonly reproducibleBlocks: number;
  /** cache-identity §4 rule 4: the event's KV cache group (`group_idx`, absent = 0). */
  readonly group: number;
  /** `kv_cache_spec_kind` absent or a reusable-prefix kind (full, MLA or sink full attention). */
  readonly reusableGroup: boolean;
}

export interface BlockRemovedEvent {
  readonly kind: 'removed';
  readonly blockHashes: BigUint64Array;
  /** TIER_UNSERVED: removal from a medium (or a REMOTE locality) we do not serve. */
  readonly tier: 0 | 1 | 2;
  /** cache-identity §4 rule 4: `group_idx` (absent = 0); only it decides, a removal has no kind. */
  readonly group: number;
}

export interface AllBlocksClearedEvent {
  readonly kind: 'cleared';
  /** nil medium (or the positional form) → both tiers; TIER_UNSERVED: only a medium (or a REMOTE locality) we do not serve. */
  readonly tiers: TierBits | 0;
}

export type KvEvent = BlockStoredEvent | BlockRemovedEvent | AllBlocksClearedEvent;

/** One live message after §2 framing checks and §3 decoding. */
export interface LiveBatch {
  /** Frame 1, u64be. */
  readonly seq: bigint;
  readonly ts: number;
  readonly dpRank: number;
  readonly events: KvEvent[];
  /** §7.2 buffer cost: frame bytes + 64/event + 8/block hash + 4/token id. */
  readonly bufferCost: number;
}

/** One block of a snapshot chunk (§6). */
export interface SnapshotBlock {
  readonly blockHash: EngineHash;
  readonly parentBlockHash: EngineHash | null;
  /** Exactly block_size ids. */
  readonly tokenIds: Int32Array;
  readonly tiers: TierBits;
  /** `lora_id` without `lora_name` (cache-identity §4 rule 1): UNINDEXED, counted `out_of_scope`. */
  readonly outOfScope: boolean;
  /** Multimodal items or embeddings in its `extra_keys` (§4 rule 2): UNINDEXED, counted `multimodal`. */
  readonly multimodal: boolean;
  /** LoRA name, and the salt when the block has no parent (cache-identity §3–§4). */
  readonly identity: KeyIdentity;
}

export interface SnapshotChunk {
  readonly watermark: bigint;
  readonly blocks: SnapshotBlock[];
}

/** True when a batch is a full-state batch (§7.3): AllBlocksCleared(nil) then only BlockStored. */
export function isFullStateBatch(events: readonly KvEvent[]): boolean {
  if (events.length === 0) return false;
  const first = events[0];
  if (first.kind !== 'cleared' || first.tiers !== TIER_BOTH) return false;
  for (let i = 1; i < events.length; i++) if (events[i].kind !== 'stored') return false;
  return true;
}
