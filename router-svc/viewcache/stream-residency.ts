/**
 * One stream's residency in the router's view (architecture.md "The view stream"): content key →
 * tier bits, in the shared ContentKeyTable with its Device / Host count words holding 0 or 1
 * (the view sends tier bits, not the directory's reference counts). Keys with no tier are
 * released, so "found" means "resident", exactly as in the directory's index (kv-events §8).
 *
 * Costs: setTiers is O(1) expected per key; matchPrefix is O(matched blocks) and allocates
 * nothing (request hot path).
 */
import { ContentKeyTable, KEY_STRIDE, REF_DEVICE, REF_HOST, keyWordAt, type PrefixHit } from '../../shared/keys/content-key-table.js';

const TIER_DEVICE = 1;
const TIER_HOST = 2;

export class StreamResidency {
  private readonly table = new ContentKeyTable();
  private device = 0;
  private host = 0;
  private readonly scratch = new Uint32Array(4);

  /** Keys resident on Device (§8 device_blocks). */
  get deviceBlocks(): number {
    return this.device;
  }

  /** Keys resident on Host; a replica counts here and in deviceBlocks (§8 host_blocks). */
  get hostBlocks(): number {
    return this.host;
  }

  /** Resident keys. */
  get size(): number {
    return this.table.size;
  }

  /**
   * Sets the tier bits of keys[16i .. 16i+16) to tiers[i], in order (last write wins); 0 removes
   * the key. Sizes were checked by the decoder.
   */
  setTiers(keys: Uint8Array, tiers: Uint8Array): void {
    const w = this.scratch;
    const table = this.table;
    for (let i = 0; i < tiers.length; i++) {
      const o = i << 4;
      w[0] = keyWordAt(keys, o);
      w[1] = keyWordAt(keys, o + 4);
      w[2] = keyWordAt(keys, o + 8);
      w[3] = keyWordAt(keys, o + 12);
      const t = tiers[i]!;
      if (t === 0) {
        const id = table.findWords(w[0], w[1], w[2], w[3]);
        if (id < 0) continue;
        const c = id * KEY_STRIDE;
        this.device -= table.cells[c + REF_DEVICE]!;
        this.host -= table.cells[c + REF_HOST]!;
        table.cells[c + REF_DEVICE] = 0;
        table.cells[c + REF_HOST] = 0;
        table.release(id);
        continue;
      }
      const id = table.intern(w, 0);
      // cells may have been replaced by the intern's growth: read it afterwards.
      const cells = table.cells;
      const c = id * KEY_STRIDE;
      const d = t & TIER_DEVICE ? 1 : 0;
      const h = t & TIER_HOST ? 1 : 0;
      this.device += d - cells[c + REF_DEVICE]!;
      this.host += h - cells[c + REF_HOST]!;
      cells[c + REF_DEVICE] = d;
      cells[c + REF_HOST] = h;
    }
  }

  /** Tier bits of one key (tests and diagnostics; 0 = not resident). */
  tiersOf(key: Uint8Array, offset = 0): number {
    const id = this.table.findBytes(key, offset);
    if (id < 0) return 0;
    const c = id * KEY_STRIDE;
    return (this.table.cells[c + REF_DEVICE]! > 0 ? TIER_DEVICE : 0) | (this.table.cells[c + REF_HOST]! > 0 ? TIER_HOST : 0);
  }

  /** kv-events §8 walk over a chain of `blockCount` keys. Hot path: no allocation. */
  matchPrefix(keys: Uint8Array, blockCount: number, out: PrefixHit): void {
    this.table.matchPrefix(keys, blockCount, out);
  }
}
