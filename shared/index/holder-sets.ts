/**
 * Interned holder sets of one residency group (shared/index/residency-index.ts): a set is the pair
 * (Device streams, Host streams) as two bitsets over the group's stream slots, stored once however
 * many content keys it describes (as SGLang's model gateway interns its worker sets). Keys that a
 * prompt prefix shares are held by the same streams, so a fleet has few distinct sets and each key
 * pays one 4-byte set id instead of a record per holder.
 *
 * Layout: `words` holds SET_STRIDE uint32 per set id: Device bits (SET_WORDS words), Host bits
 * (SET_WORDS words), the number of keys using the set. Id 0 is the empty set, never released.
 * A hash index (open addressing, linear probing, id + 1 per slot) finds a set by its bits.
 * Sets whose use count falls to zero stay findable ("dead") until dead sets outnumber live ones;
 * then the hash index is rebuilt from the live sets and the dead ids are recycled. So an update
 * never deletes from the hash index, and a set that comes back is found again at no cost.
 *
 * Clearing a stream (a reset or a removal) rewrites the sets in place (`clearSlot`): every set
 * holding the stream loses its bits, so every key using it is updated at once, and the cost is
 * O(set ids), not O(keys). Two ids may then hold equal bits (harmless: a match reads bits, and
 * intern returns either). A set left with no bits is a "zombie": its keys are no longer resident
 * and are deleted by the index's incremental sweep (residency-index.ts); a zombie is never in the
 * hash index, so an update never returns it, and its id is recycled once its keys are gone.
 * Pure: no I/O; allocation only on growth.
 */

/** Stream slots per group: kv-events §9 max_streams (128) = 4 words of 32 bits. */
export const MAX_SLOTS = 128;
/** uint32 words per tier bitset. */
export const SET_WORDS = MAX_SLOTS >>> 5;
/** Offset of the Host bits within a set. */
export const HOST_OFFSET = SET_WORDS;
/** Offset of the use count within a set. */
const USES = 2 * SET_WORDS;
/** uint32 per set id. */
export const SET_STRIDE = 2 * SET_WORDS + 1;
/** The empty set (no holder on either tier). */
export const EMPTY_SET = 0;

const MIN_SETS = 16;
const TRANSITION_ENTRIES = 4096;
/** Use count of an id on the free list (not in the hash index). */
const FREE = 0xffffffff;
/** Dead sets tolerated beyond the live ones before the hash index is rebuilt. */
const DEAD_SLACK = 1024;

/** Hash of the 2 × SET_WORDS bit words starting at w[o]. */
function hashBits(w: Uint32Array, o: number): number {
  let h = 0x811c9dc5;
  for (let k = 0; k < 2 * SET_WORDS; k++) {
    h = Math.imul(h ^ w[o + k]!, 0x01000193);
    h ^= h >>> 15;
  }
  h = Math.imul(h, 0x85ebca6b);
  return (h ^ (h >>> 13)) >>> 0;
}

export class HolderSets {
  /** SET_STRIDE words per id. Replaced on growth: re-read after intern(). */
  words: Uint32Array;
  private slots: Uint32Array;
  private slotMask: number;
  private capacity: number;
  private highWater = 1;
  /** Ids not in the hash index, ready for reuse. */
  private freeIds: Int32Array = new Int32Array(0);
  private freeCount = 0;
  /** Ids in the hash index (live or dead), the empty set included. */
  private indexed = 1;
  /** Ids with a use count > 0, the empty set excluded (zombies included). */
  private live = 0;
  /** 1 for a zombie id (no bits left after clearSlot, not in the hash index). */
  private zombie: Uint8Array;
  /** Zombie ids with a use count > 0. */
  private liveZombies = 0;
  /** Scratch of one set under construction (bits only). */
  readonly scratch = new Uint32Array(SET_STRIDE);
  /**
   * Direct-mapped cache of transitions (set, slot, tiers) → set: ingest repeats the same few
   * (a stream storing block after block of one prefix), so most updates skip the intern. Three
   * words per entry: set + 1 (0 = empty), slot | tiers << 8, result. Cleared when ids are recycled.
   */
  private readonly transitions = new Int32Array(TRANSITION_ENTRIES * 3);

  constructor() {
    this.capacity = MIN_SETS;
    this.words = new Uint32Array(MIN_SETS * SET_STRIDE);
    this.slots = new Uint32Array(MIN_SETS * 2);
    this.slotMask = MIN_SETS * 2 - 1;
    this.zombie = new Uint8Array(MIN_SETS);
    this.insertSlot(EMPTY_SET);
  }

  /** Sets with at least one key (the empty set and zombies aside). */
  get liveSets(): number {
    return this.live - this.liveZombies;
  }

  /** Bytes held by the columns. */
  approxBytes(): number {
    return this.words.byteLength + this.slots.byteLength + this.freeIds.byteLength + this.zombie.byteLength;
  }

  /** Set ids allocated so far (what clearSlot visits). */
  get setIdCount(): number {
    return this.highWater;
  }

  /** True when set `id` lost all its bits in clearSlot (its keys are not resident). */
  isZombie(id: number): boolean {
    return this.zombie[id] === 1;
  }

  /**
   * Takes stream `slot` out of every set, in place (see the header): O(set ids), whatever the
   * number of keys. Returns how many keys were left with no holder (the keys of new zombies).
   */
  clearSlot(slot: number): number {
    const w = this.words;
    const word = slot >>> 5;
    const keep = ~(1 << (slot & 31));
    let orphanedKeys = 0;
    for (let id = 1; id < this.highWater; id++) {
      const o = id * SET_STRIDE;
      const uses = w[o + USES]!;
      if (uses === FREE || this.zombie[id] === 1) continue;
      const d = w[o + word]!;
      const h = w[o + HOST_OFFSET + word]!;
      if (((d | h) & ~keep) === 0) continue;
      w[o + word] = d & keep;
      w[o + HOST_OFFSET + word] = h & keep;
      let bits = 0;
      for (let k = 0; k < 2 * SET_WORDS; k++) bits |= w[o + k]!;
      if (bits !== 0) continue;
      this.zombie[id] = 1;
      if (uses > 0) {
        this.liveZombies++;
        orphanedKeys += uses;
      }
    }
    // Cached transitions name the old bits, and the hash index places sets by them.
    this.transitions.fill(0);
    this.rebuildSlots(this.slotMask + 1, false);
    return orphanedKeys;
  }

  /** Copies set `id`'s bits into `scratch`. */
  load(id: number): void {
    const o = id * SET_STRIDE;
    const w = this.words;
    const s = this.scratch;
    for (let k = 0; k < 2 * SET_WORDS; k++) s[k] = w[o + k]!;
  }

  /** Id of the set whose bits are in `scratch`, interning it (use count 0) when new. */
  internScratch(): number {
    const s = this.scratch;
    const h = hashBits(s, 0);
    const mask = this.slotMask;
    const slots = this.slots;
    let i = h & mask;
    for (;;) {
      const tag = slots[i]!;
      if (tag === 0) break;
      if (this.sameBits(tag - 1, s)) return tag - 1;
      i = (i + 1) & mask;
    }
    const id = this.allocateId();
    const o = id * SET_STRIDE;
    const w = this.words;
    for (let k = 0; k < 2 * SET_WORDS; k++) w[o + k] = s[k]!;
    w[o + USES] = 0;
    this.insertSlot(id);
    return id;
  }

  /**
   * The set equal to `id` with stream `slot`'s tier bits replaced by `tiers` (1 Device, 2 Host),
   * interned (use count unchanged: the caller retains it).
   */
  transition(id: number, slot: number, tiers: number): number {
    const tag = slot | (tiers << 8);
    const e = (Math.imul(id ^ (tag << 12), 0x9e3779b1) >>> 20) * 3;
    const t = this.transitions;
    if (t[e] === id + 1 && t[e + 1] === tag) return t[e + 2]!;
    this.load(id);
    const s = this.scratch;
    const word = slot >>> 5;
    const bit = 1 << (slot & 31);
    s[word] = tiers & 1 ? s[word]! | bit : s[word]! & ~bit;
    s[word + HOST_OFFSET] = tiers & 2 ? s[word + HOST_OFFSET]! | bit : s[word + HOST_OFFSET]! & ~bit;
    const next = this.internScratch();
    t[e] = id + 1;
    t[e + 1] = tag;
    t[e + 2] = next;
    return next;
  }

  /** One more key uses set `id`. */
  retain(id: number): void {
    if (id === EMPTY_SET) return;
    const o = id * SET_STRIDE + USES;
    if (this.words[o]++ === 0) this.live++;
  }

  /** One key fewer uses set `id`; dead sets are swept once they outnumber the live ones. */
  release(id: number): void {
    if (id === EMPTY_SET) return;
    const o = id * SET_STRIDE + USES;
    if (--this.words[o] === 0) {
      this.live--;
      if (this.zombie[id] === 1) this.liveZombies--;
      // Dead = allocated, not free, unused (findable or zombie).
      const dead = this.highWater - 1 - this.freeCount - this.live;
      if (dead > this.live + DEAD_SLACK) this.sweep();
    }
  }

  /** Tier bits (1 Device, 2 Host) of stream `slot` in set `id`. */
  tiersOf(id: number, slot: number): number {
    const o = id * SET_STRIDE + (slot >>> 5);
    const bit = 1 << (slot & 31);
    const w = this.words;
    return (w[o]! & bit ? 1 : 0) | (w[o + HOST_OFFSET]! & bit ? 2 : 0);
  }

  private sameBits(id: number, s: Uint32Array): boolean {
    const o = id * SET_STRIDE;
    const w = this.words;
    for (let k = 0; k < 2 * SET_WORDS; k++) if (w[o + k] !== s[k]) return false;
    return true;
  }

  private allocateId(): number {
    let id: number;
    if (this.freeCount > 0) id = this.freeIds[--this.freeCount]!;
    else {
      id = this.highWater++;
      if (id >= this.capacity) {
        const grown = new Uint32Array(this.capacity * 2 * SET_STRIDE);
        grown.set(this.words);
        this.words = grown;
        const zombie = new Uint8Array(this.capacity * 2);
        zombie.set(this.zombie);
        this.zombie = zombie;
        this.capacity *= 2;
      }
    }
    return id;
  }

  /** Adds id to the hash index, doubling it above half full. */
  private insertSlot(id: number): void {
    if ((this.indexed + 1) * 2 > this.slotMask + 1) this.rebuildSlots((this.slotMask + 1) * 2, false);
    this.placeSlot(id);
    if (id !== EMPTY_SET) this.indexed++;
  }

  private placeSlot(id: number): void {
    const mask = this.slotMask;
    let i = hashBits(this.words, id * SET_STRIDE) & mask;
    while (this.slots[i] !== 0) i = (i + 1) & mask;
    this.slots[i] = id + 1;
  }

  /** Drops the dead sets from the hash index and recycles their ids. O(set ids). */
  private sweep(): void {
    // Ids are about to be recycled: a cached transition could name one.
    this.transitions.fill(0);
    let n = 4 * MIN_SETS;
    while (n < (this.live + 1) * 4) n *= 2;
    this.rebuildSlots(n, true);
  }

  private rebuildSlots(slotCount: number, dropDead: boolean): void {
    if (slotCount === this.slots.length) this.slots.fill(0);
    else this.slots = new Uint32Array(slotCount);
    this.slotMask = slotCount - 1;
    this.indexed = 1;
    this.placeSlot(EMPTY_SET);
    if (dropDead) this.freeCount = 0;
    const w = this.words;
    for (let id = 1; id < this.highWater; id++) {
      const uses = w[id * SET_STRIDE + USES]!;
      const unused = uses === FREE || (uses === 0 && dropDead);
      if (unused) {
        if (dropDead) this.pushFree(id);
        continue;
      }
      // A zombie's (empty) bits must not be found: an update to "no holder" is the empty set.
      if (this.zombie[id] === 1) continue;
      this.placeSlot(id);
      this.indexed++;
    }
  }

  private pushFree(id: number): void {
    if (this.freeCount === this.freeIds.length) {
      const grown = new Int32Array(Math.max(MIN_SETS, this.freeCount * 2));
      grown.set(this.freeIds);
      this.freeIds = grown;
    }
    this.freeIds[this.freeCount++] = id;
    this.words[id * SET_STRIDE + USES] = FREE;
    this.zombie[id] = 0;
  }
}
