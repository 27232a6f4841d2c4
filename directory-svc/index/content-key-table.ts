/**
 * Content keys of one stream interned as small integer ids (kv-events §4, §5), with the per-key
 * Device / Host reference counts whose union is the key's residency. Keys are stored as 4 × uint32
 * words per id; the id → slot index is open addressing with linear probing and backward-shift
 * deletion. Content keys are XXH3-128 output, so word 0 is already uniformly distributed and is
 * used directly as the probe start.
 *
 * Ids are recycled through a free list, so the id columns are bounded by the peak number of live
 * keys; the slot index halves when it falls below 1/8 full. Private to `index/`.
 */

const MIN_SLOTS = 16;
const MIN_IDS = 16;

export class ContentKeyTable {
  /** 4 words per id (the 16 key bytes, low64 LE || high64 LE). Replaced on growth. */
  words: Uint32Array;
  /** Byte view of `words`, handed to the hasher as a parent key (offset = id × 16). */
  bytes: Uint8Array;
  /** Records with this key that hold Device / Host (kv-events §5: residency = union). */
  refDevice: Uint32Array;
  refHost: Uint32Array;
  private slots: Int32Array;
  private slotMask: number;
  private freeIds: Int32Array;
  private freeCount = 0;
  private highWater = 0;
  private live = 0;

  constructor() {
    this.words = new Uint32Array(MIN_IDS * 4);
    this.bytes = new Uint8Array(this.words.buffer);
    this.refDevice = new Uint32Array(MIN_IDS);
    this.refHost = new Uint32Array(MIN_IDS);
    this.freeIds = new Int32Array(MIN_IDS);
    this.slots = new Int32Array(MIN_SLOTS).fill(-1);
    this.slotMask = MIN_SLOTS - 1;
  }

  get size(): number {
    return this.live;
  }

  get slotCapacity(): number {
    return this.slotMask + 1;
  }

  /** Id of the key (w0..w3) or -1. Hot path of prefix match: no allocation. */
  findWords(w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.slotMask;
    const slots = this.slots;
    const words = this.words;
    let i = w0 & mask;
    for (;;) {
      const id = slots[i];
      if (id < 0) return -1;
      const o = id << 2;
      if (words[o] === w0 && words[o + 1] === w1 && words[o + 2] === w2 && words[o + 3] === w3) return id;
      i = (i + 1) & mask;
    }
  }

  /** True when id's key equals src[off .. off+4). */
  equals(id: number, src: Uint32Array, off: number): boolean {
    const o = id << 2;
    const words = this.words;
    return words[o] === src[off] && words[o + 1] === src[off + 1] && words[o + 2] === src[off + 2] && words[o + 3] === src[off + 3];
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
    const o = id << 2;
    this.words[o] = w0;
    this.words[o + 1] = w1;
    this.words[o + 2] = w2;
    this.words[o + 3] = w3;
    this.refDevice[id] = 0;
    this.refHost[id] = 0;
    const mask = this.slotMask;
    let i = w0 & mask;
    while (this.slots[i] >= 0) i = (i + 1) & mask;
    this.slots[i] = id;
    this.live++;
    return id;
  }

  /** Removes a key whose reference counts are both zero and recycles its id. */
  release(id: number): void {
    const mask = this.slotMask;
    const slots = this.slots;
    const words = this.words;
    let i = words[id << 2] & mask;
    while (slots[i] !== id) i = (i + 1) & mask;
    let hole = i;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const other = slots[j];
      if (other < 0) break;
      const home = words[other << 2] & mask;
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[hole] = other;
      hole = j;
    }
    slots[hole] = -1;
    this.freeIds[this.freeCount++] = id;
    this.live--;
    if (this.slotCapacity > MIN_SLOTS && this.live * 8 < this.slotCapacity) this.resizeSlots(this.slotCapacity / 2);
  }

  /** Bytes held by the columns. */
  approxBytes(): number {
    return (
      this.words.byteLength + this.refDevice.byteLength + this.refHost.byteLength + this.freeIds.byteLength + this.slots.byteLength
    );
  }

  private allocateId(): number {
    if (this.freeCount > 0) return this.freeIds[--this.freeCount];
    const id = this.highWater++;
    if (id >= this.refDevice.length) this.growIds(this.refDevice.length * 2);
    return id;
  }

  private growIds(n: number): void {
    const words = new Uint32Array(n * 4);
    words.set(this.words);
    this.words = words;
    this.bytes = new Uint8Array(words.buffer);
    const refDevice = new Uint32Array(n);
    refDevice.set(this.refDevice);
    this.refDevice = refDevice;
    const refHost = new Uint32Array(n);
    refHost.set(this.refHost);
    this.refHost = refHost;
    const freeIds = new Int32Array(n);
    freeIds.set(this.freeIds.subarray(0, this.freeCount));
    this.freeIds = freeIds;
  }

  private resizeSlots(n: number): void {
    const old = this.slots;
    const slots = new Int32Array(n).fill(-1);
    const mask = n - 1;
    const words = this.words;
    for (let s = 0; s < old.length; s++) {
      const id = old[s];
      if (id < 0) continue;
      let i = words[id << 2] & mask;
      while (slots[i] >= 0) i = (i + 1) & mask;
      slots[i] = id;
    }
    this.slots = slots;
    this.slotMask = mask;
  }
}
