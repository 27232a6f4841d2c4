/**
 * What a publisher holds, rebuilt from the events it published: engine hash → {parent, tokens,
 * tiers}. Serves as the default snapshot state of a bare RankPublisher (so a test that only
 * publishes events still gets a truthful §6 reply) and as the reference model that the block
 * pool's own snapshot is checked against.
 *
 * Lenient on purpose: events a decoder would reject (tests publish those too) are skipped where
 * they cannot be interpreted, never thrown on. Pure: no sockets, no clock.
 *
 * Hybrid models: only KV cache group 0 is modelled (the group a subscriber indexes when group 0 is
 * full attention, cache-identity §4 rule 4); stores and removals of any other `group_idx` are
 * another group's residency and leave the model alone.
 */
import { TIER_BOTH, TIER_DEVICE, TIER_HOST } from '../../shared/keys/tier-bits.js';
import { hashToU64 } from './wire-encoding.js';
import type { WireEvent, WireHash, WireSnapshotBlock } from './wire-types.js';


interface ModelBlock {
  readonly parent: bigint | null;
  readonly tokenIds: readonly number[];
  tiers: number;
  readonly loraId: number | null;
  readonly loraName: string | null;
  /** This block's own entry of the event's per-block `extra_keys` (nil entries are not kept). */
  readonly extraKey: unknown;
}

/** §3.4 medium → tier bit; 0 for a medium the model cannot interpret. nil → `nilMeans`. */
function tierOf(medium: unknown, nilMeans: number): number {
  if (medium === null || medium === undefined) return nilMeans;
  if (typeof medium !== 'string') return 0;
  const m = medium.toLowerCase();
  return m === 'gpu' ? TIER_DEVICE : m === 'cpu' ? TIER_HOST : 0;
}

function asHash(h: unknown): bigint | null {
  if (typeof h === 'bigint' || typeof h === 'number' || h instanceof Uint8Array) {
    try {
      return hashToU64(h as WireHash);
    } catch {
      return null; // a non-integer number: the decoder's parse error, nothing to model
    }
  }
  return null;
}

export class ResidencyModel {
  /** Insertion order = store order, which is parent-first except after a parent's re-store. */
  private readonly blocks = new Map<bigint, ModelBlock>();

  /** Number of resident blocks (engine hashes with a non-empty tier set). */
  get size(): number {
    return this.blocks.size;
  }

  /** Tier bits of a hash (1 gpu, 2 cpu, 3 both), 0 when not resident. */
  tiersOf(hash: bigint): number {
    return this.blocks.get(hash)?.tiers ?? 0;
  }

  clear(): void {
    this.blocks.clear();
  }

  /** Apply one batch's events in order (§5 semantics on engine hashes). */
  apply(events: readonly WireEvent[]): void {
    for (const e of events) {
      if (Array.isArray(e)) this.applyPositional(e);
      else this.applyMap(e as Record<string, unknown>);
    }
  }

  private applyMap(e: Record<string, unknown>): void {
    switch (e.type) {
      case 'BlockStored':
        if (otherGroup(e.group_idx)) return;
        this.stored(e.block_hashes, e.parent_block_hash, e.token_ids, e.block_size, e.medium, e.lora_id, e.lora_name, e.extra_keys);
        return;
      case 'BlockRemoved':
        if (otherGroup(e.group_idx)) return;
        this.removed(e.block_hashes, e.medium);
        return;
      case 'AllBlocksCleared':
        this.cleared(e.medium);
        return;
      default:
        return;
    }
  }

  private applyPositional(e: readonly unknown[]): void {
    // §3.2 positional layouts (vLLM field order, group_idx after extra_keys / medium);
    // AllBlocksCleared has no medium position (clears both).
    switch (e[0]) {
      case 'BlockStored':
        if (otherGroup(e[9])) return;
        this.stored(e[1], e[2], e[3], e[4], e[6], e[5], e[7], e[8]);
        return;
      case 'BlockRemoved':
        if (otherGroup(e[3])) return;
        this.removed(e[1], e[2]);
        return;
      case 'AllBlocksCleared':
        this.cleared(null);
        return;
      default:
        return;
    }
  }

  private stored(
    hashes: unknown,
    parentHash: unknown,
    tokenIds: unknown,
    blockSize: unknown,
    medium: unknown,
    loraId: unknown,
    loraName: unknown,
    extraKeys: unknown,
  ): void {
    const tier = tierOf(medium, TIER_DEVICE);
    if (tier === 0 || !Array.isArray(hashes)) return;
    const tokens = Array.isArray(tokenIds) ? (tokenIds as number[]) : [];
    let parent = parentHash === null || parentHash === undefined ? null : asHash(parentHash);
    const bs = typeof blockSize === 'number' && blockSize > 0 ? blockSize : hashes.length > 0 ? tokens.length / hashes.length : 0;
    for (let i = 0; i < hashes.length; i++) {
      const h = asHash(hashes[i]);
      if (h === null) return;
      const known = this.blocks.get(h);
      if (known) known.tiers |= tier;
      else if (tokens.length > 0) {
        this.blocks.set(h, {
          parent,
          tokenIds: tokens.slice(i * bs, (i + 1) * bs),
          tiers: tier,
          loraId: typeof loraId === 'number' ? loraId : null,
          loraName: typeof loraName === 'string' ? loraName : null,
          extraKey: Array.isArray(extraKeys) ? (extraKeys[i] ?? null) : null,
        });
      }
      // Within one event block i's parent is block i−1 (§4).
      parent = h;
    }
  }

  private removed(hashes: unknown, medium: unknown): void {
    const tier = tierOf(medium, TIER_DEVICE);
    if (tier === 0 || !Array.isArray(hashes)) return;
    for (const raw of hashes) {
      const h = asHash(raw);
      if (h === null) continue;
      const b = this.blocks.get(h);
      if (!b) continue;
      b.tiers &= ~tier;
      if (b.tiers === 0) this.blocks.delete(h);
    }
  }

  private cleared(medium: unknown): void {
    const tiers = tierOf(medium, TIER_BOTH);
    if (tiers === TIER_BOTH) {
      this.blocks.clear();
      return;
    }
    for (const [h, b] of this.blocks) {
      b.tiers &= ~tiers;
      if (b.tiers === 0) this.blocks.delete(h);
    }
  }

  /**
   * §6/§11.8 snapshot: each resident block once, parent-first, with its current media and its
   * parent hash (kept even when the parent left both tiers). O(blocks): each block is emitted
   * after its resident ancestors, walking up only through ancestors not yet emitted.
   */
  snapshot(): WireSnapshotBlock[] {
    const out: WireSnapshotBlock[] = [];
    const emitted = new Set<bigint>();
    const chain: bigint[] = [];
    for (const start of this.blocks.keys()) {
      if (emitted.has(start)) continue;
      chain.length = 0;
      let h: bigint | null = start;
      while (h !== null && !emitted.has(h) && chain.length <= this.blocks.size) {
        const b = this.blocks.get(h);
        if (!b) break;
        chain.push(h);
        h = b.parent;
      }
      for (let i = chain.length - 1; i >= 0; i--) {
        const hash = chain[i];
        if (emitted.has(hash)) continue;
        emitted.add(hash);
        out.push(snapshotBlockOf(hash, this.blocks.get(hash) as ModelBlock));
      }
    }
    return out;
  }
}

export function mediaOf(tiers: number): ('gpu' | 'cpu')[] {
  return tiers === TIER_BOTH ? ['gpu', 'cpu'] : tiers === TIER_HOST ? ['cpu'] : ['gpu'];
}

function snapshotBlockOf(hash: bigint, b: ModelBlock): WireSnapshotBlock {
  const out: {
    block_hash: bigint;
    parent_block_hash: bigint | null;
    token_ids: readonly number[];
    media: ('gpu' | 'cpu')[];
    lora_id?: number;
    lora_name?: string;
    extra_keys?: readonly unknown[];
  } = { block_hash: hash, parent_block_hash: b.parent, token_ids: b.tokenIds, media: mediaOf(b.tiers) };
  // §11.8: identity blocks carry their scope fields, extra_keys as a one-hash event would;
  // plain-text ones omit them (= nil).
  if (b.loraId !== null) out.lora_id = b.loraId;
  if (b.loraName !== null) out.lora_name = b.loraName;
  if (b.extraKey !== null) out.extra_keys = [b.extraKey];
  return out;
}

/** A `group_idx` naming a group other than 0 (absent or nil = group 0). */
function otherGroup(groupIdx: unknown): boolean {
  return groupIdx !== undefined && groupIdx !== null && groupIdx !== 0;
}
