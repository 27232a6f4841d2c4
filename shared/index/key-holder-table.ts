/**
 * Content key → holder set id of one residency group (shared/index/residency-index.ts), as dense
 * key records in insertion order plus a compact hash index over them.
 *
 * Records: KEY_RECORD_STRIDE uint32 per record (the 4 key words, low64 LE || high64 LE, then the
 * holder set id); a record's index is the key's id. A prefix walk looks up consecutive blocks of
 * one chain, and a chain is stored by one event batch or one setTiers call, so its keys get
 * consecutive records: the walk tries record r + 1 for block i + 1 (`findNear`) before the hash
 * index, and becomes a few random jumps plus sequential reads instead of one cache + TLB miss
 * per block in a table far larger than the CPU cache. Allocation keeps that locality under
 * churn: a key inserted right after record r takes r + 1 when it is free, else the next free
 * record from a rolling cursor, else a new one at the end. A hint that misses only costs the
 * hash lookup it replaces, so correctness never depends on contiguity.
 *
 * Hash index: open addressing with linear probing, 2 uint32 per slot (record id + 1, key word 0).
 * Content keys are XXH3-128 output, so word 0 is uniformly distributed: it is the probe start and
 * a tag that lets a probe skip other keys' records, and a resize or backward-shift delete
 * rehashes from the tags alone. Deletion is backward shift (no tombstones); the index doubles
 * above 3/4 full and halves below 1/8.
 *
 * Stable key ids: a record never moves while its key is in the table, so the directory's
 * per-stream records name their content key by its record index (directory-svc/index/key-refs.ts)
 * and keep no key table of their own. `pins` counts the stream indexes referring to a key; a
 * pinned key stays with the empty holder set (set id 0) until its last pin goes. The router never
 * pins (its pin column stays empty): its keys leave with their last holder. A record with set id
 * 0 and no pin is free.
 *
 * Memory: records grow by half (so at most a third of them is slack) and their end is trimmed
 * when the last records are freed; a free record inside is re-used before the end grows, unless
 * free records are fewer than 1/64 of them. Pure: no I/O; allocation only on growth.
 */
import { keyWordAt } from '../keys/content-key-table.js';

/** uint32 per key record: 4 key words, holder set id. */
export const KEY_RECORD_STRIDE = 5;
/** Offset of the holder set id within a record. */
export const HOLDER_SET = 4;
/** uint32 per hash index slot: record id + 1 (0 = empty), key word 0. */
const INDEX_STRIDE = 2;

const MIN_SLOTS = 16;
const MIN_RECORDS = 64;
/** Below 1 / REUSE_SHARE of the records free, a new key takes a record at the end (no scan). */
const REUSE_SHARE = 64;

export class KeyHolderTable {
  /** KEY_RECORD_STRIDE words per record. Replaced on growth: re-read after insert or delete. */
  words: Uint32Array;
  /** Byte view of `words` (key `id`'s bytes start at id × KEY_RECORD_STRIDE × 4). */
  bytes: Uint8Array;
  /** Per record: the stream indexes pinning its key. Empty until a first pin. */
  private pins = new Uint32Array(0);
  /** One bit per record below `end`: set when free. */
  private freeBits: Uint32Array;
  private freeCount = 0;
  /** Records in use or free below it; none above. */
  private end = 0;
  /** Where the search for a free record resumes. */
  private cursor = 0;
  private index: Uint32Array;
  private mask: number;
  private live = 0;

  constructor() {
    this.words = new Uint32Array(MIN_RECORDS * KEY_RECORD_STRIDE);
    this.bytes = new Uint8Array(this.words.buffer);
    this.freeBits = new Uint32Array(MIN_RECORDS >>> 5);
    this.index = new Uint32Array(MIN_SLOTS * INDEX_STRIDE);
    this.mask = MIN_SLOTS - 1;
  }

  /** Keys held (resident or pinned). */
  get size(): number {
    return this.live;
  }

  /**
   * Every key id (record) in use is below this bound, free records may be too: a cursor over ids
   * runs over [0, idBound).
   */
  get idBound(): number {
    return this.end;
  }

  approxBytes(): number {
    return this.words.byteLength + this.pins.byteLength + this.freeBits.byteLength + this.index.byteLength;
  }

  /** Record (key id) of the key (w0..w3, unsigned) or -1. Hot path: no allocation. */
  find(w0: number, w1: number, w2: number, w3: number): number {
    const mask = this.mask;
    const x = this.index;
    const w = this.words;
    let i = w0 & mask;
    for (;;) {
      const e = x[i * INDEX_STRIDE]!;
      if (e === 0) return -1;
      if (x[i * INDEX_STRIDE + 1] === w0) {
        const o = (e - 1) * KEY_RECORD_STRIDE;
        if (w[o + 1] === w1 && w[o + 2] === w2 && w[o + 3] === w3) return e - 1;
      }
      i = (i + 1) & mask;
    }
  }

  /**
   * Record of the key kw[o .. o+4), −1 when absent, trying first the record after `prev` (the
   * previous block's record; −1: none), as a chain's keys are stored in consecutive records. The
   * hint is taken only for a key in the table (a free record keeps its old key words). The prefix
   * walk's and the updates' lookup.
   */
  findAfter(kw: Uint32Array, o: number, prev: number): number {
    const w0 = kw[o]!;
    const w1 = kw[o + 1]!;
    const w2 = kw[o + 2]!;
    const w3 = kw[o + 3]!;
    const near = prev + 1;
    if (prev >= 0 && near < this.end) {
      const w = this.words;
      const r = near * KEY_RECORD_STRIDE;
      if (w[r] === w0 && w[r + 1] === w1 && w[r + 2] === w2 && w[r + 3] === w3 && (w[r + HOLDER_SET] !== 0 || this.pinnedAt(near))) return near;
    }
    return this.find(w0, w1, w2, w3);
  }

  /** Record of the 16-byte key at keys[offset ..] or -1. */
  findBytes(keys: Uint8Array, offset: number): number {
    return this.find(keyWordAt(keys, offset), keyWordAt(keys, offset + 4), keyWordAt(keys, offset + 8), keyWordAt(keys, offset + 12));
  }

  /** Holder set id of key `id` (0 for a free or pinned-only record). */
  setAt(id: number): number {
    return this.words[id * KEY_RECORD_STRIDE + HOLDER_SET]!;
  }

  /** True when key `id` is pinned (it stays with the empty set). */
  pinnedAt(id: number): boolean {
    return id < this.pins.length && this.pins[id] !== 0;
  }

  /** Replaces the holder set of key `id` (the empty set only for a pinned key). */
  updateAt(id: number, set: number): void {
    this.words[id * KEY_RECORD_STRIDE + HOLDER_SET] = set;
  }

  /**
   * Inserts a key the caller knows is absent, with holder set `set` (non-empty unless it is being
   * pinned). `after`: the record of the key stored just before it (−1 for none), whose successor
   * it takes when free. Returns its key id.
   */
  insert(w0: number, w1: number, w2: number, w3: number, set: number, after = -1): number {
    if ((this.live + 1) * 4 > (this.mask + 1) * 3) this.resizeIndex((this.mask + 1) * 2);
    const id = this.allocate(after >= 0 ? after + 1 : -1);
    const w = this.words;
    const o = id * KEY_RECORD_STRIDE;
    w[o] = w0;
    w[o + 1] = w1;
    w[o + 2] = w2;
    w[o + 3] = w3;
    w[o + HOLDER_SET] = set;
    this.place(id, w0);
    this.live++;
    return id;
  }

  /**
   * One more pin on the key words[offset .. offset+4), inserting it with the empty set when
   * absent (`after` as for insert). Returns its key id, stable until its last pin goes.
   */
  pin(words: Uint32Array, offset: number, after = -1): number {
    let id = this.findAfter(words, offset, after);
    if (id < 0) id = this.insert(words[offset]!, words[offset + 1]!, words[offset + 2]!, words[offset + 3]!, 0, after);
    // The first pin makes the column; resizeRecords keeps it sized from then on.
    if (this.pins.length === 0) this.sizePins();
    this.pins[id]++;
    return id;
  }

  /**
   * One pin fewer on key `id`. The last pin deletes the key if it has no holder (returns true),
   * else it stays as an unpinned resident key under the same id.
   */
  unpin(id: number): boolean {
    if (--this.pins[id]! > 0) return false;
    if (this.setAt(id) !== 0) return false;
    this.deleteAt(id);
    return true;
  }

  /** Copies key `id`'s words into out[off .. off+4). */
  copyKey(id: number, out: Uint32Array, off: number): void {
    const o = id * KEY_RECORD_STRIDE;
    const w = this.words;
    out[off] = w[o]!;
    out[off + 1] = w[o + 1]!;
    out[off + 2] = w[o + 2]!;
    out[off + 3] = w[o + 3]!;
  }

  /** True when key `id` equals src[off .. off+4). */
  keyEquals(id: number, src: Uint32Array, off: number): boolean {
    const o = id * KEY_RECORD_STRIDE;
    const w = this.words;
    return w[o] === src[off]! >>> 0 && w[o + 1] === src[off + 1]! >>> 0 && w[o + 2] === src[off + 2]! >>> 0 && w[o + 3] === src[off + 3]! >>> 0;
  }

  /** Deletes key `id` (not pinned): out of the hash index by backward shift; its record is freed. */
  deleteAt(id: number): void {
    const mask = this.mask;
    const x = this.index;
    let hole = this.words[id * KEY_RECORD_STRIDE]! & mask;
    while (x[hole * INDEX_STRIDE] !== id + 1) hole = (hole + 1) & mask;
    let j = hole;
    for (;;) {
      j = (j + 1) & mask;
      const oj = j * INDEX_STRIDE;
      if (x[oj] === 0) break;
      const home = x[oj + 1]! & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      x[hole * INDEX_STRIDE] = x[oj]!;
      x[hole * INDEX_STRIDE + 1] = x[oj + 1]!;
      hole = j;
    }
    x[hole * INDEX_STRIDE] = 0;
    this.live--;
    this.release(id);
    if (this.mask + 1 > MIN_SLOTS && this.live * 8 < this.mask + 1) this.resizeIndex((this.mask + 1) / 2);
  }

  /** Puts record `id` (key word 0 `w0`) into the hash index. */
  private place(id: number, w0: number): void {
    const mask = this.mask;
    const x = this.index;
    let i = w0 & mask;
    while (x[i * INDEX_STRIDE] !== 0) i = (i + 1) & mask;
    x[i * INDEX_STRIDE] = id + 1;
    x[i * INDEX_STRIDE + 1] = w0;
  }

  private resizeIndex(slots: number): void {
    const old = this.index;
    this.index = new Uint32Array(slots * INDEX_STRIDE);
    this.mask = slots - 1;
    for (let o = 0; o < old.length; o += INDEX_STRIDE) if (old[o] !== 0) this.place(old[o]! - 1, old[o + 1]!);
  }

  /** A record for a new key: `preferred` (−1: none) when free, else a free one from the cursor, else a new one. */
  private allocate(preferred: number): number {
    const bits = this.freeBits;
    if (this.freeCount !== 0) {
      if (preferred >= 0 && preferred < this.end && (bits[preferred >>> 5]! & (1 << (preferred & 31))) !== 0) return this.take(preferred);
      if (this.freeCount * REUSE_SHARE >= this.end) return this.take(this.nextFree());
    }
    if (this.end * KEY_RECORD_STRIDE === this.words.length) this.growRecords();
    return this.end++;
  }

  /** The first free record at or after the cursor, wrapping (some record is free). */
  private nextFree(): number {
    const bits = this.freeBits;
    const words = (this.end + 31) >>> 5;
    let k = this.cursor >>> 5;
    if (k >= words) k = 0;
    // Bits below the cursor in its first word are looked at again after the wrap.
    let m = bits[k]! & (~0 << (this.cursor & 31));
    while (m === 0) {
      k = k + 1 === words ? 0 : k + 1;
      m = bits[k]!;
    }
    return (k << 5) | (31 - Math.clz32(m & -m));
  }

  private take(id: number): number {
    this.freeBits[id >>> 5] = this.freeBits[id >>> 5]! & ~(1 << (id & 31));
    this.freeCount--;
    this.cursor = id + 1;
    return id;
  }

  /** Record `id` is free: marked so, or, at the end, the end is trimmed past every free record. */
  private release(id: number): void {
    this.words[id * KEY_RECORD_STRIDE + HOLDER_SET] = 0;
    if (id + 1 !== this.end) {
      this.freeBits[id >>> 5] = this.freeBits[id >>> 5]! | (1 << (id & 31));
      this.freeCount++;
      return;
    }
    let end = id;
    const bits = this.freeBits;
    while (end > 0 && (bits[(end - 1) >>> 5]! & (1 << ((end - 1) & 31))) !== 0) {
      end--;
      bits[end >>> 5] = bits[end >>> 5]! & ~(1 << (end & 31));
      this.freeCount--;
    }
    this.end = end;
    if (this.cursor > end) this.cursor = 0;
    const records = this.words.length / KEY_RECORD_STRIDE;
    if (records > MIN_RECORDS && end * 4 < records) this.resizeRecords(Math.max(MIN_RECORDS, end * 2));
  }

  private growRecords(): void {
    const records = this.words.length / KEY_RECORD_STRIDE;
    this.resizeRecords(records + (records >>> 1));
  }

  private resizeRecords(records: number): void {
    const words = new Uint32Array(records * KEY_RECORD_STRIDE);
    words.set(this.words.subarray(0, Math.min(this.words.length, words.length)));
    this.words = words;
    this.bytes = new Uint8Array(words.buffer);
    const bits = new Uint32Array((records + 31) >>> 5);
    bits.set(this.freeBits.subarray(0, Math.min(this.freeBits.length, bits.length)));
    this.freeBits = bits;
    if (this.pins.length !== 0) this.sizePins();
  }

  /** The pin column sized to the records (kept once a key has been pinned). */
  private sizePins(): void {
    const pins = new Uint32Array(this.words.length / KEY_RECORD_STRIDE);
    pins.set(this.pins.subarray(0, Math.min(this.pins.length, pins.length)));
    this.pins = pins;
  }
}
