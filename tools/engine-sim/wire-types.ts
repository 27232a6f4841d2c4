/**
 * Wire-level shapes the engine simulator publishes (kv-events §3, §6). Field names are the
 * wire's own (snake_case) because these objects are encoded as-is; they never leave tools/.
 *
 * A simulator test may put any value in a field (a wrong type, an unknown key) to exercise a
 * decoder; the encoder only normalizes hash fields (§3.3) so 64-bit values stay exact.
 */

/** An engine hash as it may go on the wire (§3.3): integer (taken mod 2^64) or bin. */
export type WireHash = bigint | number | Uint8Array;

/** §3.4: case-insensitive on the wire; the simulator itself always emits lower case. */
export type WireMedium = 'gpu' | 'cpu' | (string & {});

export interface WireBlockStored {
  readonly type: 'BlockStored';
  readonly block_hashes: readonly WireHash[];
  readonly parent_block_hash: WireHash | null;
  /** Empty or null = tokenless replica notice (§5.1). */
  readonly token_ids: readonly number[] | null;
  readonly block_size: number | null;
  readonly medium?: WireMedium | null;
  readonly lora_id?: number | null;
  readonly lora_name?: string | null;
  /** vLLM 0.19+: one entry per block hash (that block's extra keys, or nil), cache-identity §4. */
  readonly extra_keys?: readonly unknown[] | null;
  /** Hybrid models (cache-identity §4 rule 4): the KV cache group and its spec. */
  readonly group_idx?: number | null;
  readonly kv_cache_spec_kind?: string | null;
  readonly kv_cache_spec_sliding_window?: number | null;
  /** Unknown keys are passed through; decoders must ignore them (§3.2). */
  readonly [extra: string]: unknown;
}

export interface WireBlockRemoved {
  readonly type: 'BlockRemoved';
  readonly block_hashes: readonly WireHash[];
  readonly medium?: WireMedium | null;
  readonly group_idx?: number | null;
  readonly [extra: string]: unknown;
}

export interface WireAllBlocksCleared {
  readonly type: 'AllBlocksCleared';
  /** Absent or null = both tiers (§3.4). */
  readonly medium?: WireMedium | null;
  readonly [extra: string]: unknown;
}

/** Canonical map events (§3.2, §11.3). */
export type WireMapEvent = WireBlockStored | WireBlockRemoved | WireAllBlocksCleared;

/**
 * Legacy positional form (§3.2), element 0 the event name. Publishers must not emit it; the
 * simulator can, so decoder tests (D1, D2) run over the real socket path.
 */
export type WirePositionalEvent = readonly unknown[];

export type WireEvent = WireMapEvent | WirePositionalEvent;

/** One block of a snapshot chunk (§6 chunk envelope). */
export interface WireSnapshotBlock {
  readonly block_hash: WireHash;
  readonly parent_block_hash: WireHash | null;
  readonly token_ids: readonly number[];
  /** `["gpu"]`, `["cpu"]` or `["gpu","cpu"]`. */
  readonly media: readonly WireMedium[];
  readonly lora_id?: number | null;
  readonly lora_name?: string | null;
  /** As a one-hash BlockStored carries it: `[this block's extra keys]`. */
  readonly extra_keys?: readonly unknown[] | null;
}
