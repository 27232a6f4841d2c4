/**
 * The content keys one stream index refers to (kv-events §5): group key id → the key's residency
 * in this index (the union of its records' tiers). The keys themselves live once per group in the
 * shared residency index (shared/index/residency-index.ts, stable key ids with pins); this index
 * holds one pin per key listed here. Private to `index/`.
 *
 * Layout: open addressing with linear probing over one Uint32Array, one word per key:
 * (id + 1) << 2 | tiers, 0 = empty, so a key costs 4 B at 3/8–3/4 load. Almost every key has one
 * record per stream; a key with several (engine hashes differing in what the content key leaves
 * out) keeps its Device / Host record counts in `counts`, the exception path.
 * Deletion is backward shift; the table halves below 1/8 full. Pure: no I/O.
 */

const MIN_SLOTS = 16;
/** Host record counts are stored × this in `counts` (Device counts below it). */
const HOST_UNIT = 2 ** 26;

/** murmur3 fmix32: ids are dense small integers. */
function mixId(id: number): number {
  let h = Math.imul(id ^ (id >>> 16), 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

export class KeyRefs {
  private slots = new Uint32Array(MIN_SLOTS);
  private mask = MIN_SLOTS - 1;
  private live = 0;
  /** Keys with more than one record: id → Device records + HOST_UNIT × Host records. */
  private readonly counts = new Map<number, number>();

  get size(): number {
    return this.live;
  }

  get capacity(): number {
    return this.mask + 1;
  }

  approxBytes(): number {
    return this.slots.byteLength + this.counts.size * 16;
  }

  /** Tier bits of key `id` in this index (0 = not referred to). */
  tiersOf(id: number): number {
    const at = this.find(id);
    return at < 0 ? 0 : this.slots[at]! & 3;
  }

  /**
   * One record of key `id` goes from tiers `oldRecord` to `newRecord` (0 = the record is new, or
   * is deleted). Returns the key's residency before and after as `before | after << 2`.
   */
  retier(id: number, oldRecord: number, newRecord: number): number {
    const at = this.find(id);
    const before = at < 0 ? 0 : this.slots[at]! & 3;
    let after: number;
    const c = this.counts.get(id);
    if (c !== undefined) {
      after = this.recount(id, c, oldRecord, newRecord);
    } else if (oldRecord === 0 && before !== 0) {
      // A second record of the key: from now on its records are counted.
      after = this.recount(id, (before & 1) + HOST_UNIT * (before >>> 1), 0, newRecord);
    } else {
      after = newRecord; // its only record
    }
    if (after !== before) {
      if (after === 0) this.deleteAt(at);
      else if (at < 0) this.insert(id, after);
      else this.slots[at] = (((id + 1) << 2) | after) >>> 0;
    }
    return before | (after << 2);
  }

  /** The ids listed, compact (a dropped index's pins). */
  ids(): Uint32Array {
    const out = new Uint32Array(this.live);
    let n = 0;
    const slots = this.slots;
    for (let i = 0; i < slots.length; i++) if (slots[i] !== 0) out[n++] = (slots[i]! >>> 2) - 1;
    return out;
  }

  /** Calls fn(id, tiers) for every key listed, in slot order. */
  forEach(fn: (id: number, tiers: number) => void): void {
    const slots = this.slots;
    for (let i = 0; i < slots.length; i++) {
      const v = slots[i]!;
      if (v !== 0) fn((v >>> 2) - 1, v & 3);
    }
  }

  private recount(id: number, c: number, oldRecord: number, newRecord: number): number {
    const next = c + (newRecord & 1) - (oldRecord & 1) + HOST_UNIT * ((newRecord >>> 1) - (oldRecord >>> 1));
    const device = next % HOST_UNIT;
    const host = Math.floor(next / HOST_UNIT);
    if (device === 0 && host === 0) this.counts.delete(id);
    else this.counts.set(id, next);
    return (device > 0 ? 1 : 0) | (host > 0 ? 2 : 0);
  }

  private find(id: number): number {
    const tag = id + 1;
    const slots = this.slots;
    const mask = this.mask;
    let i = mixId(id) & mask;
    for (;;) {
      const v = slots[i]!;
      if (v === 0) return -1;
      if (v >>> 2 === tag) return i;
      i = (i + 1) & mask;
    }
  }

  private insert(id: number, tiers: number): void {
    if ((this.live + 1) * 4 > this.capacity * 3) this.resize(this.capacity * 2);
    this.place((((id + 1) << 2) | tiers) >>> 0);
    this.live++;
  }

  private place(v: number): void {
    const mask = this.mask;
    let i = mixId((v >>> 2) - 1) & mask;
    while (this.slots[i] !== 0) i = (i + 1) & mask;
    this.slots[i] = v;
  }

  private deleteAt(slot: number): void {
    const mask = this.mask;
    const slots = this.slots;
    let hole = slot;
    let j = slot;
    for (;;) {
      j = (j + 1) & mask;
      const v = slots[j]!;
      if (v === 0) break;
      const home = mixId((v >>> 2) - 1) & mask;
      // The entry at j may fill the hole only if its home is not cyclically within (hole, j].
      const stays = hole <= j ? hole < home && home <= j : hole < home || home <= j;
      if (stays) continue;
      slots[hole] = v;
      hole = j;
    }
    slots[hole] = 0;
    this.live--;
    if (this.capacity > MIN_SLOTS && this.live * 8 < this.capacity) this.resize(this.capacity / 2);
  }

  private resize(capacity: number): void {
    const old = this.slots;
    this.slots = new Uint32Array(capacity);
    this.mask = capacity - 1;
    for (let i = 0; i < old.length; i++) if (old[i] !== 0) this.place(old[i]!);
  }
}
