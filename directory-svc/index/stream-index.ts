/**
 * The tiered prefix index of one stream (kv-events §5, §6 "Building", §7.5, §8): engine hash →
 * record `{content key | UNINDEXED, tiers ⊆ {Device, Host}}`, and per content key the union of
 * its records' tiers (residency). Pure in-memory state: no sockets, timers or logging; every bad
 * input is a typed error (§10).
 *
 * Layout: records live in an open-addressing table over typed arrays keyed by the engine hash's
 * two uint32 halves (read through a Uint32Array view of the decoder's BigUint64Array, so no bigint
 * per block), each naming its content key by a stable key id of the stream's residency group
 * (`keySpace`, shared/index/residency-index.ts): the 16 key bytes are stored once per group, not
 * once per stream. `KeyRefs` lists the ids this index pins, with each key's residency here.
 * Every residency change of a content key goes through `retierKey`, the one place an observer
 * (`onResidencyChange`) hears about it. The halves view assumes a little-endian host (x86-64,
 * arm64), as the decoder's BigUint64Array contract does (lo = [2i], hi = [2i+1]).
 *
 * Pins: an index holds one pin per key it refers to and gives them back when it is disposed, or,
 * for an index simply dropped (the subscriber replaces indexes in many places), once the garbage
 * collector has reclaimed it (a FinalizationRegistry hands its ids to the group, which releases
 * them a few per update). Until then those keys stay in the group with no holder: memory only,
 * never a match or a count.
 *
 * Costs: applying a block is O(1) expected plus one XXH3 for token-bearing in-scope blocks;
 * AllBlocksCleared and sameStateAs are O(records). Prefix matching is not done here: the served
 * index's residency is mirrored into the shared group index (served-residency.ts), which matches
 * every stream of a group in one walk. Memory ≈ 34 B per indexed block plus the group's share of
 * each key (bench/scale).
 *
 * Cache identity (cache-identity §3–§4): a block's key carries its identity's suffix, the root
 * suffix (LoRA and salt terms) on a parentless block, the chain suffix (LoRA term) otherwise; a
 * block keyed by multimodal items or embeddings is UNINDEXED like an out-of-scope one, and so are
 * its descendants. Only the stream's KV cache group is applied (cache-group-selection.ts).
 *
 * Where the spec is silent: an out-of-scope *tokenless* event counts skipped{out_of_scope} (or
 * `multimodal`) once per hash it ignores (unknown), not for hashes it adds a tier to; a snapshot
 * block's in-scope child of an UNINDEXED parent counts `descendant` (as §5.1 rule 4), an unseen
 * parent `orphan`. Skip counters count blocks, not notices: a re-emitted store of a known block
 * (vLLM's `kv_cache_report_mode="full"`, cache-identity §4 rule 6) counts nothing again, nor does
 * re-storing a STORAGE block already remembered. `skipped{group}` is the exception: other groups
 * are never recorded, so it counts every block hash of every store or removal it ignores.
 */
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { InconsistentError, LimitError, ProtocolError } from '../errors/stream-errors.js';
import { TIER_DEVICE, TIER_HOST, TIER_UNSERVED } from '../../shared/keys/tier-bits.js';
import type { BlockStoredEvent, KvEvent, SnapshotBlock } from '../decoder/kv-batch.js';
import { ResidencyIndex } from '../../shared/index/residency-index.js';
import { CacheGroupSelection } from './cache-group-selection.js';
import { EngineHashTable, UNINDEXED } from './engine-hash-table.js';
import { KeyRefs } from './key-refs.js';
import { NOT_FOUND, UnservedBlocks } from './unserved-blocks.js';

/** skipped{reason} counters of §10, incremented in place by the index. */
export interface SkipCounters {
  outOfScope: number;
  descendant: number;
  orphan: number;
  /**
   * engines.md §2: blocks stored on a medium we do not serve (STORAGE), per hash. Optional so
   * xllm-only callers need not carry it; set on the first such block.
   */
  medium?: number;
  /** cache-identity §4 rule 2: blocks keyed by multimodal items or prompt embeddings. */
  multimodal?: number;
  /** cache-identity §4 rule 4: blocks of a KV cache group the stream does not index. */
  group?: number;
}

/**
 * Called once per content key whose residency changes, with the old and new tier bits (0 = not
 * resident). The key is `keyWords[keyOffset .. keyOffset+4)` (low64 LE || high64 LE as uint32
 * words); the view is only valid during the call. The observer must not call back into the index.
 */
export type ResidencyObserver = (keyWords: Uint32Array, keyOffset: number, oldTiers: number, newTiers: number) => void;

export interface StreamIndexOptions {
  /** The stream's block_size (§9, 1..4096). */
  blockSize: number;
  /** Content-key hasher for the stream's hash_seed (§4), from ContentKeyHasher.forSeed. */
  hasher: ContentKeyHasher;
  /** max_blocks_per_stream (§9): budget of (engine hash, tier) pairs (§5.2). */
  maxEntries: number;
  /** Residency-change hook for the view stream (architecture.md, deltas). */
  onResidencyChange?: ResidencyObserver;
  /**
   * The residency group whose key ids the records use (the stream's group in the directory, so
   * its indexes share one copy of each key); a private one when absent (tests, tools).
   */
  keySpace?: ResidencyIndex;
  /**
   * The stream's KV cache group selection (cache-identity §4 rule 4), shared by every index the
   * stream builds; a private one when absent (tests, tools).
   */
  cacheGroup?: CacheGroupSelection;
}

/** A dropped index's pins, handed back to its group after garbage collection. */
interface HeldPins {
  readonly space: ResidencyIndex;
  readonly refs: KeyRefs;
}

const droppedIndexes = new FinalizationRegistry<HeldPins>((held) => held.space.dropPinsLater(held.refs.ids()));

/** Parent of a first block (nil parent): the key has no 16-byte prefix (§4). */
const ROOT = -2;
/** Parent whose key sits in `parentScratch` (a block known only on an unserved medium). */
const PARENT_SCRATCH = -4;
/** Popcount of tier bits 0..3: entries per record (§5.2). */
const TIER_COUNT = new Uint8Array([0, 1, 1, 2]);

/** `0x` + 16 hex digits, for error details only (cold path). */
function hashHex(lo: number, hi: number): string {
  return `0x${(hi >>> 0).toString(16).padStart(8, '0')}${(lo >>> 0).toString(16).padStart(8, '0')}`;
}

export class StreamIndex {
  readonly blockSize: number;
  readonly hasher: ContentKeyHasher;
  private readonly maxEntries: number;
  private readonly onResidencyChange: ResidencyObserver | undefined;
  private readonly records = new EngineHashTable();
  /** The stream's KV cache group (cache-identity §4 rule 4). */
  private readonly cacheGroup: CacheGroupSelection;
  /** Where the content keys live (key ids of the records). */
  readonly keySpace: ResidencyIndex;
  private readonly refs = new KeyRefs();
  /** One key's words handed to the observer, or compared across key spaces. */
  private readonly observedKey = new Uint32Array(4);
  private entries = 0;
  private deviceKeys = 0;
  private hostKeys = 0;
  /** Scratch for one computed key (§4), reused by every block. */
  private readonly scratchKey = new Uint8Array(16);
  private readonly scratchWords = new Uint32Array(this.scratchKey.buffer);
  /** A parent key copied out of `unserved` (PARENT_SCRATCH). */
  private readonly parentScratch = new Uint8Array(16);
  private readonly parentScratchWords = new Uint32Array(this.parentScratch.buffer);
  /** engines.md §2 STORAGE blocks and cache-identity §4 REMOTE ones; created on the first one. */
  private unserved: UnservedBlocks | null = null;
  private disposed = false;
  private changingKey = -1;

  constructor(opts: StreamIndexOptions) {
    if (!Number.isInteger(opts.blockSize) || opts.blockSize < 1) throw new RangeError(`blockSize must be a positive integer, got ${opts.blockSize}`);
    if (!Number.isInteger(opts.maxEntries) || opts.maxEntries < 1) throw new RangeError(`maxEntries must be a positive integer, got ${opts.maxEntries}`);
    this.blockSize = opts.blockSize;
    this.hasher = opts.hasher;
    this.maxEntries = opts.maxEntries;
    this.onResidencyChange = opts.onResidencyChange;
    this.cacheGroup = opts.cacheGroup ?? new CacheGroupSelection();
    this.keySpace = opts.keySpace ?? new ResidencyIndex(opts.blockSize, opts.hasher);
    // A private key space goes with the index; a shared one must get the pins back.
    if (opts.keySpace !== undefined) droppedIndexes.register(this, { space: this.keySpace, refs: this.refs }, this);
  }

  /**
   * The key id (in `keySpace`) of the residency change being reported, valid only during an
   * onResidencyChange call (−1 otherwise): lets a slot of the same group apply it by id.
   */
  get changingKeyId(): number {
    return this.changingKey;
  }

  /**
   * Gives back every pin at once; the index must not be used afterwards. Optional (a dropped
   * index's pins come back after garbage collection); for owners that know when they are done.
   */
  dispose(): void {
    if (this.disposed) return;
    this.disposed = true;
    droppedIndexes.unregister(this);
    const ids = this.refs.ids();
    for (let i = 0; i < ids.length; i++) this.keySpace.unpinKey(ids[i]!);
  }

  /** (engine hash, tier) pairs over all records, indexed or not (§5.2). */
  get entryCount(): number {
    return this.entries;
  }

  /** Indexed content keys resident on Device (§8). */
  get deviceBlocks(): number {
    return this.deviceKeys;
  }

  /** Indexed content keys resident on Host (§8); a replica counts here and in deviceBlocks. */
  get hostBlocks(): number {
    return this.hostKeys;
  }

  /** Number of records (engine hashes), indexed or not. */
  get recordCount(): number {
    return this.records.size;
  }

  /** Slots of the record table and of the key index, for churn tests and metrics. */
  get tableCapacity(): { records: number; keys: number } {
    return { records: this.records.capacity, keys: this.refs.capacity };
  }

  /**
   * Apply one batch's events in order (§5). Throws ProtocolError | InconsistentError | LimitError.
   * Not transactional: on a throw the caller discards this index (the stream leaves SYNCHRONIZED).
   */
  applyEvents(events: readonly KvEvent[], skipped: SkipCounters): void {
    const cacheGroup = this.cacheGroup;
    for (let i = 0; i < events.length; i++) {
      const e = events[i];
      switch (e.kind) {
        case 'stored':
          // cache-identity §4 rule 4: other groups never touch the index (nor its length rules).
          if (!cacheGroup.admitsStore(e.group, e.reusableGroup)) skipped.group = (skipped.group ?? 0) + e.blockHashes.length;
          else if (e.tier === TIER_UNSERVED) this.applyUnservedStored(e, skipped);
          else if (e.tokenIds.length === 0) this.applyTokenless(e, skipped);
          else this.applyTokenBearing(e, skipped);
          break;
        case 'removed':
          if (!cacheGroup.admitsRemoval(e.group)) skipped.group = (skipped.group ?? 0) + e.blockHashes.length;
          else if (e.tier === TIER_UNSERVED) this.unserved?.forget(e.blockHashes);
          else this.applyRemoved(e.blockHashes, e.tier);
          break;
        case 'cleared':
          if (e.tiers !== TIER_UNSERVED) this.clearTiers(e.tiers);
          // nil medium deletes every record (§5.2), the unserved ones too.
          if (e.tiers === TIER_UNSERVED || e.tiers === 3) this.unserved?.clear();
          break;
        default: {
          const unknownEvent: never = e;
          throw new Error(`unknown event ${String(unknownEvent)}`);
        }
      }
    }
  }

  /**
   * §6 Building: add one snapshot block in reply order. A parent not seen earlier makes the block
   * an orphan (UNINDEXED, skipped.orphan); an UNINDEXED parent makes it UNINDEXED (descendant).
   * Throws ProtocolError on a hash duplicated within the reply or a token count ≠ block_size,
   * LimitError on the entry budget.
   */
  addSnapshotBlock(block: SnapshotBlock, skipped: SkipCounters): void {
    const h = block.blockHash;
    const lo = Number(h & 0xffffffffn);
    const hi = Number((h >> 32n) & 0xffffffffn);
    // While building, records are only ever added, so a hash already present is a duplicate.
    if (this.records.find(lo, hi) >= 0) throw new ProtocolError(`duplicate block_hash ${hashHex(lo, hi)} in snapshot`);
    if (block.tokenIds.length !== this.blockSize) {
      throw new ProtocolError(`snapshot block ${hashHex(lo, hi)} has ${block.tokenIds.length} token_ids, block_size is ${this.blockSize}`);
    }
    let indexed = false;
    if (block.outOfScope) {
      skipped.outOfScope++;
    } else if (block.multimodal) {
      skipped.multimodal = (skipped.multimodal ?? 0) + 1;
    } else {
      let parent = ROOT;
      const ph = block.parentBlockHash;
      if (ph !== null) {
        const slot = this.records.find(Number(ph & 0xffffffffn), Number((ph >> 32n) & 0xffffffffn));
        parent = slot < 0 ? UNINDEXED : this.records.keyIds[slot];
        if (slot < 0) skipped.orphan++;
        else if (parent === UNINDEXED) skipped.descendant++;
      }
      if (parent !== UNINDEXED) {
        // cache-identity §3: the root suffix (LoRA, salt) on a parentless block, else the LoRA term.
        this.computeKey(parent, block.tokenIds, 0, parent === ROOT ? block.identity.rootSuffix : block.identity.chainSuffix);
        indexed = true;
      }
    }
    this.createRecord(lo, hi, indexed, block.tiers);
  }

  /** Residency (tier bits, 0 = absent) of the 16-byte content key at keys[offset..]. */
  residencyOf(keys: Uint8Array, offset: number): number {
    const id = this.keySpace.keyIdOf(keys, offset);
    return id < 0 ? 0 : this.refs.tiersOf(id);
  }

  /**
   * Every resident content key and its tier bits (architecture.md "The view stream": snapshots
   * and stream resets carry a stream's whole residency). `keys` holds N keys of 16 bytes (low64 LE
   * || high64 LE, §4), `tiers` N tier bytes (1 Device, 2 Host, 3 both), in id order. O(key ids);
   * allocates exactly the two result arrays. Like the observer, assumes a little-endian host.
   */
  exportResidency(): { keys: Uint8Array; tiers: Uint8Array } {
    const refs = this.refs;
    const keys = new Uint8Array(refs.size * 16);
    const words = new Uint32Array(keys.buffer);
    const tiers = new Uint8Array(refs.size);
    const space = this.keySpace;
    let n = 0;
    refs.forEach((id, t) => {
      space.copyKey(id, words, n << 2);
      tiers[n++] = t;
    });
    return { keys, tiers };
  }

  /**
   * exportResidency by key ids of `keySpace` (ids[i] has tier bits tiers[i]): what a slot of the
   * same group loads without hashing a key again (served-residency.ts). O(keys).
   */
  exportKeyIds(): { ids: Uint32Array; tiers: Uint8Array } {
    const refs = this.refs;
    const ids = new Uint32Array(refs.size);
    const tiers = new Uint8Array(refs.size);
    let n = 0;
    refs.forEach((id, t) => {
      ids[n] = id;
      tiers[n++] = t;
    });
    return { ids, tiers };
  }

  /**
   * §7.5: same engine hashes with the same tier sets, and every hash indexed in both has the same
   * key (a hash indexed in one and UNINDEXED in the other does not make them differ). O(records).
   */
  sameStateAs(other: StreamIndex): boolean {
    const mine = this.records;
    const theirs = other.records;
    if (mine.size !== theirs.size) return false;
    for (let s = 0; s < mine.tiers.length; s++) {
      const t = mine.tiers[s];
      if (t === 0) continue;
      const os = theirs.find(mine.hashLo[s], mine.hashHi[s]);
      if (os < 0 || theirs.tiers[os] !== t) return false;
      const k = mine.keyIds[s];
      const ok = theirs.keyIds[os];
      if (k >= 0 && ok >= 0 && !this.sameKey(k, other, ok)) return false;
    }
    return true;
  }

  /** Key id `k` here and key id `ok` of `other` are the same content key. */
  private sameKey(k: number, other: StreamIndex, ok: number): boolean {
    if (other.keySpace === this.keySpace) return k === ok;
    this.keySpace.copyKey(k, this.observedKey, 0);
    return other.keySpace.keyEquals(ok, this.observedKey, 0);
  }

  /** Estimated retained bytes (typed arrays), for metrics and the memory benchmark. */
  approxBytes(): number {
    return this.records.approxBytes() + this.refs.approxBytes() + (this.unserved?.approxBytes() ?? 0);
  }

  /**
   * §5.1 tokenless BlockStored: a replica notice for hashes already known. A block that is out
   * of scope (the whole event, or a multimodal block and the rest of the event) is `OUT` for
   * rule 2: unknown, it is ignored and counted; the parent rule 1 is `OUT` when block 0 is.
   */
  private applyTokenless(e: BlockStoredEvent, skipped: SkipCounters): void {
    const allOut = e.outOfScope;
    const reproducible = allOut ? 0 : e.reproducibleBlocks;
    const n = e.blockHashes.length;
    const ph = e.parentBlockHash;
    // Rule 1 unless OUT: an event with no hashes is in scope (it has no out-of-scope block 0).
    if (ph !== null && !allOut && (reproducible > 0 || n === 0)) {
      const plo = Number(ph & 0xffffffffn);
      const phi = Number((ph >> 32n) & 0xffffffffn);
      if (this.records.find(plo, phi) < 0 && this.unservedKeyOf(plo, phi) === NOT_FOUND) throw new InconsistentError(`unknown parent ${hashHex(plo, phi)}`);
    }
    const halves = new Uint32Array(e.blockHashes.buffer, e.blockHashes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) {
      const lo = halves[2 * i];
      const hi = halves[2 * i + 1];
      const slot = this.records.find(lo, hi);
      if (slot >= 0) {
        this.setTiers(slot, this.records.tiers[slot] | e.tier);
        continue;
      }
      // engines.md §2: a block known only on an unserved medium gets its first served tier
      // (e.g. loaded back from STORAGE) with the key derived when it was stored there.
      const unservedKey = this.unservedKeyOf(lo, hi);
      if (unservedKey !== NOT_FOUND) {
        if (unservedKey >= 0) (this.unserved as UnservedBlocks).copyKey(unservedKey, this.scratchWords, 0);
        this.createRecord(lo, hi, unservedKey >= 0, e.tier);
      } else if (i >= reproducible) {
        // An unknown out-of-scope hash is ignored (rule 2).
        if (allOut) skipped.outOfScope++;
        else skipped.multimodal = (skipped.multimodal ?? 0) + 1;
      } else throw new InconsistentError(`unknown hash ${hashHex(lo, hi)}`);
    }
  }

  /**
   * §5.1 token-bearing BlockStored, rules 1–4, with cache-identity §4: blocks from
   * `reproducibleBlocks` on are out of scope (the first carries multimodal items, the rest descend
   * from it). The event is `OUT` for rules 1–2 when its block 0 is.
   */
  private applyTokenBearing(e: BlockStoredEvent, skipped: SkipCounters): void {
    const allOut = e.outOfScope;
    const reproducible = allOut ? 0 : e.reproducibleBlocks;
    const n = e.blockHashes.length;
    // OUT for rules 1–2 when block 0 is (an event with no hashes has no out-of-scope block 0).
    const out = allOut || (reproducible === 0 && n > 0);
    const bs = this.blockSize;
    const tokens = e.tokenIds;
    if (!out) {
      if (e.blockSize !== bs) throw new ProtocolError(`block_size ${e.blockSize} differs from the stream's ${bs}`);
      if (tokens.length !== bs * n) throw new ProtocolError(`${tokens.length} token_ids for ${n} blocks of block_size ${bs}`);
    }
    // Rule 2: the parent key p (ROOT, UNINDEXED or a key id).
    let p = ROOT;
    if (out) {
      p = UNINDEXED;
    } else if (e.parentBlockHash !== null) {
      const ph = e.parentBlockHash;
      const plo = Number(ph & 0xffffffffn);
      const phi = Number((ph >> 32n) & 0xffffffffn);
      const slot = this.records.find(plo, phi);
      if (slot >= 0) p = this.records.keyIds[slot];
      else p = this.unservedParent(plo, phi);
    }
    const identity = e.identity;
    const m = e.tier;
    const halves = new Uint32Array(e.blockHashes.buffer, e.blockHashes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) {
      const lo = halves[2 * i];
      const hi = halves[2 * i + 1];
      const inScope = i < reproducible;
      // Rule 3: k = UNINDEXED under an unindexed parent, else the key of this block's tokens on p.
      if (!inScope) p = UNINDEXED;
      const indexed = p !== UNINDEXED;
      // cache-identity §3: only a parentless block takes the root suffix (its salt term).
      if (indexed) this.computeKey(p, tokens, i * bs, p === ROOT ? identity.rootSuffix : identity.chainSuffix);
      let slot = this.records.find(lo, hi);
      const created = slot < 0;
      if (created) {
        slot = this.createRecord(lo, hi, indexed, m);
      } else {
        const current = this.records.keyIds[slot];
        if (indexed) {
          if (current >= 0) {
            if (!this.keySpace.keyEquals(current, this.scratchWords, 0)) throw new InconsistentError(`content key conflict on hash ${hashHex(lo, hi)}`);
          } else {
            this.assignKey(slot, this.internKey());
          }
        }
        // Tiers only grow here, so setTiers neither deletes nor moves the slot.
        this.setTiers(slot, this.records.tiers[slot] | m);
      }
      // Rules 3–4: next parent; skips count blocks first recorded here (cache-identity §4 rule 6:
      // a re-emitted store of a known block counts nothing).
      if (!inScope) {
        if (created) {
          if (allOut) skipped.outOfScope++;
          else skipped.multimodal = (skipped.multimodal ?? 0) + 1;
        }
      } else {
        p = this.records.keyIds[slot];
        if (p === UNINDEXED && created) skipped.descendant++;
      }
    }
  }

  /**
   * engines.md §2: a BlockStored on a medium we do not serve (STORAGE). No tier, never an error:
   * hashes already served are left alone; the others are remembered with the key derived from
   * their tokens (UNINDEXED when the event cannot give one: tokenless, out of scope, a block size
   * or token count not the stream's, or an unknown or unindexed parent), so children chain.
   */
  private applyUnservedStored(e: BlockStoredEvent, skipped: SkipCounters): void {
    const n = e.blockHashes.length;
    const tokens = e.tokenIds;
    const bs = this.blockSize;
    if (tokens.length === 0) {
      skipped.medium = (skipped.medium ?? 0) + n;
      return;
    }
    let unserved = this.unserved;
    if (unserved === null) unserved = this.unserved = new UnservedBlocks(this.maxEntries);
    const reproducible = e.outOfScope ? 0 : e.reproducibleBlocks;
    const keyed = reproducible > 0 && e.blockSize === bs && tokens.length === bs * n;
    let p = UNINDEXED;
    if (keyed) {
      const ph = e.parentBlockHash;
      if (ph === null) {
        p = ROOT;
      } else {
        const plo = Number(ph & 0xffffffffn);
        const phi = Number((ph >> 32n) & 0xffffffffn);
        const slot = this.records.find(plo, phi);
        p = slot >= 0 ? this.records.keyIds[slot] : this.unservedParent(plo, phi, true);
      }
    }
    const identity = e.identity;
    let fresh = 0;
    const halves = new Uint32Array(e.blockHashes.buffer, e.blockHashes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) {
      const lo = halves[2 * i];
      const hi = halves[2 * i + 1];
      if (i >= reproducible) p = UNINDEXED;
      const slot = this.records.find(lo, hi);
      if (slot >= 0) {
        // Served already: its record (and key) stay as they are; chain from it.
        p = keyed && i < reproducible ? this.records.keyIds[slot] : UNINDEXED;
        continue;
      }
      // Counted once per block: a re-emitted store of a remembered one counts nothing (§4 rule 6).
      if (unserved.keyIdOf(lo, hi) === NOT_FOUND) fresh++;
      if (p === UNINDEXED) {
        unserved.remember(lo, hi, null, 0);
        continue;
      }
      this.computeKey(p, tokens, i * bs, p === ROOT ? identity.rootSuffix : identity.chainSuffix);
      const id = unserved.remember(lo, hi, this.scratchWords, 0);
      if (id < 0) {
        p = UNINDEXED;
      } else {
        unserved.copyKey(id, this.parentScratchWords, 0);
        p = PARENT_SCRATCH;
      }
    }
    if (fresh > 0) skipped.medium = (skipped.medium ?? 0) + fresh;
  }

  /** Key id of `lo, hi` among the unserved blocks, NOT_FOUND when it is not one. */
  private unservedKeyOf(lo: number, hi: number): number {
    return this.unserved === null ? NOT_FOUND : this.unserved.keyIdOf(lo, hi);
  }

  /**
   * A parent that is not a served record: an unserved block's key (copied to parentScratch,
   * PARENT_SCRATCH), UNINDEXED when it has none, and unknown → `inconsistent` (§5.1) unless
   * `lenient` (unserved events never invalidate the stream: the child is UNINDEXED).
   */
  private unservedParent(plo: number, phi: number, lenient = false): number {
    const id = this.unservedKeyOf(plo, phi);
    if (id === NOT_FOUND) {
      if (lenient) return UNINDEXED;
      throw new InconsistentError(`unknown parent ${hashHex(plo, phi)}`);
    }
    if (id === UNINDEXED) return UNINDEXED;
    (this.unserved as UnservedBlocks).copyKey(id, this.parentScratchWords, 0);
    return PARENT_SCRATCH;
  }

  /** §5.2 BlockRemoved(m): unknown hashes are a no-op; an emptied record is deleted. */
  private applyRemoved(hashes: BigUint64Array, m: number): void {
    const n = hashes.length;
    const halves = new Uint32Array(hashes.buffer, hashes.byteOffset, n * 2);
    for (let i = 0; i < n; i++) {
      const slot = this.records.find(halves[2 * i], halves[2 * i + 1]);
      if (slot >= 0) this.setTiers(slot, this.records.tiers[slot] & ~m);
    }
  }

  /** §5.2 AllBlocksCleared: remove `mask` from every record, deleting emptied ones. O(capacity). */
  private clearTiers(mask: number): void {
    const records = this.records;
    const tiers = records.tiers;
    const keyIds = records.keyIds;
    let emptied = 0;
    for (let s = 0; s < tiers.length; s++) {
      const t = tiers[s];
      if ((t & mask) === 0) continue;
      const nt = t & ~mask;
      this.entries -= TIER_COUNT[t] - TIER_COUNT[nt];
      if (keyIds[s] >= 0) this.retierKey(keyIds[s], t, nt);
      tiers[s] = nt; // zeroed slots break probing until compact() below
      if (nt === 0) emptied++;
    }
    if (emptied > 0) records.compact();
  }

  /**
   * Computes the §4 key of tokens[start .. start+bs) on parent p (ROOT, PARENT_SCRATCH or a key
   * id) with the identity `suffix` (cache-identity §3; null for plain text) into scratch.
   */
  private computeKey(p: number, tokens: Int32Array, start: number, suffix: Uint8Array | null): void {
    if (p === ROOT) this.hasher.keyInto(null, 0, tokens, start, this.blockSize, this.scratchKey, 0, suffix);
    else if (p === PARENT_SCRATCH) this.hasher.keyInto(this.parentScratch, 0, tokens, start, this.blockSize, this.scratchKey, 0, suffix);
    else this.hasher.keyInto(this.keySpace.keyBytes, this.keySpace.keyByteOffset(p), tokens, start, this.blockSize, this.scratchKey, 0, suffix);
  }

  /**
   * Key id of the scratch key, with one more pin: the record about to take it calls retierKey,
   * which keeps the pin for a key new to this index and gives it back otherwise.
   */
  private internKey(): number {
    return this.keySpace.pinKey(this.scratchWords, 0);
  }

  /** New record {scratch key or UNINDEXED, tiers}; checks the entry budget first. Returns its slot. */
  private createRecord(lo: number, hi: number, indexed: boolean, tiers: number): number {
    this.reserveEntries(TIER_COUNT[tiers]);
    const keyId = indexed ? this.internKey() : UNINDEXED;
    const slot = this.records.insert(lo, hi, keyId, tiers);
    this.entries += TIER_COUNT[tiers];
    if (keyId >= 0) this.retierKey(keyId, 0, tiers);
    return slot;
  }

  /** An UNINDEXED record takes key `keyId` (§5.1 rule 3): its tiers now count for that key. */
  private assignKey(slot: number, keyId: number): void {
    this.records.keyIds[slot] = keyId;
    this.retierKey(keyId, 0, this.records.tiers[slot]);
  }

  /** Sets a record's tier set; an empty set deletes the record (§5). */
  private setTiers(slot: number, newTiers: number): void {
    const records = this.records;
    const old = records.tiers[slot];
    if (old === newTiers) return;
    const delta = TIER_COUNT[newTiers] - TIER_COUNT[old];
    if (delta > 0) this.reserveEntries(delta);
    this.entries += delta;
    const keyId = records.keyIds[slot];
    if (keyId >= 0) this.retierKey(keyId, old, newTiers);
    if (newTiers === 0) records.deleteAt(slot);
    else records.tiers[slot] = newTiers;
  }

  private reserveEntries(n: number): void {
    if (this.entries + n > this.maxEntries) throw new LimitError(`max_blocks_per_stream ${this.maxEntries} exceeded`);
  }

  /**
   * The one place residency changes (§5: a key's residency is the union over its records): one
   * record with key `keyId` goes from tiers `oldRecordTiers` to `newRecordTiers`. Updates the
   * reference counts and the §8 block counts, tells the observer when the key's residency changed,
   * and releases the key once no record holds it.
   */
  private retierKey(keyId: number, oldRecordTiers: number, newRecordTiers: number): void {
    const change = this.refs.retier(keyId, oldRecordTiers, newRecordTiers);
    const before = change & 3;
    const after = change >>> 2;
    // A new record of a key this index already lists: internKey's extra pin goes back.
    if (oldRecordTiers === 0 && before !== 0) this.keySpace.unpinKey(keyId);
    if (before === after) return;
    this.deviceKeys += (after & TIER_DEVICE) - (before & TIER_DEVICE);
    this.hostKeys += ((after & TIER_HOST) - (before & TIER_HOST)) >> 1;
    if (this.onResidencyChange !== undefined) {
      // A copy: whoever hears it may update the group (served-residency.ts), which can move keys.
      this.keySpace.copyKey(keyId, this.observedKey, 0);
      this.changingKey = keyId;
      this.onResidencyChange(this.observedKey, 0, before, after);
      this.changingKey = -1;
    }
    if (after === 0) this.keySpace.unpinKey(keyId);
  }
}
