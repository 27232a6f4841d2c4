/**
 * The residency groups of one view (the directory's query view, or one router view state): one
 * ResidencyIndex per (block_size, hash_seed), since content keys mean the same only within a
 * group (kv-events §4). A stream joins its group for a slot and leaves it when it goes; a group
 * is dropped with its last stream. Pure: no I/O.
 */
import type { ContentKeyHasher } from '../keys/content-key.js';
import { MAX_SLOTS } from './holder-sets.js';
import { ResidencyIndex } from './residency-index.js';

/** A stream's place in its group. */
export interface GroupSlot {
  readonly group: ResidencyIndex;
  readonly slot: number;
}

/** The map key of a group. */
export function residencyGroupKey(blockSize: number, hashSeed: bigint): string {
  return `${blockSize}/${hashSeed}`;
}

export class ResidencyGroups {
  private readonly groups = new Map<string, ResidencyIndex>();
  private list: ResidencyIndex[] = [];

  /** Every group, for a match over all of them (rebuilt only when a group comes or goes). */
  get all(): readonly ResidencyIndex[] {
    return this.list;
  }

  /** Streams in the group of (blockSize, hashSeed); 0 when there is none. */
  streamCount(blockSize: number, hashSeed: bigint): number {
    return this.groups.get(residencyGroupKey(blockSize, hashSeed))?.streamCount ?? 0;
  }

  /** True when the group of (blockSize, hashSeed) has no free slot. */
  isFull(blockSize: number, hashSeed: bigint): boolean {
    return this.streamCount(blockSize, hashSeed) >= MAX_SLOTS;
  }

  /** A free, empty slot in (blockSize, hasher)'s group. Throws RangeError when it is full. */
  join(blockSize: number, hasher: ContentKeyHasher): GroupSlot {
    const key = residencyGroupKey(blockSize, hasher.seed);
    let group = this.groups.get(key);
    if (group === undefined) {
      group = new ResidencyIndex(blockSize, hasher);
      this.groups.set(key, group);
      this.list = [...this.groups.values()];
    }
    return { group, slot: group.addStream() };
  }

  /** Frees the slot (its residency goes with it); the group goes with its last stream. */
  leave(s: GroupSlot): void {
    s.group.removeStream(s.slot);
    if (s.group.streamCount === 0) {
      this.groups.delete(residencyGroupKey(s.group.blockSize, s.group.hasher.seed));
      this.list = [...this.groups.values()];
    }
  }
}
