/**
 * One view snapshot (architecture.md "The view stream": a full snapshot in messages ≤ 4 MiB),
 * built from the shared group index the directory's query view already keeps (shared/index), in
 * bounded slices, never from a stream's own index. A small view (one message, a few slices of
 * reading) is one ViewSnapshot, built at once; a larger one is ViewSnapshotChunk parts: part 0 holds the instances
 * and every stream's identity and state (taken at the start, exact at the snapshot's version),
 * the next parts runs of each stream's keys, encoded one part at a time as the watchers take them.
 *
 * The residency is read by a cursor over each group's stable key ids (ResidencyIndex.visitKeyIds),
 * SLICE_KEY_IDS per event-loop turn (setImmediate between slices), while the view keeps changing.
 * So the parts are fuzzy: each (stream, key) is read as it was at some moment of the build. The
 * router makes it exact with the deltas that follow the last part (every delta after the
 * snapshot's version, which the watcher sends next): residency changes carry the new tier bits
 * (absolute, so applying one over a state that already has it changes nothing), and a stream
 * reset replaces a stream's whole residency. A (stream, key) changed during the build is set by
 * the last delta that changed it; one that did not change was read as it is. Stream removals,
 * resets and state changes during the build are deltas too; a stream removed since the start is
 * no longer read (its slot may already belong to another stream). Ids allocated after the start
 * name keys pinned after it, whose residency the deltas carry, so the cursor stops at the start's
 * id bound and the build ends however fast the view grows.
 *
 * A build is shared by every watcher that joins before its first part is dropped; a part is
 * dropped once every watcher took it, and at most PARTS_AHEAD parts are built ahead of the
 * watcher furthest along, so memory follows the watchers, not the view.
 */
import { MAX_SLOTS, SET_WORDS } from '../../shared/index/holder-sets.js';
import type { GroupSlot } from '../../shared/index/residency-groups.js';
import type { KeyTierSink, ResidencyIndex } from '../../shared/index/residency-index.js';
import type { WireViewInstance, WireViewStream } from '../../shared/view/view-wire.js';
import { ResidencyBuffer } from './residency-buffer.js';
import type { SnapshotFeed, SnapshotReader } from './view-watcher.js';
import type { WireViewUpdate } from './view-wire.js';

/** architecture.md: the largest view-stream message. */
export const MAX_VIEW_MESSAGE_BYTES = 4 * 1024 * 1024;
/** Key ids one slice visits at most: a few ms of integer work. */
export const SLICE_KEY_IDS = 8192;
/** (stream, key) entries one slice reads at most (a key may have up to 128 holders). */
const SLICE_ENTRIES = 16_384;
/** Bytes per key in a message: 16 key bytes and 1 tier byte. */
const BYTES_PER_KEY = 17;
/** Room kept per stream entry for its identity, state and field framing. */
const STREAM_ENTRY_BYTES = 1024;
/** Room kept per message for the envelope (epoch, version, framing). */
const MESSAGE_SLACK_BYTES = 16 * 1024;
/** A view read at once (one ViewSnapshot) has at most this many entries and key ids to visit; a larger one goes in parts, read in slices, even below maxBytes. */
const WHOLE_MAX_ENTRIES = 4 * SLICE_ENTRIES;
const WHOLE_MAX_KEY_IDS = 4 * SLICE_KEY_IDS;
/** Parts built ahead of the watcher furthest along. */
const PARTS_AHEAD = 2;

export interface SnapshotHead {
  readonly epoch: string;
  readonly version: number;
  readonly sent_at_ms: number;
}

export type Encode = (update: WireViewUpdate) => Buffer;

/** One stream of a snapshot: its state at the start and the group slot its residency is read from. */
export interface SnapshotStream {
  /** Identity and state, without keys/tiers. */
  readonly state: WireViewStream;
  /** The served slot; null when nothing is served (no residency). */
  readonly residency: GroupSlot | null;
  /** The view's record of the stream: once removed, its slot is no longer read. */
  readonly owner: { readonly removed: boolean };
}

export interface SnapshotBuildOptions {
  readonly encode: Encode;
  readonly maxBytes: number;
  /** Key ids per slice (the publisher's; SLICE_KEY_IDS unless a test sets it). */
  readonly sliceKeyIds: number;
  /** Counted into by every build (the publisher's stats). */
  readonly counters: SliceCounters;
}

/** What builds cost, counted as they run (tests and benchmarks assert the slicing structurally, never by time). */
export interface SliceCounters {
  slices: number;
  /** Most key ids one slice visited. */
  maxSliceKeyIds: number;
  /** Most (stream, key) entries one slice read. */
  maxSliceEntries: number;
}

/** One group read by the build: the snapshot's slots in it and which stream each one is. */
interface GroupCursor {
  readonly index: ResidencyIndex;
  readonly slots: Uint32Array;
  /** slot → position in `streams`, −1 for none. */
  readonly toStream: Int32Array;
  /** The key id bound at the start: the cursor stops there. */
  readonly endId: number;
}

/** A view small enough for one message: the same ViewSnapshot for every watcher of its version. */
export class OneMessageFeed implements SnapshotFeed {
  private taken = false;
  constructor(private readonly bytes: Buffer) {}
  take(): Buffer {
    this.taken = true;
    return this.bytes;
  }
  doneFor(): boolean {
    return this.taken;
  }
  leave(): void {}
}

/**
 * The snapshot of `streams` and `instances` at `head.version`: one ViewSnapshot built now when the
 * view is small (fits one message and a few slices' worth of reading; returns its bytes),
 * otherwise a SnapshotBuild in parts.
 */
export function startSnapshot(head: SnapshotHead, instances: WireViewInstance[], streams: readonly SnapshotStream[], opts: SnapshotBuildOptions): Buffer | SnapshotBuild {
  const instanceBytes = opts.encode({ ...head, snapshot: { instances, streams: [] } }).length;
  // A key on both tiers counts in both: an upper bound of the entries held.
  let entries = 0;
  let keyIds = 0;
  const seen = new Set<ResidencyIndex>();
  for (const s of streams) {
    if (s.residency === null) continue;
    const { group, slot } = s.residency;
    entries += group.deviceBlocks(slot) + group.hostBlocks(slot);
    if (!seen.has(group)) keyIds += group.keyIdBound;
    seen.add(group);
  }
  const bytes = instanceBytes + MESSAGE_SLACK_BYTES + streams.length * STREAM_ENTRY_BYTES + entries * BYTES_PER_KEY;
  if (bytes <= opts.maxBytes && entries <= WHOLE_MAX_ENTRIES && keyIds <= WHOLE_MAX_KEY_IDS) {
    // A few slices' worth: read at once, so exact at the version.
    const whole = new SnapshotBuild(head, streams, opts, Number.POSITIVE_INFINITY);
    whole.readAll();
    return opts.encode({ ...head, snapshot: { instances, streams: whole.takeRuns(true) } });
  }
  const build = new SnapshotBuild(head, streams, opts, Math.max(1, Math.floor((opts.maxBytes - MESSAGE_SLACK_BYTES - streams.length * STREAM_ENTRY_BYTES) / BYTES_PER_KEY)));
  build.firstPart(instances);
  return build;
}

export class SnapshotBuild implements KeyTierSink, SnapshotFeed {
  private readonly encode: Encode;
  private readonly sliceKeyIds: number;
  private readonly groups: GroupCursor[] = [];
  /** Keys read for each stream since the last part. */
  private readonly runs: ResidencyBuffer[];
  private toStream: Int32Array = new Int32Array(0);
  private group = 0;
  private nextId = 0;
  private partEntries = 0;
  /** Encoded parts not yet taken by every reader; parts[0] is part number `base`. */
  private readonly parts: Buffer[] = [];
  private base = 0;
  private produced = 0;
  private done = false;
  private cancelled = false;
  private scheduled = false;
  private readonly readers = new Map<SnapshotReader, number>();
  private readonly counters: SliceCounters;

  constructor(
    private readonly head: SnapshotHead,
    private readonly streams: readonly SnapshotStream[],
    opts: SnapshotBuildOptions,
    /** Entries per part. */
    private readonly partCapacity: number,
  ) {
    this.encode = opts.encode;
    this.sliceKeyIds = opts.sliceKeyIds;
    this.counters = opts.counters;
    this.runs = streams.map(() => new ResidencyBuffer());
    const byIndex = new Map<ResidencyIndex, GroupCursor>();
    streams.forEach((s, i) => {
      if (s.residency === null) return;
      const { group, slot } = s.residency;
      let g = byIndex.get(group);
      if (g === undefined) {
        g = { index: group, slots: new Uint32Array(SET_WORDS), toStream: new Int32Array(MAX_SLOTS).fill(-1), endId: group.keyIdBound };
        byIndex.set(group, g);
        this.groups.push(g);
      }
      g.slots[slot >>> 5] |= 1 << (slot & 31);
      g.toStream[slot] = i;
    });
  }

  /** The version the snapshot is of (its parts all carry it). */
  get version(): number {
    return this.head.version;
  }

  /** A watcher may still join: no part was dropped yet and the build goes on. */
  get joinable(): boolean {
    return this.base === 0 && !this.cancelled;
  }

  // ---- readers (watchers) -------------------------------------------------------------------

  join(reader: SnapshotReader): void {
    this.readers.set(reader, 0);
  }

  take(reader: SnapshotReader): Buffer | null {
    const next = this.readers.get(reader);
    if (next === undefined) return null;
    if (next - this.base >= this.parts.length) {
      this.schedule();
      return null;
    }
    const bytes = this.parts[next - this.base]!;
    this.readers.set(reader, next + 1);
    this.dropTaken();
    this.schedule();
    return bytes;
  }

  doneFor(reader: SnapshotReader): boolean {
    return this.done && this.readers.get(reader) === this.produced;
  }

  leave(reader: SnapshotReader): void {
    if (!this.readers.delete(reader)) return;
    if (this.readers.size === 0) {
      // Nobody waits for it: stop reading and let go of the parts.
      this.cancelled = true;
      this.parts.length = 0;
      return;
    }
    this.dropTaken();
  }

  private dropTaken(): void {
    let min = Number.POSITIVE_INFINITY;
    for (const n of this.readers.values()) if (n < min) min = n;
    while (this.base < min && this.parts.length > 0) {
      this.parts.shift();
      this.base++;
    }
  }

  /** Another slice on a later turn, unless enough parts wait or the build is over. */
  private schedule(): void {
    if (this.scheduled || this.done || this.cancelled) return;
    let furthest = 0;
    for (const n of this.readers.values()) if (n > furthest) furthest = n;
    if (this.produced - furthest >= PARTS_AHEAD) return;
    this.scheduled = true;
    setImmediate(this.runSlice);
  }

  private readonly runSlice = (): void => {
    this.scheduled = false;
    if (this.cancelled) return;
    const before = this.produced;
    this.readSlice();
    if (this.produced !== before) for (const r of this.readers.keys()) r.partReady();
    this.schedule();
  };

  // ---- reading ------------------------------------------------------------------------------

  /** Part 0: the instances and every stream's identity and state, no residency. */
  firstPart(instances: WireViewInstance[]): void {
    this.emit({ ...this.head, snapshot_chunk: { index: 0, last: false, instances, streams: this.streams.map((s) => s.state) } });
  }

  /** Reads everything in one go (a view that fits one message). */
  readAll(): void {
    this.readSome(Number.POSITIVE_INFINITY, Number.POSITIVE_INFINITY);
  }

  /**
   * One slice: up to sliceKeyIds key ids and SLICE_ENTRIES entries; or, once a part is full or
   * everything is read, the encoding of that part alone (a turn of its own).
   */
  private readSlice(): void {
    this.counters.slices++;
    const end = this.group >= this.groups.length;
    if (end || this.partEntries >= this.partCapacity) {
      this.emit({ ...this.head, snapshot_chunk: { index: this.produced, last: end, instances: [], streams: this.takeRuns(false) } });
      if (end) this.finish();
      return;
    }
    this.dropRemoved();
    const entries = this.partEntries;
    const visited = this.readSome(this.sliceKeyIds, entries + SLICE_ENTRIES);
    this.counters.maxSliceKeyIds = Math.max(this.counters.maxSliceKeyIds, visited);
    this.counters.maxSliceEntries = Math.max(this.counters.maxSliceEntries, this.partEntries - entries);
  }

  /**
   * Visits up to `budget` key ids, stopping early once the part holds `stopAt` entries (or is
   * full). Returns the ids visited.
   */
  private readSome(budget: number, stopAt: number): number {
    const limit = Math.min(stopAt, this.partCapacity);
    let visited = 0;
    while (visited < budget && this.group < this.groups.length && this.partEntries < limit) {
      const g = this.groups[this.group]!;
      if (this.nextId >= g.endId) {
        this.group++;
        this.nextId = 0;
        continue;
      }
      const to = Math.min(g.endId, this.nextId + (budget - visited));
      this.toStream = g.toStream;
      const from = this.nextId;
      this.nextId = g.index.visitKeyIds(from, to, g.slots, this, limit - this.partEntries);
      visited += this.nextId - from;
    }
    return visited;
  }

  /** KeyTierSink: one (stream, key) of the current group. */
  keyTiers(slot: number, words: Uint32Array, offset: number, tiers: number): void {
    this.runs[this.toStream[slot]!]!.push(words, offset, tiers);
    this.partEntries++;
  }

  /** A stream removed since the start: its slot is no longer read (another stream may get it). */
  private dropRemoved(): void {
    for (const g of this.groups) {
      for (let slot = 0; slot < MAX_SLOTS; slot++) {
        const i = g.toStream[slot]!;
        if (i < 0 || !this.streams[i]!.owner.removed) continue;
        g.slots[slot >>> 5] &= ~(1 << (slot & 31));
        g.toStream[slot] = -1;
      }
    }
  }

  /**
   * The streams' runs read since the last part, as messages of their state and keys (copied by the
   * encoder right after); `all` also lists the streams with no run (a whole snapshot lists every one).
   */
  takeRuns(all: boolean): WireViewStream[] {
    const out: WireViewStream[] = [];
    for (let i = 0; i < this.streams.length; i++) {
      const run = this.runs[i]!;
      if (run.length === 0 && !all) continue;
      out.push({ ...this.streams[i]!.state, keys: run.keys(), tiers: run.tiers() });
    }
    return out;
  }

  private emit(update: WireViewUpdate): void {
    this.parts.push(this.encode(update));
    this.produced++;
    for (const run of this.runs) run.clear(0);
    this.partEntries = 0;
  }

  private finish(): void {
    this.done = true;
    this.groups.length = 0;
  }
}
