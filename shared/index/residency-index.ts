/**
 * The residency of every stream of one (block_size, hash_seed) group in one table (kv-events §4,
 * §8; routing.md CAR): content key → its holder set (which streams hold it on Device, which on
 * Host; shared/index/holder-sets.ts). The directory's query view and the router's view cache both
 * keep one per group and feed it per-stream tier changes (the view stream's residency) and stream
 * resets; the engine-hash records that produce those changes stay per stream (directory-svc/index).
 *
 * A prefix match (§8) walks the prompt once for all streams of the group: block i costs one key
 * lookup; the streams still matching ("alive") are a bitset narrowed by each block's holder set.
 * Device block counts are bit-sliced counters added once per run of equal holder sets, so
 * per-stream work happens only where a stream drops out, and once at the end for the streams
 * still alive. Content keys are computed lazily (§4 chain): block i is hashed only
 * while some candidate still matches blocks 0..i−1, so a prompt whose first block is nowhere
 * hashes one block. For CAR (keepMinimumOnly), ranks of an instance that can no longer be its
 * DP minimum stop early, so the walk can end before the longest prefix of any stream.
 *
 * A stream reset or removal (clearStream) costs O(holder sets), not O(keys): the sets are
 * rewritten in place; keys left with no holder are deleted by an incremental sweep.
 *
 * §8 rules kept exactly: each stream's prefix is its own (never assembled across streams or DP
 * ranks: membership is per stream slot), continuous from block 0, and a block on both tiers
 * counts as Device. Which streams may get credit at all (synchronized, view fresh) is the caller's
 * choice of candidates. Pure: no I/O; the request path allocates nothing.
 *
 * Key ids (the directory): a stream index names its content keys by stable ids of this table
 * (pinKey / unpinKey), so the directory keeps each key once per group, not once per stream; a
 * pinned key stays, with no holder, while some stream index refers to it. Pins of an index that
 * was dropped without unpinning come back through dropPinsLater and are released a few per update.
 *
 * Memory: per distinct key, shared by every holder, a 20-byte record (4 key words, set id; records
 * in insertion order, the record index being the key id, so a walk reads a chain's keys one after
 * another) plus an 8-byte hash index slot at 3/8–3/4 load; 4 B per key for the pins once the
 * directory pins; 36 B per distinct holder set.
 */
import { PLAIN_IDENTITY, type KeyIdentity } from '../keys/cache-identity.js';
import type { ContentKeyHasher } from '../keys/content-key.js';
import { keyWordAt } from '../keys/content-key-table.js';
import { EMPTY_SET, HOST_OFFSET, HolderSets, MAX_SLOTS, SET_STRIDE, SET_WORDS } from './holder-sets.js';
import { HOLDER_SET, KEY_RECORD_STRIDE, KeyHolderTable } from './key-holder-table.js';

/** Told one (stream slot, key, tier bits) at a time by visitKeyIds. */
export interface KeyTierSink {
  /** The stream in `slot` holds the key words[offset .. offset+4) on `tiers`; copy before returning. */
  keyTiers(slot: number, words: Uint32Array, offset: number, tiers: number): void;
}


const TIER_DEVICE = 1;
const TIER_HOST = 2;
/** Blocks looked up ahead of the narrowing in matchChain (misses in flight at once). */
const WINDOW = 8;
/**
 * Blocks walked before match() converts the prompt to int32 words (tokenWordsOf). Measured on the
 * car benchmark's view (min of 200 repetitions): walks of 40+ blocks 40 → 34 µs, walks of 12–40
 * blocks 23.5 → 24.8 µs; at 16 the deep walks gained only 37 µs.
 */
const DEEP_WALK_BLOCKS = 8;
/** Key records the orphan sweep looks at per key update (see sweepOrphans). */
const ORPHAN_SWEEP_STEP = 4;
/** Dropped pins released per key update (see dropPinsLater). */
const UNPIN_STEP = 16;

export class ResidencyIndex {
  readonly blockSize: number;
  readonly hasher: ContentKeyHasher;
  private readonly keys = new KeyHolderTable();
  private readonly sets = new HolderSets();
  private readonly deviceCounts = new Int32Array(MAX_SLOTS);
  private readonly hostCounts = new Int32Array(MAX_SLOTS);
  /** Per slot, the most Device blocks it held when it lost one (deviceEvictionBlocks). */
  private readonly evictedAtCounts = new Int32Array(MAX_SLOTS);
  private readonly slotUsed = new Uint8Array(MAX_SLOTS);
  private slotsInUse = 0;
  private readonly keyScratch = new Uint32Array(4);
  // Match scratch, reused by every call.
  private readonly candidates = new Uint32Array(SET_WORDS);
  private readonly alive = new Uint32Array(SET_WORDS);
  /** Alive streams whose current status is Device (else Host-only). */
  private readonly onDevice = new Uint32Array(SET_WORDS);
  /**
   * Device blocks of every alive stream over the holder-set runs closed so far, as bit-sliced
   * counters: plane p (SET_WORDS words) holds bit p of each stream's count, so adding a run's
   * length to all its Device streams costs O(log length) word operations, whatever the number of
   * streams, and a stream moving between Device and Host costs nothing (what a per-stream count
   * would pay on every such move).
   */
  private readonly planes = new Uint32Array(32 * SET_WORDS);
  /** Planes in use this walk: enough bits for the prompt's block count. */
  private planesUsed = 0;
  /** Streams that were Host-only, and that were on Device, in some run of this walk. */
  private readonly hostSeen = new Uint32Array(SET_WORDS);
  private readonly deviceSeen = new Uint32Array(SET_WORDS);
  /** First block of the current holder-set run (not yet in the planes). */
  private runStart = 0;
  private readonly deviceHits = new Int32Array(MAX_SLOTS);
  private readonly hostOnlyHits = new Int32Array(MAX_SLOTS);
  private chain = new Uint8Array(64 * 16);
  /** Word view of `chain`: the lookups read key words, not bytes. */
  private chainWords = new Uint32Array(this.chain.buffer);
  /** match()'s prompt as int32 words once a walk is deep (tokenWordsOf). */
  private tokenWords = new Int32Array(0);
  /** Holder sets of the blocks of one lookup window (matchChain). */
  private readonly window = new Uint32Array(WINDOW);
  /** keepMinimumOnly's host weight for the next match; −1: exact hits for every stream. */
  private minimumWeight = -1;
  /** Some candidate has a rank group (the group columns need clearing). */
  private grouped = false;
  /** Rank group (its leader slot) of each candidate, −1 for none. */
  private readonly rankLeader = new Int32Array(MAX_SLOTS).fill(-1);
  /** Per leader slot, its group's member slots (SET_WORDS words). */
  private readonly groupMask = new Uint32Array(MAX_SLOTS * SET_WORDS);
  /** Per leader, the minimum value over its dropped ranks during a walk. */
  private readonly groupMin = new Float64Array(MAX_SLOTS);
  /** Leaders with a dropped rank and, maybe, ranks still matching. */
  private readonly pending = new Uint32Array(SET_WORDS);
  private pendingAny = false;
  /** Holder set of the last block narrowed (a run of equal sets narrows once). */
  private lastSet = -1;
  private hashedBlocks = 0;
  /**
   * Key record of the last key updated or pinned: the next key of a chain is looked up at the
   * record after it first, and a new key takes that record when free (key-holder-table.ts).
   */
  private recent = -1;
  /** Keys in the table with no holder left (a zombie set, after clearStream), not yet deleted. */
  private orphanedKeys = 0;
  /** Next key record the orphan sweep looks at. */
  private sweepCursor = 0;
  /** Holder set ids the last clearStream visited (its cost; tests and benchmarks). */
  private clearWork = 0;
  /** Keys in the table only because they are pinned (empty holder set). */
  private pinnedOnly = 0;
  /** Key ids whose pin is to be dropped (dropPinsLater), oldest first, and the next to drop. */
  private readonly unpinQueue: Uint32Array[] = [];
  private unpinAt = 0;

  constructor(blockSize: number, hasher: ContentKeyHasher) {
    if (!Number.isInteger(blockSize) || blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${blockSize}`);
    this.blockSize = blockSize;
    this.hasher = hasher;
  }

  /** Streams with a slot. */
  get streamCount(): number {
    return this.slotsInUse;
  }

  /** Distinct resident keys over all streams. */
  get keyCount(): number {
    return this.keys.size - this.orphanedKeys - this.pinnedOnly;
  }

  /** Keys held only for the stream indexes pinning them (no holder). */
  get pinnedOnlyKeys(): number {
    return this.pinnedOnly;
  }

  /** Dropped pins not yet released (dropPinsLater). */
  get pendingUnpins(): number {
    let n = 0;
    for (const ids of this.unpinQueue) n += ids.length;
    return n - this.unpinAt;
  }

  /** Keys left with no holder by clearStream and not yet swept (memory only: never matched). */
  get unsweptKeys(): number {
    return this.orphanedKeys;
  }

  /** Holder set ids the last clearStream visited: its cost, independent of the key count. */
  get lastClearWork(): number {
    return this.clearWork;
  }

  /** Distinct holder sets in use. */
  get holderSetCount(): number {
    return this.sets.liveSets;
  }

  /** Blocks hashed by the last match (lazy hashing, for tests and benchmarks). */
  get lastHashedBlocks(): number {
    return this.hashedBlocks;
  }

  /** Bytes held by the typed arrays (keys, their hash index, holder sets). */
  approxBytes(): number {
    return this.keys.approxBytes() + this.sets.approxBytes();
  }

  /** A free stream slot (0..MAX_SLOTS−1), empty. Throws RangeError when the group is full. */
  addStream(): number {
    for (let s = 0; s < MAX_SLOTS; s++) {
      if (this.slotUsed[s] === 0) {
        this.slotUsed[s] = 1;
        this.evictedAtCounts[s] = 0;
        this.slotsInUse++;
        return s;
      }
    }
    throw new RangeError(`a residency group holds at most ${MAX_SLOTS} streams`);
  }

  /** Empties the slot's residency and frees it. O(holder sets) (clearStream). */
  removeStream(slot: number): void {
    this.checkSlot(slot);
    this.clearStream(slot);
    this.slotUsed[slot] = 0;
    this.slotsInUse--;
  }

  /** Keys resident on Device for the stream (§8 device_blocks). */
  deviceBlocks(slot: number): number {
    return this.deviceCounts[slot]!;
  }

  /**
   * The most Device blocks the stream held when one of them left Device (0: none ever left since
   * the slot was taken or last cleared). An engine evicts when its Device pool is full, so this is
   * what its pool holds: the TTFT policy's capacity estimate (ttft-cost.ts survivingHitTokens).
   * It can read a few blocks high when one update stores blocks before it removes others.
   */
  deviceEvictionBlocks(slot: number): number {
    return this.evictedAtCounts[slot]!;
  }

  /** Keys resident on Host for the stream; a replica counts here and in deviceBlocks. */
  hostBlocks(slot: number): number {
    return this.hostCounts[slot]!;
  }

  /**
   * Sets the stream's tier bits (1 Device, 2 Host, 3 both, 0 = not resident) of the 16-byte keys
   * keys[16i ..] to tiers[i], in order (last write wins). Sizes are the caller's to check.
   */
  setTiers(slot: number, keys: Uint8Array, tiers: Uint8Array): void {
    this.checkSlot(slot);
    const w = this.keyScratch;
    for (let i = 0; i < tiers.length; i++) {
      const o = i << 4;
      w[0] = keyWordAt(keys, o);
      w[1] = keyWordAt(keys, o + 4);
      w[2] = keyWordAt(keys, o + 8);
      w[3] = keyWordAt(keys, o + 12);
      this.setKeyTiers(slot, w, 0, tiers[i]!);
    }
  }

  /**
   * setTiers for pinned keys named by id (ids[i] gets tiers[i]): no key hashing or probing, the
   * directory's load of a whole stream index into its slot. Sizes are the caller's to check.
   */
  setIdTiers(slot: number, ids: Uint32Array, tiers: Uint8Array): void {
    for (let i = 0; i < tiers.length; i++) this.setIdTier(slot, ids[i]!, tiers[i]!);
  }

  /** setIdTiers of one pinned key. O(1). */
  setIdTier(slot: number, id: number, tiers: number): void {
    this.checkSlot(slot);
    this.maintain();
    this.recent = id;
    this.retierAt(slot, id, tiers);
  }

  /**
   * Sets the stream's tier bits of the key words[offset .. offset+4) (low64 LE || high64 LE as
   * uint32 words, the directory index's observer form). O(1) expected.
   */
  setKeyTiers(slot: number, words: Uint32Array, offset: number, tiers: number): void {
    this.maintain();
    const table = this.keys;
    const at = table.findAfter(words, offset, this.recent);
    if (at >= 0) {
      this.recent = at;
      this.retierAt(slot, at, tiers);
      return;
    }
    if (tiers === 0) return;
    const newSet = this.sets.transition(EMPTY_SET, slot, tiers);
    this.sets.retain(newSet);
    this.deviceCounts[slot] += tiers & TIER_DEVICE;
    this.hostCounts[slot] += tiers >> 1;
    this.recent = table.insert(words[offset]!, words[offset + 1]!, words[offset + 2]!, words[offset + 3]!, newSet, this.recent);
  }

  /** The stream's tier bits of key record `at` become `tiers`. */
  private retierAt(slot: number, at: number, tiers: number): void {
    const table = this.keys;
    const oldSet = table.setAt(at);
    const sets = this.sets;
    const before = sets.tiersOf(oldSet, slot);
    if (before === tiers) return;
    // A key left with no holder by clearStream is resident again.
    if (before === 0 && oldSet !== EMPTY_SET && sets.isZombie(oldSet)) this.orphanedKeys--;
    const newSet = sets.transition(oldSet, slot, tiers);
    sets.retain(newSet);
    sets.release(oldSet);
    if ((before & TIER_DEVICE) !== 0 && (tiers & TIER_DEVICE) === 0 && this.deviceCounts[slot]! > this.evictedAtCounts[slot]!) this.evictedAtCounts[slot] = this.deviceCounts[slot]!;
    this.deviceCounts[slot] += (tiers & TIER_DEVICE) - (before & TIER_DEVICE);
    this.hostCounts[slot] += ((tiers & TIER_HOST) - (before & TIER_HOST)) >> 1;
    if (oldSet === EMPTY_SET) this.pinnedOnly--;
    if (newSet !== EMPTY_SET) table.updateAt(at, newSet);
    else if (!table.pinnedAt(at)) table.deleteAt(at);
    else {
      table.updateAt(at, EMPTY_SET);
      this.pinnedOnly++;
    }
  }

  /**
   * One more pin on the key words[offset .. offset+4): it stays in the table (resident or not)
   * until unpinned. Returns its stable key id. O(1) expected.
   */
  pinKey(words: Uint32Array, offset: number): number {
    this.maintain();
    const table = this.keys;
    const size = table.size;
    const id = table.pin(words, offset, this.recent);
    if (table.size !== size) this.pinnedOnly++;
    this.recent = id;
    return id;
  }

  /** One pin fewer on key `id`; a key with no pin and no holder is deleted. */
  unpinKey(id: number): void {
    if (this.keys.unpin(id)) this.pinnedOnly--;
  }

  /**
   * A stream index that will not unpin its keys itself (it was dropped): each id in `ids` loses
   * one pin, UNPIN_STEP per later key update, so a large index costs no long pause.
   */
  dropPinsLater(ids: Uint32Array): void {
    if (ids.length !== 0) this.unpinQueue.push(ids);
  }

  /** Releases every pending dropped pin now (tests, idle time). */
  drainDroppedPins(): void {
    while (this.unpinQueue.length !== 0) this.unpinSome(Number.POSITIVE_INFINITY);
  }

  /** Key id of the 16-byte key at keys[offset ..], −1 when it is not pinned. */
  keyIdOf(keys: Uint8Array, offset: number): number {
    const id = this.keys.findBytes(keys, offset);
    return id >= 0 && this.keys.pinnedAt(id) ? id : -1;
  }

  /** Byte view holding the keys: key `id`'s 16 bytes start at keyByteOffset(id). */
  get keyBytes(): Uint8Array {
    return this.keys.bytes;
  }

  /** Offset of key `id` in keyBytes (keyBytes is replaced when the table grows). */
  keyByteOffset(id: number): number {
    return id * KEY_RECORD_STRIDE * 4;
  }

  /** Copies key `id`'s words into out[off .. off+4). */
  copyKey(id: number, out: Uint32Array, off: number): void {
    this.keys.copyKey(id, out, off);
  }

  /** True when key `id` equals words[off .. off+4). */
  keyEquals(id: number, words: Uint32Array, off: number): boolean {
    return this.keys.keyEquals(id, words, off);
  }

  /** Every key id in use is below this bound: the range of a visitKeyIds cursor. */
  get keyIdBound(): number {
    return this.keys.idBound;
  }

  /**
   * Tells `out` the tier bits, for each stream of `slots` (SET_WORDS words, a bit per slot) that
   * holds it, of every resident key with an id in [from, to), in id order, stopping before the
   * key that would take the count told past `room` (the first key is always told). Returns the next id to visit. A view
   * snapshot's cursor: a key's record (its id) never moves, so a cursor over ids visits, once,
   * every key that stays pinned while the table changes between calls. Only keys
   * with an id are visited: in the directory every resident key is pinned by the index serving
   * it (StreamIndex with this group as keySpace). O(to − from) with no allocation.
   */
  visitKeyIds(from: number, to: number, slots: Uint32Array, out: KeyTierSink, room: number): number {
    const table = this.keys;
    const tw = table.words;
    const sw = this.sets.words;
    const end = Math.min(to, table.idBound);
    let told = 0;
    let id = from;
    for (; id < end; id++) {
      // In use by the directory: some stream index pins it (ids below `end` are records).
      if (!table.pinnedAt(id)) continue;
      const at = id * KEY_RECORD_STRIDE;
      const set = tw[at + HOLDER_SET]!;
      if (set === EMPTY_SET) continue;
      const o = set * SET_STRIDE;
      let holders = 0;
      for (let k = 0; k < SET_WORDS; k++) holders += popcount((sw[o + k]! | sw[o + HOST_OFFSET + k]!) & slots[k]!);
      if (holders === 0) continue;
      if (told !== 0 && told + holders > room) break;
      told += holders;
      for (let k = 0; k < SET_WORDS; k++) {
        const device = sw[o + k]! & slots[k]!;
        const host = sw[o + HOST_OFFSET + k]! & slots[k]!;
        for (let m = device | host; m !== 0; m &= m - 1) {
          const low = m & -m;
          out.keyTiers((k << 5) | (31 - Math.clz32(low)), tw, at, ((device & low) !== 0 ? TIER_DEVICE : 0) | ((host & low) !== 0 ? TIER_HOST : 0));
        }
      }
    }
    return id;
  }

  /** Per key update: a step of the orphan sweep and of the dropped pins. */
  private maintain(): void {
    if (this.orphanedKeys !== 0) this.sweepOrphans(ORPHAN_SWEEP_STEP);
    if (this.unpinQueue.length !== 0) this.unpinSome(UNPIN_STEP);
  }

  private unpinSome(budget: number): void {
    const ids = this.unpinQueue[0]!;
    let i = this.unpinAt;
    const end = Math.min(ids.length, i + budget);
    for (; i < end; i++) this.unpinKey(ids[i]!);
    if (i < ids.length) {
      this.unpinAt = i;
      return;
    }
    this.unpinQueue.shift();
    this.unpinAt = 0;
  }

  /** Tier bits of one key for one stream (0 = not resident). */
  tiersOf(slot: number, key: Uint8Array, offset = 0): number {
    const at = this.keys.findBytes(key, offset);
    return at < 0 ? 0 : this.sets.tiersOf(this.keys.setAt(at), slot);
  }

  /**
   * Takes the stream out of every key's holder set (a reset, or before removal). O(holder set
   * ids), whatever the number of keys: the sets are rewritten in place (holder-sets.ts). Keys that
   * are left with no holder stop counting at once and are deleted by the incremental sweep.
   */
  clearStream(slot: number): void {
    this.checkSlot(slot);
    this.clearWork = 0;
    this.evictedAtCounts[slot] = 0;
    if (this.deviceCounts[slot] === 0 && this.hostCounts[slot] === 0) return;
    this.clearWork = this.sets.setIdCount;
    this.orphanedKeys += this.sets.clearSlot(slot);
    this.deviceCounts[slot] = 0;
    this.hostCounts[slot] = 0;
  }

  /**
   * Deletes up to `budget` key records' worth of keys left with no holder by clearStream, from
   * where the last step stopped. Called by every update (ORPHAN_SWEEP_STEP per key), so the table
   * returns to its live size within about (key records) / ORPHAN_SWEEP_STEP updates; callers with
   * idle time may call it too. O(budget).
   */
  sweepOrphans(budget: number): void {
    const table = this.keys;
    const sets = this.sets;
    let at = this.sweepCursor;
    for (let n = 0; n < budget && this.orphanedKeys > 0; n++) {
      if (at >= table.idBound) at = 0;
      const set = table.setAt(at);
      if (set === EMPTY_SET || !sets.isZombie(set)) {
        at++;
        continue;
      }
      sets.release(set);
      this.orphanedKeys--;
      if (table.pinnedAt(at)) {
        table.updateAt(at, EMPTY_SET);
        this.pinnedOnly++;
        at++;
        continue;
      }
      // Records never move: a delete leaves the others where they are.
      table.deleteAt(at);
      at++;
    }
    this.sweepCursor = at;
  }

  /** Starts choosing the candidates of the next match: none, in no rank group, exact hits. */
  clearCandidates(): void {
    this.candidates.fill(0);
    if (this.minimumWeight >= 0 || this.grouped) {
      this.rankLeader.fill(-1);
      this.groupMask.fill(0);
      this.minimumWeight = -1;
      this.grouped = false;
    }
  }

  /**
   * The stream may get credit in the next match (synchronized, view fresh). `leader` (optional)
   * puts it in a rank group: the DP ranks of one instance, named by the slot of one of them (the
   * same for all); used only by keepMinimumOnly.
   */
  addCandidate(slot: number, leader = -1): void {
    this.candidates[slot >>> 5] |= 1 << (slot & 31);
    if (leader < 0) return;
    this.rankLeader[slot] = leader;
    this.groupMask[leader * SET_WORDS + (slot >>> 5)] |= 1 << (slot & 31);
    this.grouped = true;
  }

  /**
   * Until clearCandidates: the caller needs, per rank group, just the minimum over its ranks of
   * device + hostWeight · host_only blocks (routing.md CAR) and that rank's own counts. Once a rank
   * has dropped out below every still-matching rank of its group, those ranks stop walking, so the
   * walk (and lazy hashing) can end before the longest prefix. Their hits are then lower bounds
   * that stay strictly above the group's minimum; the minimum rank's counts, and every stream
   * outside a group, are exact.
   */
  keepMinimumOnly(hostWeight: number): void {
    this.minimumWeight = hostWeight;
  }

  /**
   * kv-events §8 prefix match of `tokenIds` (ints in [0, 2^31), validated by the caller) for every
   * candidate at once, keyed under `identity` (cache-identity §3; plain by default); read the
   * results with deviceHitBlocks / hostOnlyHitBlocks (valid for the candidates until the next
   * match). Keys are hashed lazily. Hot path: O(hashed blocks + holder-set changes × alive
   * streams), no allocation once the chain buffer fits the prompt.
   */
  match(tokenIds: ArrayLike<number>, identity: KeyIdentity = PLAIN_IDENTITY): void {
    const blocks = Math.floor(tokenIds.length / this.blockSize);
    if (this.chain.length < blocks * 16) {
      this.chain = new Uint8Array(Math.max(blocks * 16, this.chain.length * 2));
      this.chainWords = new Uint32Array(this.chain.buffer);
    }
    this.hashedBlocks = 0;
    if (!this.startWalk(blocks) || blocks === 0) return;
    const bs = this.blockSize;
    const chain = this.chain;
    const keys = this.keys;
    let b = 0;
    let at = -1;
    let tokens = tokenIds;
    for (; b < blocks; b++) {
      // A deep walk (a shared prompt matched far): the rest of the prompt is converted to int32
      // words in one typed-array set (~0.6 ns a token) instead of per block element by element
      // (~1.7 ns), so each later block's preimage is one memcpy. Shallow walks never pay for it.
      if (b === DEEP_WALK_BLOCKS && !(tokens instanceof Int32Array)) tokens = this.tokenWordsOf(tokenIds);
      this.hasher.keyInto(b === 0 ? null : chain, (b - 1) << 4, tokens, b * bs, bs, chain, b << 4, b === 0 ? identity.rootSuffix : identity.chainSuffix);
      at = keys.findAfter(this.chainWords, b << 2, at);
      if (!this.narrow(at < 0 ? EMPTY_SET : keys.setAt(at), b)) break;
    }
    this.finishWalk(b, blocks);
    this.hashedBlocks = Math.min(b + 1, blocks);
  }

  /** `tokenIds` as int32 words in this index's scratch (valid until the next call). */
  private tokenWordsOf(tokenIds: ArrayLike<number>): Int32Array {
    if (this.tokenWords.length < tokenIds.length) this.tokenWords = new Int32Array(Math.max(tokenIds.length, this.tokenWords.length * 2));
    const words = this.tokenWords.length === tokenIds.length ? this.tokenWords : this.tokenWords.subarray(0, tokenIds.length);
    words.set(tokenIds);
    return words;
  }

  /**
   * The same match over an already computed §4 chain (`blocks` keys of 16 bytes). Without hashing
   * between them, the lookups run WINDOW blocks ahead of the narrowing. Block i + 1 is looked for
   * in the key record after block i's first (a chain stored at once has consecutive records), so
   * a walk is a few hash lookups plus sequential reads.
   */
  matchChain(keys: Uint8Array, blocks: number): void {
    const n = Math.min(blocks, keys.length >>> 4);
    this.hashedBlocks = 0;
    if (!this.startWalk(n) || n === 0) return;
    if (this.chain.length < n * 16) {
      this.chain = new Uint8Array(n * 16);
      this.chainWords = new Uint32Array(this.chain.buffer);
    }
    this.chain.set(keys.subarray(0, n << 4));
    const kw = this.chainWords;
    const table = this.keys;
    const win = this.window;
    let b = 0;
    let at = -1;
    walk: while (b < n) {
      const start = b;
      let end = Math.min(n, start + WINDOW);
      for (let j = start; j < end; j++) {
        at = table.findAfter(kw, j << 2, at);
        const set = at < 0 ? EMPTY_SET : table.setAt(at);
        win[j - start] = set;
        // No stream holds block j: the walk ends there, the blocks after it need no lookup.
        if (set === EMPTY_SET) end = j + 1;
      }
      for (; b < end; b++) if (!this.narrow(win[b - start]!, b)) break walk;
    }
    this.finishWalk(b, n);
  }

  /** Loads the candidates as the alive streams, from block 0 of `blocks`; false when none. */
  private startWalk(blocks: number): boolean {
    if (this.minimumWeight >= 0) {
      this.groupMin.fill(Number.POSITIVE_INFINITY);
      this.pending.fill(0);
    }
    this.pendingAny = false;
    let any = 0;
    for (let k = 0; k < SET_WORDS; k++) {
      const c = this.candidates[k]!;
      this.alive[k] = c;
      this.onDevice[k] = 0;
      this.hostSeen[k] = 0;
      this.deviceSeen[k] = 0;
      any |= c;
    }
    // Whole columns (MAX_SLOTS ints each): cheaper than a pass over the candidates' bits.
    this.deviceHits.fill(0);
    this.hostOnlyHits.fill(0);
    this.planesUsed = 32 - Math.clz32(blocks);
    this.planes.fill(0, 0, this.planesUsed * SET_WORDS);
    this.runStart = 0;
    this.lastSet = -1;
    return any !== 0;
  }

  /**
   * Block b's holder set narrows the alive streams; false when none is left. A run of blocks with
   * one holder set costs nothing per block; where the set changes, the run's length is added to
   * the counters of its Device streams (bit-sliced: O(log run) word operations), and only a stream
   * that drops out gets work of its own: its counts are read once and written.
   */
  private narrow(set: number, b: number): boolean {
    if (set === this.lastSet) return true;
    this.lastSet = set;
    this.closeRun(b);
    const alive = this.alive;
    const setWords = this.sets.words;
    const o = set * SET_STRIDE;
    let any = 0;
    for (let k = 0; k < SET_WORDS; k++) {
      const a = alive[k]!;
      if (a === 0) continue;
      const device = setWords[o + k]!;
      const nextAlive = a & (device | setWords[o + HOST_OFFSET + k]!);
      const dropped = a & ~nextAlive;
      if (dropped !== 0) this.drop(dropped, k, b);
      const nextDevice = nextAlive & device;
      this.deviceSeen[k] = this.deviceSeen[k]! | nextDevice;
      this.hostSeen[k] = this.hostSeen[k]! | (nextAlive & ~device);
      alive[k] = nextAlive;
      this.onDevice[k] = nextDevice;
      any |= nextAlive;
    }
    if (this.pendingAny) any = this.settle(b);
    return any !== 0;
  }

  /**
   * Streams `dropped` (bits of word k) held blocks [0, b): their hit counts, final for this walk.
   * Most never were Host-only, so all their blocks are Device hits: one store each, no counter
   * read (at 128 streams a walk drops ~110 streams, the bulk of its per-stream work).
   */
  private drop(dropped: number, k: number, b: number): void {
    const hostSeen = this.hostSeen[k]!;
    const hits = this.deviceHits;
    // hostOnlyHits stays 0 from startWalk: a stream is credited once per walk.
    for (let m = dropped & ~hostSeen; m !== 0; m &= m - 1) hits[(k << 5) | (31 - Math.clz32(m & -m))] = b;
    for (let m = dropped & hostSeen; m !== 0; m &= m - 1) {
      const low = m & -m;
      this.credit((k << 5) | (31 - Math.clz32(low)), k, low, b);
    }
    if (this.minimumWeight < 0) return;
    for (let m = dropped; m !== 0; m &= m - 1) this.rankDropped((k << 5) | (31 - Math.clz32(m & -m)));
  }

  /** Ends the holder-set run [runStart, b): its length goes into its Device streams' counters. */
  private closeRun(b: number): void {
    const len = b - this.runStart;
    this.runStart = b;
    if (len === 0) return;
    const planes = this.planes;
    for (let k = 0; k < SET_WORDS; k++) {
      const lanes = this.onDevice[k]!;
      if (lanes === 0) continue;
      for (let bit = 0, rest = len; rest !== 0; bit++, rest >>>= 1) {
        if ((rest & 1) === 0) continue;
        // Add 2^bit to every lane: ripple the carry up the planes.
        let carry = lanes;
        for (let p = bit; carry !== 0; p++) {
          const at = p * SET_WORDS + k;
          const v = planes[at]!;
          planes[at] = v ^ carry;
          carry &= v;
        }
      }
    }
  }

  /**
   * Device blocks of alive stream s (word k, bit `low`) over blocks [0, end): the closed runs plus,
   * when it is on Device, the current run up to `end`. A stream seen on one tier only needs none.
   */
  private deviceBlocksTo(s: number, k: number, low: number, end: number): number {
    if ((this.hostSeen[k]! & low) === 0) return end;
    const run = this.onDevice[k]! & low ? end - this.runStart : 0;
    if ((this.deviceSeen[k]! & low) === 0) return run;
    const planes = this.planes;
    const shift = s & 31;
    let n = 0;
    for (let p = 0; p < this.planesUsed; p++) n |= ((planes[p * SET_WORDS + k]! >>> shift) & 1) << p;
    return n + run;
  }

  /** Stream s held blocks [0, end): its hit counts, final for this walk. */
  private credit(s: number, k: number, low: number, end: number): void {
    const device = this.deviceBlocksTo(s, k, low, end);
    this.deviceHits[s] = device;
    this.hostOnlyHits[s] = end - device;
  }

  /** Stream s dropped out (keepMinimumOnly): its value may be its group's new minimum. */
  private rankDropped(s: number): void {
    const leader = this.rankLeader[s]!;
    if (leader < 0) return;
    const v = this.deviceHits[s]! + this.minimumWeight * this.hostOnlyHits[s]!;
    if (v < this.groupMin[leader]!) this.groupMin[leader] = v;
    this.pending[leader >>> 5] |= 1 << (leader & 31);
    this.pendingAny = true;
  }

  /**
   * After block b: a group whose still-matching ranks all exceed its minimum already can no longer
   * change its minimum; those ranks stop (credited through block b). Returns the alive words' OR.
   */
  private settle(b: number): number {
    const alive = this.alive;
    const w = this.minimumWeight;
    const end = b + 1;
    let stillPending = false;
    for (let pk = 0; pk < SET_WORDS; pk++) {
      for (let pm = this.pending[pk]!; pm !== 0; pm &= pm - 1) {
        const pLow = pm & -pm;
        const leader = (pk << 5) | (31 - Math.clz32(pLow));
        const min = this.groupMin[leader]!;
        const g = leader * SET_WORDS;
        let open = false;
        let settled = true;
        for (let k = 0; k < SET_WORDS && settled; k++) {
          for (let m = this.groupMask[g + k]! & alive[k]!; m !== 0; m &= m - 1) {
            const low = m & -m;
            const r = (k << 5) | (31 - Math.clz32(low));
            open = true;
            const device = this.deviceBlocksTo(r, k, low, end);
            if (device + w * (end - device) <= min) {
              settled = false;
              break;
            }
          }
        }
        if (!open) {
          this.pending[pk] = this.pending[pk]! & ~pLow;
          continue;
        }
        if (!settled) {
          stillPending = true;
          continue;
        }
        // Every open rank is above the minimum for good: credit what it holds and let it go.
        for (let k = 0; k < SET_WORDS; k++) {
          const m0 = this.groupMask[g + k]! & alive[k]!;
          for (let m = m0; m !== 0; m &= m - 1) {
            const low = m & -m;
            this.credit((k << 5) | (31 - Math.clz32(low)), k, low, end);
          }
          alive[k] = alive[k]! & ~m0;
          this.onDevice[k] = this.onDevice[k]! & ~m0;
        }
        this.pending[pk] = this.pending[pk]! & ~pLow;
      }
    }
    this.pendingAny = stillPending;
    let any = 0;
    for (let k = 0; k < SET_WORDS; k++) any |= alive[k]!;
    return any;
  }

  /** Streams alive at the end (block `stop` of `blocks`) hold every block of the prompt. */
  private finishWalk(stop: number, blocks: number): void {
    if (stop < blocks) return;
    const alive = this.alive;
    for (let k = 0; k < SET_WORDS; k++) {
      for (let m = alive[k]!; m !== 0; m &= m - 1) {
        const low = m & -m;
        this.credit((k << 5) | (31 - Math.clz32(low)), k, low, blocks);
      }
    }
  }

  /** Blocks of the last match's prefix on Device for a candidate. */
  deviceHitBlocks(slot: number): number {
    return this.deviceHits[slot]!;
  }

  /** Blocks of the last match's prefix on Host only for a candidate. */
  hostOnlyHitBlocks(slot: number): number {
    return this.hostOnlyHits[slot]!;
  }

  private checkSlot(slot: number): void {
    if (!(slot >= 0 && slot < MAX_SLOTS && this.slotUsed[slot] === 1)) throw new RangeError(`stream slot ${slot} is not in use`);
  }
}

/** Set bits of a 32-bit word. */
function popcount(v: number): number {
  let x = v - ((v >>> 1) & 0x55555555);
  x = (x & 0x33333333) + ((x >>> 2) & 0x33333333);
  return (Math.imul((x + (x >>> 4)) & 0x0f0f0f0f, 0x01010101) >>> 24);
}
