/**
 * Content key → holder set id of one residency group (shared/index/residency-index.ts), stored
 * inline: open addressing with linear probing over one Uint32Array of KEY_HOLDER_STRIDE words per
 * slot (the 4 key words, low64 LE || high64 LE, the holder set id, the key's stable id + 1). A
 * prefix walk is one lookup per block into a table far larger than the CPU cache, so a lookup
 * must touch one cache line: the key and its holders sit together, with no id indirection.
 *
 * Stable key ids: the directory's per-stream records name their content key by a small integer
 * that survives the slot moving (backward shift, resize), so a stream keeps no key table of its
 * own (directory-svc/index/key-refs.ts). A key gets an id when first pinned; `pins` counts the
 * stream indexes referring to it, and a pinned key stays in the table with the empty holder set
 * (set id 0) until its last pin goes. The router never pins: its keys have no id and leave with
 * their last holder. A slot with set id 0 and no id is empty.
 *
 * Content keys are XXH3-128 output, so word 0 is uniformly distributed and is the probe start.
 * Deletion is backward shift (no tombstones); the table doubles above 3/4 full and halves below
 * 1/8, so memory follows the live key count. Pure: no I/O; allocation only on resize.
 */
import { keyWordAt } from '../keys/content-key-table.js';

/** uint32 per slot: 4 key words, holder set id, key id + 1 (0 = none). */
export const KEY_HOLDER_STRIDE = 6;
/** Offset of the holder set id within a slot. */
export const HOLDER_SET = 4;
/** Offset of the key id + 1 within a slot. */
const KEY_ID = 5;

const MIN_SLOTS = 16;
const MIN_IDS = 16;

export class KeyHolderTable {
  /** KEY_HOLDER_STRIDE words per slot. Replaced on resize: re-read after insert or delete. */
  words: Uint32Array;
  /** Byte view of `words` (a key id's bytes start at slotOfId(id) × KEY_HOLDER_STRIDE × 4). */
  bytes: Uint8Array;
  private mask: number;
  private live = 0;
  /** Per key id: its slot; per key id: the stream indexes pinning it. Empty until a first pin. */
  private slotOf = new Int32Array(0);
  private pins = new Uint32Array(0);
  private freeIds = new Int32Array(0);
  private freeCount = 0;
  private idHighWater = 0;

  constructor() {
    this.words = new Uint32Array(MIN_SLOTS * KEY_HOLDER_STRIDE);
    this.bytes = new Uint8Array(this.words.buffer);
    this.mask = MIN_SLOTS - 1;
  }

  /** Keys held (resident or pinned). */
  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  approxBytes(): number {
    return this.words.byteLength + this.slotOf.byteLength + this.pins.byteLength + this.freeIds.byteLength;
  }

  /** Slot of the key (w0..w3, unsigned) or -1. Hot path: no allocation. */
  find(w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.mask;
    const w = this.words;
    let i = w0 & mask;
    for (;;) {
      const o = i * KEY_HOLDER_STRIDE;
      if ((w[o + HOLDER_SET]! | w[o + KEY_ID]!) === 0) return -1;
      if (w[o] === w0 && w[o + 1] === w1 && w[o + 2] === w2 && w[o + 3] === w3) return i;
      i = (i + 1) & mask;
    }
  }

  /**
   * Holder set of the key whose words are kw[o .. o+4), 0 when absent or not resident: the prefix
   * walk's lookup. Its loads depend only on the key, so a loop of them over several blocks keeps
   * several cache misses in flight at once (residency-index.ts). No allocation.
   */
  setOfWords(kw: Uint32Array, o: number): number {
    const w0 = kw[o]!;
    const w1 = kw[o + 1]!;
    const w2 = kw[o + 2]!;
    const w3 = kw[o + 3]!;
    const mask = this.mask;
    const w = this.words;
    let i = w0 & mask;
    for (;;) {
      const at = i * KEY_HOLDER_STRIDE;
      const set = w[at + HOLDER_SET]!;
      if (w[at] === w0 && w[at + 1] === w1 && w[at + 2] === w2 && w[at + 3] === w3) return set;
      if ((set | w[at + KEY_ID]!) === 0) return 0;
      i = (i + 1) & mask;
    }
  }

  /** Slot of the 16-byte key at keys[offset ..] or -1. */
  findBytes(keys: Uint8Array, offset: number): number {
    return this.find(keyWordAt(keys, offset), keyWordAt(keys, offset + 4), keyWordAt(keys, offset + 8), keyWordAt(keys, offset + 12));
  }

  /** Holder set id of the key at `slot`. */
  setAt(slot: number): number {
    return this.words[slot * KEY_HOLDER_STRIDE + HOLDER_SET]!;
  }

  /** True when the key at `slot` is pinned (it stays with the empty set). */
  pinnedAt(slot: number): boolean {
    return this.words[slot * KEY_HOLDER_STRIDE + KEY_ID] !== 0;
  }

  /** Replaces the holder set of the key at `slot` (the empty set only for a pinned key). */
  updateAt(slot: number, set: number): void {
    this.words[slot * KEY_HOLDER_STRIDE + HOLDER_SET] = set;
  }

  /** Inserts a key the caller knows is absent, with non-empty holder set `set`. Returns its slot. */
  insert(w0: number, w1: number, w2: number, w3: number, set: number): number {
    if ((this.live + 1) * 4 > this.capacity * 3) this.resize(this.capacity * 2);
    this.live++;
    return this.place(w0, w1, w2, w3, set, 0);
  }

  /**
   * One more pin on the key words[offset .. offset+4), inserting it with the empty set when
   * absent. Returns its key id, stable until its last pin goes.
   */
  pin(words: Uint32Array, offset: number): number {
    const w0 = words[offset]! >>> 0;
    const w1 = words[offset + 1]! >>> 0;
    const w2 = words[offset + 2]! >>> 0;
    const w3 = words[offset + 3]! >>> 0;
    let slot = this.find(w0, w1, w2, w3);
    if (slot < 0) slot = this.insert(w0, w1, w2, w3, 0);
    const o = slot * KEY_HOLDER_STRIDE + KEY_ID;
    let id = this.words[o]! - 1;
    if (id < 0) {
      id = this.allocateId();
      this.words[o] = id + 1;
      this.slotOf[id] = slot;
      this.pins[id] = 0;
    }
    this.pins[id]++;
    return id;
  }

  /**
   * One pin fewer on key `id`. The last pin frees the id; the key is then deleted if it has no
   * holder (returns true), else it stays as an unpinned resident key.
   */
  unpin(id: number): boolean {
    if (--this.pins[id]! > 0) return false;
    const slot = this.slotOf[id]!;
    this.words[slot * KEY_HOLDER_STRIDE + KEY_ID] = 0;
    this.freeId(id);
    if (this.setAt(slot) !== 0) return false;
    this.deleteAt(slot);
    return true;
  }

  /** Key id of the key at `slot`, −1 when it has none (not pinned). */
  idAt(slot: number): number {
    return this.words[slot * KEY_HOLDER_STRIDE + KEY_ID]! - 1;
  }

  /** Every key id in use is below this bound (a cursor over ids runs over [0, idBound)). */
  get idBound(): number {
    return this.idHighWater;
  }

  /** True when key id `id` is in use (some stream index pins it). */
  idInUse(id: number): boolean {
    return id < this.idHighWater && this.pins[id]! > 0;
  }

  /** Slot of key id `id` (valid until the next insert or delete). */
  slotOfId(id: number): number {
    return this.slotOf[id]!;
  }

  /** Copies key `id`'s words into out[off .. off+4). */
  copyKey(id: number, out: Uint32Array, off: number): void {
    const o = this.slotOf[id]! * KEY_HOLDER_STRIDE;
    const w = this.words;
    out[off] = w[o]!;
    out[off + 1] = w[o + 1]!;
    out[off + 2] = w[o + 2]!;
    out[off + 3] = w[o + 3]!;
  }

  /** True when key `id` equals src[off .. off+4). */
  keyEquals(id: number, src: Uint32Array, off: number): boolean {
    const o = this.slotOf[id]! * KEY_HOLDER_STRIDE;
    const w = this.words;
    return w[o] === src[off]! >>> 0 && w[o + 1] === src[off + 1]! >>> 0 && w[o + 2] === src[off + 2]! >>> 0 && w[o + 3] === src[off + 3]! >>> 0;
  }

  /** Deletes the key at `slot` by backward shift; other slots may move. */
  deleteAt(slot: number): void {
    const mask = this.mask;
    const w = this.words;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      const oj = j * KEY_HOLDER_STRIDE;
      if ((w[oj + HOLDER_SET]! | w[oj + KEY_ID]!) === 0) break;
      const home = w[oj]! & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      w.copyWithin(hole * KEY_HOLDER_STRIDE, oj, oj + KEY_HOLDER_STRIDE);
      const moved = w[oj + KEY_ID]!;
      if (moved !== 0) this.slotOf[moved - 1] = hole;
      hole = j;
    }
    const oh = hole * KEY_HOLDER_STRIDE;
    w[oh + HOLDER_SET] = 0;
    w[oh + KEY_ID] = 0;
    this.live--;
    if (this.capacity > MIN_SLOTS && this.live * 8 < this.capacity) this.resize(this.capacity / 2);
  }

  private place(w0: number, w1: number, w2: number, w3: number, set: number, idWord: number): number {
    const mask = this.mask;
    const w = this.words;
    let i = w0 & mask;
    while ((w[i * KEY_HOLDER_STRIDE + HOLDER_SET]! | w[i * KEY_HOLDER_STRIDE + KEY_ID]!) !== 0) i = (i + 1) & mask;
    const o = i * KEY_HOLDER_STRIDE;
    w[o] = w0;
    w[o + 1] = w1;
    w[o + 2] = w2;
    w[o + 3] = w3;
    w[o + HOLDER_SET] = set;
    w[o + KEY_ID] = idWord;
    if (idWord !== 0) this.slotOf[idWord - 1] = i;
    return i;
  }

  private resize(capacity: number): void {
    const old = this.words;
    this.words = new Uint32Array(capacity * KEY_HOLDER_STRIDE);
    this.bytes = new Uint8Array(this.words.buffer);
    this.mask = capacity - 1;
    for (let o = 0; o < old.length; o += KEY_HOLDER_STRIDE) {
      const set = old[o + HOLDER_SET]!;
      const idWord = old[o + KEY_ID]!;
      if ((set | idWord) !== 0) this.place(old[o]!, old[o + 1]!, old[o + 2]!, old[o + 3]!, set, idWord);
    }
  }

  private allocateId(): number {
    if (this.freeCount > 0) return this.freeIds[--this.freeCount]!;
    const id = this.idHighWater++;
    if (id >= this.slotOf.length) {
      const n = Math.max(MIN_IDS, this.slotOf.length * 2);
      const slotOf = new Int32Array(n);
      slotOf.set(this.slotOf);
      this.slotOf = slotOf;
      const pins = new Uint32Array(n);
      pins.set(this.pins);
      this.pins = pins;
    }
    return id;
  }

  private freeId(id: number): void {
    if (this.freeCount === this.freeIds.length) {
      const grown = new Int32Array(Math.max(MIN_IDS, this.freeCount * 2));
      grown.set(this.freeIds);
      this.freeIds = grown;
    }
    this.freeIds[this.freeCount++] = id;
  }
}
