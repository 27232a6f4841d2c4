/**
 * One stream's slot in the directory's shared residency group (shared/index), mirroring the
 * residency of the stream's SERVED index exactly: the query view (kv-events §8) matches the slot,
 * never the per-stream index. Fed the way the view stream is: the served index's residency
 * changes one key at a time, and a reset (`serve`) whenever another index is served or none is
 * (a swap after recovery, restore or reconciliation; leaving SYNCHRONIZED).
 *
 * A change is taken only from the index being mirrored, so changes an index reports before its
 * reset (buffered batches replayed onto a fresh index) are not applied twice: the reset loads the
 * index whole. Clearing the slot costs O(holder sets) (ResidencyIndex.clearStream), not O(keys).
 */
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { ResidencyGroups, type GroupSlot } from '../../shared/index/residency-groups.js';
import type { ResidencyIndex } from '../../shared/index/residency-index.js';
import type { StreamIndex } from './stream-index.js';

/** Also what the stream's observers are handed as its served index (stream-observer.ts). */
export class ServedResidency implements GroupSlot {
  readonly group: ResidencyIndex;
  readonly slot: number;
  private mirrored: StreamIndex | null = null;
  private closed = false;

  constructor(
    private readonly groups: ResidencyGroups,
    blockSize: number,
    hasher: ContentKeyHasher,
  ) {
    const joined = groups.join(blockSize, hasher);
    this.group = joined.group;
    this.slot = joined.slot;
  }

  /** A slot in a private group holding only `index` (tests, benchmarks, single-stream tools). */
  static of(index: StreamIndex): ServedResidency {
    const r = new ServedResidency(new ResidencyGroups(), index.blockSize, index.hasher);
    r.serve(index);
    return r;
  }

  /** The index being mirrored (null: the slot is empty). */
  get servedIndex(): StreamIndex | null {
    return this.mirrored;
  }

  /** Device blocks of the mirrored index (0 when none). */
  get deviceBlocks(): number {
    return this.mirrored?.deviceBlocks ?? 0;
  }

  get hostBlocks(): number {
    return this.mirrored?.hostBlocks ?? 0;
  }

  /** `index` changed one key's residency (its ResidencyObserver); ignored unless it is mirrored. */
  change(index: StreamIndex, words: Uint32Array, offset: number, newTiers: number): void {
    if (index !== this.mirrored) return;
    // An index of this group names the key by its id: no second lookup of its words.
    const id = index.keySpace === this.group ? index.changingKeyId : -1;
    if (id >= 0) this.group.setIdTier(this.slot, id, newTiers);
    else this.group.setKeyTiers(this.slot, words, offset, newTiers);
  }

  /** Mirrors `index` from now on (null: nothing is served). O(holder sets + keys of the new index). */
  serve(index: StreamIndex | null): void {
    // The same index again: its changes were all forwarded, the mirror is exact.
    if (this.closed || index === this.mirrored) return;
    this.group.clearStream(this.slot);
    this.mirrored = index;
    if (index === null) return;
    // An index of this group names its keys by the group's ids: loaded without hashing them.
    if (index.keySpace === this.group) {
      const now = index.exportKeyIds();
      this.group.setIdTiers(this.slot, now.ids, now.tiers);
    } else {
      const now = index.exportResidency();
      this.group.setTiers(this.slot, now.keys, now.tiers);
    }
  }

  /** The stream is gone: frees the slot. */
  close(): void {
    if (this.closed) return;
    this.serve(null);
    this.closed = true;
    this.groups.leave(this);
  }
}
