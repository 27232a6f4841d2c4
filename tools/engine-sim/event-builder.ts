/**
 * Collects the events of one engine step in emission order and merges neighbours the way engines
 * do: consecutive token-bearing stores of a chain go into one `BlockStored` (block i's parent is
 * block i−1 of the event, §4), consecutive tokenless replica notices and consecutive removals of
 * one tier share an event. Merging never reorders, so §11.5 holds for the merged batch whenever
 * it held event by event.
 */
import type { WireEvent } from './wire-types.js';

export type PoolMedium = 'gpu' | 'cpu';

interface StoredDraft {
  type: 'BlockStored';
  block_hashes: bigint[];
  parent_block_hash: bigint | null;
  token_ids: number[];
  block_size: number;
  lora_id: null;
  medium: PoolMedium;
  lora_name: string | null;
  extra_keys: null;
}

interface RemovedDraft {
  type: 'BlockRemoved';
  block_hashes: bigint[];
  medium: PoolMedium;
}

type Draft = StoredDraft | RemovedDraft | { type: 'AllBlocksCleared'; medium: PoolMedium | null };

export class EventBuilder {
  private readonly drafts: Draft[] = [];

  constructor(private readonly blockSize: number) {}

  get length(): number {
    return this.drafts.length;
  }

  /**
   * A token-bearing store (§5.1) of `hash` with its exact block tokens, or a tokenless replica
   * notice when `tokens` is null (§11.6: only for hashes resident in some tier).
   */
  stored(hash: bigint, parent: bigint | null, tokens: readonly number[] | null, medium: PoolMedium, loraName: string | null): void {
    const last = this.drafts[this.drafts.length - 1];
    if (last !== undefined && last.type === 'BlockStored' && last.medium === medium && last.lora_name === loraName) {
      const lastTokenless = last.token_ids.length === 0;
      if (tokens === null && lastTokenless) {
        last.block_hashes.push(hash);
        return;
      }
      if (tokens !== null && !lastTokenless && last.block_hashes[last.block_hashes.length - 1] === parent) {
        last.block_hashes.push(hash);
        for (const t of tokens) last.token_ids.push(t);
        return;
      }
    }
    this.drafts.push({
      type: 'BlockStored',
      block_hashes: [hash],
      // A tokenless notice names no parent: §5.1 only checks a non-nil one, and nil is always safe.
      parent_block_hash: tokens === null ? null : parent,
      token_ids: tokens === null ? [] : tokens.slice(),
      block_size: this.blockSize,
      lora_id: null,
      medium,
      // §11.7: nil for plain-text blocks, the adapter name for LoRA ones.
      lora_name: loraName,
      extra_keys: null,
    });
  }

  removed(hash: bigint, medium: PoolMedium): void {
    const last = this.drafts[this.drafts.length - 1];
    if (last !== undefined && last.type === 'BlockRemoved' && last.medium === medium) {
      last.block_hashes.push(hash);
      return;
    }
    this.drafts.push({ type: 'BlockRemoved', block_hashes: [hash], medium });
  }

  /** §11.7: a cache reset; null clears both tiers. */
  cleared(medium: PoolMedium | null): void {
    this.drafts.push({ type: 'AllBlocksCleared', medium });
  }

  /** The events so far; the builder must not be used afterwards. */
  finish(): WireEvent[] {
    return this.drafts as WireEvent[];
  }
}
