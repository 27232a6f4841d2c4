/**
 * Content keys of one stream interned as small integer ids (kv-events §4, §5), with the per-key
 * Device / Host reference counts whose union is the key's residency.
 *
 * Layout, chosen for lookups in tables far larger than the CPU cache (cost = cache misses):
 * - `cells`: per id, 6 uint32 = the 16 key bytes as 4 words (low64 LE || high64 LE), then the
 *   Device and Host reference counts, so a hit reads one cache line for key and residency;
 * - the slot index: open addressing with linear probing, 2 uint32 per slot = (id + 1, key word 0),
 *   so probing past other keys compares in the slot array without touching their cells.
 *   Content keys are XXH3-128 output, so word 0 is uniformly distributed and is the probe start.
 * Deletion is backward-shift (no tombstones); ids are recycled through a free list, so the cells
 * are bounded by the peak number of live keys, and the slot index halves below 1/8 full.
 * Used only for the keys of blocks a stream holds on a medium we do not serve
 * (directory-svc/index/unserved-blocks.ts); served blocks name their keys by the stable key ids of
 * the shared group index (shared/index/residency-index.ts), which also does the prefix matching.
 */

/** uint32 per id in `cells`: 4 key words, Device refs, Host refs. */
export const KEY_STRIDE = 6;
export const REF_DEVICE = 4;
export const REF_HOST = 5;

const MIN_SLOTS = 16;
const MIN_IDS = 16;

/** Key word at b[o .. o+4): uint32 little-endian, as the table stores keys (low64 LE || high64 LE). */
export function keyWordAt(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

export class ContentKeyTable {
  /** KEY_STRIDE words per id. Replaced on growth: re-read after intern(). */
  cells: Uint32Array;
  /** Byte view of `cells`, handed to the hasher as a parent key (offset = id × KEY_STRIDE × 4). */
  bytes: Uint8Array;
  /** 2 words per slot: id + 1 (0 = empty), key word 0. */
  private slots: Uint32Array;
  private slotMask: number;
  private idCapacity: number;
  private freeIds: Int32Array;
  private freeCount = 0;
  private highWater = 0;
  private live = 0;

  constructor() {
    this.cells = new Uint32Array(MIN_IDS * KEY_STRIDE);
    this.bytes = new Uint8Array(this.cells.buffer);
    this.idCapacity = MIN_IDS;
    this.freeIds = new Int32Array(0);
    this.slots = new Uint32Array(MIN_SLOTS * 2);
    this.slotMask = MIN_SLOTS - 1;
  }

  get size(): number {
    return this.live;
  }

  get slotCapacity(): number {
    return this.slotMask + 1;
  }

  /** Id of the key (w0..w3, unsigned) or -1. Hot path of prefix match: no allocation. */
  findWords(w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.slotMask;
    const slots = this.slots;
    const cells = this.cells;
    let i = w0 & mask;
    for (;;) {
      const tag = slots[i << 1];
      if (tag === 0) return -1;
      if (slots[(i << 1) + 1] === w0) {
        const id = tag - 1;
        const o = id * KEY_STRIDE;
        if (cells[o + 1] === w1 && cells[o + 2] === w2 && cells[o + 3] === w3) return id;
      }
      i = (i + 1) & mask;
    }
  }

  /** Id of the 16-byte key at keys[offset ..] or -1. No allocation. */
  findBytes(keys: Uint8Array, offset: number): number {
    return this.findWords(keyWordAt(keys, offset), keyWordAt(keys, offset + 4), keyWordAt(keys, offset + 8), keyWordAt(keys, offset + 12));
  }

  /** True when id's key equals src[off .. off+4). */
  equals(id: number, src: Uint32Array, off: number): boolean {
    const o = id * KEY_STRIDE;
    const cells = this.cells;
    return cells[o] === src[off] && cells[o + 1] === src[off + 1] && cells[o + 2] === src[off + 2] && cells[o + 3] === src[off + 3];
  }

  /** Id of src[off .. off+4), interning it with zero reference counts when new. */
  intern(src: Uint32Array, off: number): number {
    const w0 = src[off] >>> 0;
    const w1 = src[off + 1] >>> 0;
    const w2 = src[off + 2] >>> 0;
    const w3 = src[off + 3] >>> 0;
    const found = this.findWords(w0, w1, w2, w3);
    if (found >= 0) return found;
    if ((this.live + 1) * 4 > this.slotCapacity * 3) this.resizeSlots(this.slotCapacity * 2);
    const id = this.allocateId();
    const o = id * KEY_STRIDE;
    const cells = this.cells;
    cells[o] = w0;
    cells[o + 1] = w1;
    cells[o + 2] = w2;
    cells[o + 3] = w3;
    cells[o + REF_DEVICE] = 0;
    cells[o + REF_HOST] = 0;
    const mask = this.slotMask;
    let i = w0 & mask;
    while (this.slots[i << 1] !== 0) i = (i + 1) & mask;
    this.slots[i << 1] = id + 1;
    this.slots[(i << 1) + 1] = w0;
    this.live++;
    return id;
  }

  /** Removes a key whose reference counts are both zero and recycles its id. */
  release(id: number): void {
    const mask = this.slotMask;
    const slots = this.slots;
    const tag = id + 1;
    let i = this.cells[id * KEY_STRIDE] & mask;
    while (slots[i << 1] !== tag) i = (i + 1) & mask;
    let hole = i;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const other = slots[j << 1];
      if (other === 0) break;
      const w0 = slots[(j << 1) + 1];
      const home = w0 & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[hole << 1] = other;
      slots[(hole << 1) + 1] = w0;
      hole = j;
    }
    slots[hole << 1] = 0;
    if (this.freeCount === this.freeIds.length) {
      // Grown on demand: a stream that only ever adds keys pays nothing for the free list.
      const grown = new Int32Array(Math.max(MIN_IDS, this.freeCount * 2));
      grown.set(this.freeIds);
      this.freeIds = grown;
    }
    this.freeIds[this.freeCount++] = id;
    this.live--;
    if (this.slotCapacity > MIN_SLOTS && this.live * 8 < this.slotCapacity) this.resizeSlots(this.slotCapacity / 2);
  }

  /** Bytes held by the columns. */
  approxBytes(): number {
    return this.cells.byteLength + this.freeIds.byteLength + this.slots.byteLength;
  }

  private allocateId(): number {
    if (this.freeCount > 0) return this.freeIds[--this.freeCount];
    const id = this.highWater++;
    if (id >= this.idCapacity) this.growIds(this.idCapacity * 2);
    return id;
  }

  private growIds(n: number): void {
    const cells = new Uint32Array(n * KEY_STRIDE);
    cells.set(this.cells);
    this.cells = cells;
    this.bytes = new Uint8Array(cells.buffer);
    this.idCapacity = n;
  }

  private resizeSlots(n: number): void {
    const old = this.slots;
    const slots = new Uint32Array(n * 2);
    const mask = n - 1;
    for (let s = 0; s < old.length; s += 2) {
      const tag = old[s];
      if (tag === 0) continue;
      const w0 = old[s + 1];
      let i = w0 & mask;
      while (slots[i << 1] !== 0) i = (i + 1) & mask;
      slots[i << 1] = tag;
      slots[(i << 1) + 1] = w0;
    }
    this.slots = slots;
    this.slotMask = mask;
  }
}
