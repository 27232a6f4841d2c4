/**
 * Collects the events of one engine step in emission order and merges neighbours the way engines
 * do: consecutive token-bearing stores of a chain go into one `BlockStored` (block i's parent is
 * block i−1 of the event, §4), consecutive tokenless replica notices and consecutive removals of
 * one tier share an event. Merging never reorders, so §11.5 holds for the merged batch whenever
 * it held event by event.
 *
 * Identity (cache-identity §6, vLLM 0.19+ `BlockStored`): blocks of one event share `lora_name`
 * and `lora_id`; `extra_keys` holds one entry per block hash (the block's own extra keys, or nil)
 * and stays nil as a whole while every entry would be nil, so a plain event keeps its exact bytes.
 * A builder for a KV cache group of a hybrid model stamps `group_idx` and the group's spec on every
 * store and `group_idx` on every removal; a builder without a group stamps nothing (omit_defaults).
 */
import type { WireEvent } from './wire-types.js';

export type PoolMedium = 'gpu' | 'cpu';

/** What a stored block carries besides its hash, parent and tokens (BlockPool's blocks have these). */
export interface StoredBlockIdentity {
  /** The LoRA adapter whose KV the block holds; null for the base model. */
  readonly loraName: string | null;
  /** vLLM's per-process adapter id (`lora_id`, deprecated on the wire); null when not given. */
  readonly loraId: number | null;
  /** vLLM `extra_keys` entry of this block: LoRA name first, then the salt on a first block. */
  readonly extraKey: readonly string[] | null;
}

/** One KV cache group of a hybrid model (vLLM `group_idx`, `kv_cache_spec_kind`, window). */
export interface KvCacheGroup {
  readonly idx: number;
  /** `full_attention`, `sliding_window`, ... (cache-identity §4 rule 4). */
  readonly kind: string;
  /** Tokens, for a sliding-window group; null otherwise (the field is then omitted). */
  readonly slidingWindowTokens: number | null;
}

interface StoredDraft {
  type: 'BlockStored';
  block_hashes: bigint[];
  parent_block_hash: bigint | null;
  token_ids: number[];
  block_size: number;
  lora_id: number | null;
  medium: PoolMedium;
  lora_name: string | null;
  extra_keys: (readonly string[] | null)[] | null;
  group_idx?: number;
  kv_cache_spec_kind?: string;
  kv_cache_spec_sliding_window?: number;
}

interface RemovedDraft {
  type: 'BlockRemoved';
  block_hashes: bigint[];
  medium: PoolMedium;
  group_idx?: number;
}

type Draft = StoredDraft | RemovedDraft | { type: 'AllBlocksCleared'; medium: PoolMedium | null };

export class EventBuilder {
  private readonly drafts: Draft[] = [];

  constructor(
    private readonly blockSize: number,
    private readonly group: KvCacheGroup | null = null,
  ) {}

  get length(): number {
    return this.drafts.length;
  }

  /**
   * A token-bearing store (§5.1) of `hash` with its exact block tokens, or a tokenless replica
   * notice when `tokens` is null (§11.6: only for hashes resident in some tier).
   */
  stored(hash: bigint, parent: bigint | null, tokens: readonly number[] | null, medium: PoolMedium, id: StoredBlockIdentity): void {
    const last = this.drafts[this.drafts.length - 1];
    if (last !== undefined && last.type === 'BlockStored' && last.medium === medium && last.lora_name === id.loraName && last.lora_id === id.loraId) {
      const lastTokenless = last.token_ids.length === 0;
      if (tokens === null && lastTokenless) {
        appendBlock(last, hash, id.extraKey);
        return;
      }
      if (tokens !== null && !lastTokenless && last.block_hashes[last.block_hashes.length - 1] === parent) {
        appendBlock(last, hash, id.extraKey);
        for (const t of tokens) last.token_ids.push(t);
        return;
      }
    }
    const draft: StoredDraft = {
      type: 'BlockStored',
      block_hashes: [hash],
      // A tokenless notice names no parent: §5.1 only checks a non-nil one, and nil is always safe.
      parent_block_hash: tokens === null ? null : parent,
      token_ids: tokens === null ? [] : tokens.slice(),
      block_size: this.blockSize,
      // vLLM sets the deprecated id beside the name; nil for plain-text blocks (§11.7).
      lora_id: id.loraId,
      medium,
      lora_name: id.loraName,
      extra_keys: id.extraKey === null ? null : [id.extraKey],
    };
    const g = this.group;
    if (g !== null) {
      draft.group_idx = g.idx;
      draft.kv_cache_spec_kind = g.kind;
      if (g.slidingWindowTokens !== null) draft.kv_cache_spec_sliding_window = g.slidingWindowTokens;
    }
    this.drafts.push(draft);
  }

  removed(hash: bigint, medium: PoolMedium): void {
    const last = this.drafts[this.drafts.length - 1];
    if (last !== undefined && last.type === 'BlockRemoved' && last.medium === medium) {
      last.block_hashes.push(hash);
      return;
    }
    const draft: RemovedDraft = { type: 'BlockRemoved', block_hashes: [hash], medium };
    if (this.group !== null) draft.group_idx = this.group.idx;
    this.drafts.push(draft);
  }

  /** §11.7: a cache reset; null clears both tiers (every group: vLLM's event has no group). */
  cleared(medium: PoolMedium | null): void {
    this.drafts.push({ type: 'AllBlocksCleared', medium });
  }

  /** The events so far; the builder must not be used afterwards. */
  finish(): WireEvent[] {
    return this.drafts as WireEvent[];
  }
}

/** One more block of a merged store; `extra_keys` becomes a per-block list at its first entry. */
function appendBlock(draft: StoredDraft, hash: bigint, extraKey: readonly string[] | null): void {
  if (draft.extra_keys !== null) draft.extra_keys.push(extraKey);
  else if (extraKey !== null) {
    const keys: (readonly string[] | null)[] = new Array<readonly string[] | null>(draft.block_hashes.length).fill(null);
    keys.push(extraKey);
    draft.extra_keys = keys;
  }
  draft.block_hashes.push(hash);
}
