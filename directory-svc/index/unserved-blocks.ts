/**
 * Blocks a vllm/sglang stream holds only on a medium we do not serve (vLLM's offload connectors
 * publish `"STORAGE"`, engines.md §2): engine hash → derived content key (or UNINDEXED), kept
 * only so later events chain from them. Never matched, never counted as residency or entries:
 * a block here has no tier. Private to `index/`; StreamIndex consults it only when a hash is not
 * among its served records.
 *
 * Layout: the same record table as served blocks (tier byte 1 = present) and a content-key table
 * of its own whose Device count cell is used as a plain reference count, so these keys can never
 * be found by a prefix walk over the served table.
 *
 * Where the spec is silent: the table holds at most `maxBlocks` hashes (the stream's
 * max_blocks_per_stream); beyond it new STORAGE blocks are not remembered (their children then
 * chain as if the parent were unknown), so a huge offload tier never invalidates the stream.
 */
import { ContentKeyTable, KEY_STRIDE, REF_DEVICE } from '../../shared/keys/content-key-table.js';
import { EngineHashTable, UNINDEXED } from './engine-hash-table.js';

const PRESENT = 1;

export class UnservedBlocks {
  private readonly records = new EngineHashTable();
  private readonly keys = new ContentKeyTable();

  constructor(private readonly maxBlocks: number) {}

  get size(): number {
    return this.records.size;
  }

  /** Byte view of the key cells (offset of id = id × KEY_STRIDE × 4), for the hasher. */
  get keyBytes(): Uint8Array {
    return this.keys.bytes;
  }

  /**
   * Key id of a remembered hash: ≥ 0 indexed, UNINDEXED when remembered without a key, and
   * NOT_FOUND when not remembered at all.
   */
  keyIdOf(lo: number, hi: number): number {
    const slot = this.records.find(lo, hi);
    return slot < 0 ? NOT_FOUND : this.records.keyIds[slot];
  }

  /** Copies key `id` into `out[off .. off+4)` (uint32 words). */
  copyKey(id: number, out: Uint32Array, off: number): void {
    const o = id * KEY_STRIDE;
    const cells = this.keys.cells;
    out[off] = cells[o];
    out[off + 1] = cells[o + 1];
    out[off + 2] = cells[o + 2];
    out[off + 3] = cells[o + 3];
  }

  /**
   * Remembers (or re-keys) a hash with the key in `words[off ..]`, or UNINDEXED when `words` is
   * null. Returns the key id it now has (UNINDEXED too when the table is full).
   */
  remember(lo: number, hi: number, words: Uint32Array | null, off: number): number {
    const slot = this.records.find(lo, hi);
    if (slot >= 0) {
      const current = this.records.keyIds[slot];
      // A re-store with a key keeps or replaces the old one; without a key the old one stays.
      if (words === null || (current >= 0 && this.keys.equals(current, words, off))) return current;
      this.unref(current);
      const id = this.ref(words, off);
      this.records.keyIds[slot] = id;
      return id;
    }
    if (this.records.size >= this.maxBlocks) return UNINDEXED;
    const id = words === null ? UNINDEXED : this.ref(words, off);
    this.records.insert(lo, hi, id, PRESENT);
    return id;
  }

  /** Forgets each hash (BlockRemoved on the unserved medium); unknown ones are a no-op. */
  forget(hashes: BigUint64Array): void {
    const n = hashes.length;
    const halves = new Uint32Array(hashes.buffer, hashes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) {
      const slot = this.records.find(halves[2 * i], halves[2 * i + 1]);
      if (slot < 0) continue;
      this.unref(this.records.keyIds[slot]);
      this.records.deleteAt(slot);
    }
  }

  /** AllBlocksCleared of the unserved medium, or of everything. */
  clear(): void {
    if (this.records.size === 0) return;
    const tiers = this.records.tiers;
    const keyIds = this.records.keyIds;
    for (let s = 0; s < tiers.length; s++) {
      if (tiers[s] === 0) continue;
      this.unref(keyIds[s]);
      tiers[s] = 0;
    }
    this.records.compact();
  }

  approxBytes(): number {
    return this.records.approxBytes() + this.keys.approxBytes();
  }

  private ref(words: Uint32Array, off: number): number {
    const id = this.keys.intern(words, off);
    this.keys.cells[id * KEY_STRIDE + REF_DEVICE]++;
    return id;
  }

  private unref(id: number): void {
    if (id < 0) return;
    const c = id * KEY_STRIDE + REF_DEVICE;
    if (--this.keys.cells[c] === 0) this.keys.release(id);
  }
}

/** keyIdOf: the hash is not remembered. */
export const NOT_FOUND = -3;
