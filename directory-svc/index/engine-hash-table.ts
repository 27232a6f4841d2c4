/**
 * Engine hash → record table of one stream (kv-events §5): open addressing with linear probing
 * over parallel typed arrays, keyed by the hash's two uint32 halves so the hot path never builds
 * a bigint per block. A record is `{keyId, tiers}`; `tiers === 0` marks an empty slot, which is
 * exactly the §5 rule that a record with an empty tier set is deleted.
 *
 * Deletion is backward-shift (no tombstones), so slots are reused under churn, and the table
 * halves when it falls below 1/8 full: memory follows the live record count, not the history.
 * Private to `index/`; `stream-index.ts` is the folder's front module.
 */

/** Record key id meaning UNINDEXED (§5): the record never matches. */
export const UNINDEXED = -1;

const MIN_CAPACITY = 16;

/** murmur3 fmix32 over both halves: engine hashes may be small sequential integers (11, 12, …). */
function mixHash(lo: number, hi: number): number {
  let h = lo ^ Math.imul(hi, 0x9e3779b1);
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

export class EngineHashTable {
  /** Parallel per-slot columns; replaced on resize, so re-read after any insert or delete. */
  hashLo: Uint32Array;
  hashHi: Uint32Array;
  keyIds: Int32Array;
  tiers: Uint8Array;
  private mask: number;
  private live = 0;

  constructor(capacity = MIN_CAPACITY) {
    const cap = Math.max(MIN_CAPACITY, 1 << Math.ceil(Math.log2(capacity)));
    this.hashLo = new Uint32Array(cap);
    this.hashHi = new Uint32Array(cap);
    this.keyIds = new Int32Array(cap);
    this.tiers = new Uint8Array(cap);
    this.mask = cap - 1;
  }

  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  /** Slot of (lo, hi) or -1. Hot path: O(1) expected, no allocation. */
  find(lo: number, hi: number): number {
    const mask = this.mask;
    const hashLo = this.hashLo;
    const hashHi = this.hashHi;
    const tiers = this.tiers;
    let i = mixHash(lo, hi) & mask;
    while (tiers[i] !== 0) {
      if (hashLo[i] === lo && hashHi[i] === hi) return i;
      i = (i + 1) & mask;
    }
    return -1;
  }

  /** Inserts a record the caller knows is absent; `tiers` must be non-zero. Returns its slot. */
  insert(lo: number, hi: number, keyId: number, tiers: number): number {
    if ((this.live + 1) * 4 > this.capacity * 3) this.resize(this.capacity * 2);
    const mask = this.mask;
    let i = mixHash(lo, hi) & mask;
    while (this.tiers[i] !== 0) i = (i + 1) & mask;
    this.hashLo[i] = lo;
    this.hashHi[i] = hi;
    this.keyIds[i] = keyId;
    this.tiers[i] = tiers;
    this.live++;
    return i;
  }

  /** Deletes the record at `slot` by backward shift; other slots may move. */
  deleteAt(slot: number): void {
    const mask = this.mask;
    const hashLo = this.hashLo;
    const hashHi = this.hashHi;
    const keyIds = this.keyIds;
    const tiers = this.tiers;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      if (tiers[j] === 0) break;
      const home = mixHash(hashLo[j], hashHi[j]) & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      hashLo[hole] = hashLo[j];
      hashHi[hole] = hashHi[j];
      keyIds[hole] = keyIds[j];
      tiers[hole] = tiers[j];
      hole = j;
    }
    tiers[hole] = 0;
    this.live--;
    if (this.capacity > MIN_CAPACITY && this.live * 8 < this.capacity) this.resize(this.capacity / 2);
  }

  /**
   * Re-establishes the probing invariant after the caller zeroed `tiers` of some slots in place
   * (AllBlocksCleared, §5.2), and right-sizes the table. O(capacity).
   */
  compact(): void {
    let live = 0;
    for (let i = 0; i < this.tiers.length; i++) if (this.tiers[i] !== 0) live++;
    this.live = live;
    let cap = MIN_CAPACITY;
    while (live * 4 > cap * 3 || cap < live * 2) cap *= 2;
    this.resize(cap);
  }

  /** Bytes held by the columns. */
  approxBytes(): number {
    return this.hashLo.byteLength + this.hashHi.byteLength + this.keyIds.byteLength + this.tiers.byteLength;
  }

  private resize(newCapacity: number): void {
    const oldLo = this.hashLo;
    const oldHi = this.hashHi;
    const oldKey = this.keyIds;
    const oldTiers = this.tiers;
    this.hashLo = new Uint32Array(newCapacity);
    this.hashHi = new Uint32Array(newCapacity);
    this.keyIds = new Int32Array(newCapacity);
    this.tiers = new Uint8Array(newCapacity);
    const mask = newCapacity - 1;
    this.mask = mask;
    for (let s = 0; s < oldTiers.length; s++) {
      if (oldTiers[s] === 0) continue;
      let i = mixHash(oldLo[s], oldHi[s]) & mask;
      while (this.tiers[i] !== 0) i = (i + 1) & mask;
      this.hashLo[i] = oldLo[s];
      this.hashHi[i] = oldHi[s];
      this.keyIds[i] = oldKey[s];
      this.tiers[i] = oldTiers[s];
    }
  }
}
