/**
 * Content key → holder set id of one residency group (shared/index/residency-index.ts), stored
 * inline: open addressing with linear probing over one Uint32Array of KEY_HOLDER_STRIDE words per
 * slot (the 4 key words, low64 LE || high64 LE, then the holder set id). A prefix walk is one
 * lookup per block into a table far larger than the CPU cache, so a lookup must touch one cache
 * line: the key and its holders sit together, with no id indirection. Set id 0 (the empty set)
 * marks an empty slot — a key with no holder is not resident and is deleted.
 *
 * Content keys are XXH3-128 output, so word 0 is uniformly distributed and is the probe start.
 * Deletion is backward shift (no tombstones); the table doubles above 3/4 full and halves below
 * 1/8, so memory follows the live key count. Pure: no I/O; allocation only on resize.
 */
import { keyWordAt } from '../keys/content-key-table.js';

/** uint32 per slot: 4 key words, holder set id. */
export const KEY_HOLDER_STRIDE = 5;
/** Offset of the holder set id within a slot. */
export const HOLDER_SET = 4;

const MIN_SLOTS = 16;

export class KeyHolderTable {
  /** KEY_HOLDER_STRIDE words per slot. Replaced on resize: re-read after insert or delete. */
  words: Uint32Array;
  private mask: number;
  private live = 0;

  constructor() {
    this.words = new Uint32Array(MIN_SLOTS * KEY_HOLDER_STRIDE);
    this.mask = MIN_SLOTS - 1;
  }

  /** Keys held. */
  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  approxBytes(): number {
    return this.words.byteLength;
  }

  /** Slot of the key (w0..w3, unsigned) or -1. Hot path: no allocation. */
  find(w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.mask;
    const w = this.words;
    let i = w0 & mask;
    for (;;) {
      const o = i * KEY_HOLDER_STRIDE;
      if (w[o + HOLDER_SET] === 0) return -1;
      if (w[o] === w0 && w[o + 1] === w1 && w[o + 2] === w2 && w[o + 3] === w3) return i;
      i = (i + 1) & mask;
    }
  }

  /**
   * Holder set of the key whose words are kw[o .. o+4), 0 when absent: the prefix walk's lookup.
   * Its loads depend only on the key, so a loop of them over several blocks keeps several cache
   * misses in flight at once (residency-index.ts). No allocation.
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
      if (set === 0 || (w[at] === w0 && w[at + 1] === w1 && w[at + 2] === w2 && w[at + 3] === w3)) return set;
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

  /** Replaces the holder set of the key at `slot` (non-empty; use deleteAt for the empty set). */
  updateAt(slot: number, set: number): void {
    this.words[slot * KEY_HOLDER_STRIDE + HOLDER_SET] = set;
  }

  /** Inserts a key the caller knows is absent, with non-empty holder set `set`. */
  insert(w0: number, w1: number, w2: number, w3: number, set: number): void {
    if ((this.live + 1) * 4 > this.capacity * 3) this.resize(this.capacity * 2);
    this.place(w0, w1, w2, w3, set);
    this.live++;
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
      if (w[oj + HOLDER_SET] === 0) break;
      const home = w[oj]! & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      w.copyWithin(hole * KEY_HOLDER_STRIDE, oj, oj + KEY_HOLDER_STRIDE);
      hole = j;
    }
    w[hole * KEY_HOLDER_STRIDE + HOLDER_SET] = 0;
    this.live--;
    if (this.capacity > MIN_SLOTS && this.live * 8 < this.capacity) this.resize(this.capacity / 2);
  }

  private place(w0: number, w1: number, w2: number, w3: number, set: number): void {
    const mask = this.mask;
    const w = this.words;
    let i = w0 & mask;
    while (w[i * KEY_HOLDER_STRIDE + HOLDER_SET] !== 0) i = (i + 1) & mask;
    const o = i * KEY_HOLDER_STRIDE;
    w[o] = w0;
    w[o + 1] = w1;
    w[o + 2] = w2;
    w[o + 3] = w3;
    w[o + HOLDER_SET] = set;
  }

  private resize(capacity: number): void {
    const old = this.words;
    this.words = new Uint32Array(capacity * KEY_HOLDER_STRIDE);
    this.mask = capacity - 1;
    for (let o = 0; o < old.length; o += KEY_HOLDER_STRIDE) {
      const set = old[o + HOLDER_SET]!;
      if (set !== 0) this.place(old[o]!, old[o + 1]!, old[o + 2]!, old[o + 3]!, set);
    }
  }
}
