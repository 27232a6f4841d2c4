/**
 * The directory side of the versioned view stream (architecture.md "The view stream"): the current
 * view (instances, streams, residency per stream), batched into ordered deltas, a bounded change
 * log, and the watchers (routers) it is streamed to.
 *
 *   StreamSubscriber ─▶ StreamObserver (one per stream, composed by the Directory):
 *     residencyChanged ─────────────────▶ per-stream ResidencyBuffer ─┐
 *     batchApplied / stateChanged ──────▶ stream upserts / resets ────┼─▶ flush: ViewDelta v+1 ──▶ ChangeLog
 *     indexReplaced (exported residency) ▶ stream reset                 │        (encoded once)      │
 *   instance table changes ─────────────▶ instance upserts/removals ──┘          watchers ◀─ pump ┘
 *
 * Everything a delta says about a stream was pushed by its subscriber: the flush reads nothing
 * back from a stream, and neither does a snapshot. A snapshot (a router joining) reads each
 * served stream's residency from its slot in the shared group index (the `ServedIndex` its last
 * `indexReplaced` handed over; the directory's query view, which mirrors the served index key
 * for key), in bounded slices (snapshot-build.ts): keeping a copy of every stream's residency
 * here instead would cost memory in proportion to the whole fleet's index.
 *
 * - `epoch`: a random id per publisher (one directory process lifetime); `version` +1 per delta.
 * - Deltas are cut by time (at the end of the turn of the first pending change after a quiet
 *   spell, else `flushIntervalMs` after the previous delta: at most one per interval) and by size
 *   (`maxDeltaKeyChanges` pending key changes, checked after each applied batch, so a delta never
 *   holds part of an engine batch). A change of in-flight shares pulls the cut forward to
 *   `inflightFlushMs` after the previous delta (at once after a quiet spell): a router's decision
 *   reaches the other replicas in a few ms instead of up to 20, which is the window in which
 *   they would send a burst to the same instance.
 * - A stream reset (recovery swap, restore, reconciliation, any state change) replaces the stream's
 *   state and residency atomically; the incremental changes pending before it are dropped, and
 *   those after it (batches applied before the flush) are merged into the exported residency it
 *   carries, so the delta holds the reset alone.
 * - A snapshot starts right after a flush, so instances and stream states are exactly the view at
 *   `version`; a small view (one message) is read at once, so it is exact too. A larger one is
 *   read over many turns while deltas go on: its parts are fuzzy, and the deltas after `version`,
 *   sent right behind the last part, make the router's view exact (snapshot-build.ts says why).
 * - Watchers that ask at the same version share one build (until its first part is dropped).
 *
 * Decisions where the spec is silent:
 * - A new stream is announced as a stream reset (state plus its empty residency), so a router
 *   creates it through the one message that replaces everything.
 * - Any state change is a reset: leaving SYNCHRONIZED empties the residency (kv-events §7.2: no
 *   stale credit), entering it is followed by the new index anyway.
 * - A stream or instance added and removed between two deltas is never announced.
 * - Replayed log entries carry their original `sent_at_ms`.
 * - A watcher whose next needed delta left the log is ended with `lagging` (ABORTED at the gRPC
 *   edge); heartbeats go only to caught-up, unblocked watchers idle for `heartbeatIntervalMs`.
 */
import { randomBytes } from 'node:crypto';
import { DEFAULT_ENGINE_KIND } from '../../shared/config/engine-kind.js';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { OpenedStream, StreamTracker } from '../directory.js';
import type { InstanceChange, InstanceView } from '../discovery/instance-table.js';
import type { InflightSource } from '../inflight/inflight-service.js';
import type { StreamState } from '../subscription/stream-state.js';
import type { ExportedResidency, ServedIndex, StreamListener } from '../subscription/stream-observer.js';
import type { StreamConfig } from '../subscription/stream-config.js';
import { ChangeLog } from './change-log.js';
import { ResidencyBuffer, mergeResidency } from './residency-buffer.js';
import { MAX_VIEW_MESSAGE_BYTES, OneMessageFeed, SLICE_KEY_IDS, SnapshotBuild, startSnapshot, type SliceCounters, type SnapshotStream } from './snapshot-build.js';
import { protoViewUpdateEncoder, type ViewUpdateEncoder } from './view-update-encoder.js';
import { ViewWatcher, type SnapshotFeed, type ViewSink } from './view-watcher.js';
import type { WireViewDelta, WireViewInstance, WireViewStream } from '../../shared/view/view-wire.js';
import { toWireViewInstance } from './view-wire.js';
import { FlushTimer } from '../../shared/timing/flush-timer.js';

/**
 * A stream as the view shows it: identity, key space, engine kind (engines.md §1; absent = xllm)
 * and, for discovery streams, the registration (absent for static ones).
 */
export type ViewStreamIdentity = Pick<StreamConfig, 'instanceName' | 'dpRank' | 'blockSize' | 'hashSeed' | 'incarnationId' | 'generation' | 'engineKind'>;

/** The instance table as discovery exposes it (`DiscoveryService` satisfies it). */
export interface InstanceTableSource {
  instances(): readonly InstanceView[];
  /** Every change, in order; returns the unsubscribe. */
  onChange(listener: (change: InstanceChange) => void): () => void;
}

/** The resume point a router asks for (`WatchViewRequest`); epoch '' = fresh watch. */
export interface WatchRequest {
  readonly routerId: string;
  readonly epoch: string;
  readonly version: number;
}

export interface ViewPublisherOptions {
  /** Least time between two deltas cut by time (default 10 ms); after a quieter spell a change goes out at the end of its turn. */
  readonly flushIntervalMs?: number;
  /**
   * A change of in-flight shares is published this long after the previous delta at the earliest,
   * at once after a quieter spell (default 1 ms): replicas see each other's decisions before the
   * next burst, and deltas stay bounded at 1/inflightFlushMs per second under load.
   */
  readonly inflightFlushMs?: number;
  /** A delta is cut once this many key changes are pending (default 65536). */
  readonly maxDeltaKeyChanges?: number;
  /** Change log bound in deltas (default 4096). */
  readonly logMaxEntries?: number;
  /** Change log bound in encoded bytes (default 64 MiB). */
  readonly logMaxBytes?: number;
  /** Idle watchers get a heartbeat after this long; must stay ≤ 250 so the gap stays < 500 ms. */
  readonly heartbeatIntervalMs?: number;
  /** Largest snapshot message (default 4 MiB, architecture.md); larger views go in parts. */
  readonly maxMessageBytes?: number;
  /** Key ids a snapshot slice reads per event-loop turn (default SLICE_KEY_IDS). */
  readonly snapshotSliceKeyIds?: number;
  /** Fixed epoch (tests); default 16 random hex digits. */
  readonly epoch?: string;
  readonly encode?: ViewUpdateEncoder;
  readonly nowMs?: () => number;
  readonly logger?: Logger;
}

/** Metrics hooks: read by the metrics edge, never written there. */
export interface ViewPublisherStats {
  readonly epoch: string;
  readonly version: number;
  readonly watchers: number;
  readonly bytesSent: number;
  readonly deltasPublished: number;
  readonly keyChangesPublished: number;
  readonly snapshotsSent: number;
  /** Snapshots built in parts, the slices they took, the most key ids and entries one slice read. */
  readonly snapshotBuilds: number;
  readonly snapshotSlices: number;
  readonly snapshotSliceMaxKeyIds: number;
  readonly snapshotSliceMaxEntries: number;
  readonly resumes: number;
  readonly laggingEnded: number;
  readonly logEntries: number;
  readonly logBytes: number;
}

/** The publisher's part of one stream's observer, with the stream's id. */
export interface ViewStreamListener extends StreamListener {
  readonly streamId: number;
}

interface StreamEntry {
  readonly id: number;
  readonly identity: ViewStreamIdentity;
  /** False until the stream told its first state (it enters the view then). */
  known: boolean;
  synchronized: boolean;
  sequence: bigint;
  error: string;
  deviceBlocks: number;
  hostBlocks: number;
  /** The index served (a snapshot reads its group slot); null outside SYNCHRONIZED. */
  served: ServedIndex | null;
  /** Incremental changes since the last delta, or, with `reset`, since `resetResidency`. */
  readonly changes: ResidencyBuffer;
  /** Replace state and residency in the next delta. */
  reset: boolean;
  /** The residency the pending reset replaces the stream's with (before `changes`). */
  resetResidency: ExportedResidency;
  /** State (sequence, counts, error) changed. */
  upsert: boolean;
  removed: boolean;
  /** Part of a published version (so its removal must be published). */
  announced: boolean;
  /** In `dirtyStreams`. */
  dirty: boolean;
}

const EMPTY = new Uint8Array(0);
const NO_RESIDENCY: ExportedResidency = Object.freeze({ keys: EMPTY, tiers: EMPTY });
const DEFAULTS = {
  flushIntervalMs: 10,
  inflightFlushMs: 1,
  maxDeltaKeyChanges: 65536,
  logMaxEntries: 4096,
  logMaxBytes: 64 * 1024 * 1024,
  heartbeatIntervalMs: 200,
};

export class ViewPublisher implements StreamTracker {
  readonly epoch: string;
  private readonly flushIntervalMs: number;
  private readonly inflightFlushMs: number;
  private readonly maxDeltaKeyChanges: number;
  private readonly maxMessageBytes: number;
  private readonly heartbeatIntervalMs: number;
  private readonly encode: ViewUpdateEncoder;
  private readonly nowMs: () => number;
  private readonly log: Logger;
  private readonly changeLog: ChangeLog;

  private currentVersion = 0;
  private nextStreamId = 1;
  private readonly streams = new Map<number, StreamEntry>();
  private readonly dirtyStreams: StreamEntry[] = [];
  private removedStreamIds: number[] = [];
  private pendingKeyChanges = 0;
  private readonly instances = new Map<string, InstanceView>();
  /** name → new row, or null for a removal. */
  private readonly pendingInstances = new Map<string, InstanceView | null>();
  /** Names present in the latest published version (a removal is sent only for these). */
  private readonly publishedInstances = new Set<string>();
  private instanceSource: InstanceTableSource | null = null;
  private unsubscribeInstances: (() => void) | null = null;
  private inflight: InflightSource | null = null;
  private unsubscribeInflight: (() => void) | null = null;

  private readonly watchers = new Set<ViewWatcher>();
  /** The one-message snapshot of `version` (shared by every watcher asking at it). */
  private snapshotCache: { version: number; bytes: Buffer } | null = null;
  /** The latest snapshot built in parts (joined by watchers asking at its version). */
  private building: SnapshotBuild | null = null;
  private readonly sliceKeyIds: number;
  private readonly sliceCounters: SliceCounters = { slices: 0, maxSliceKeyIds: 0, maxSliceEntries: 0 };
  private readonly flushTimer = new FlushTimer(() => this.flush());
  private readonly heartbeatTimer: NodeJS.Timeout;
  private closed = false;

  private bytesSent = 0;
  private deltasPublished = 0;
  private keyChangesPublished = 0;
  private snapshotsSent = 0;
  private snapshotBuilds = 0;
  private resumes = 0;
  private laggingEnded = 0;

  constructor(opts: ViewPublisherOptions = {}) {
    this.epoch = opts.epoch ?? randomBytes(8).toString('hex');
    this.flushIntervalMs = opts.flushIntervalMs ?? DEFAULTS.flushIntervalMs;
    this.inflightFlushMs = opts.inflightFlushMs ?? DEFAULTS.inflightFlushMs;
    this.maxDeltaKeyChanges = opts.maxDeltaKeyChanges ?? DEFAULTS.maxDeltaKeyChanges;
    this.maxMessageBytes = opts.maxMessageBytes ?? MAX_VIEW_MESSAGE_BYTES;
    this.sliceKeyIds = opts.snapshotSliceKeyIds ?? SLICE_KEY_IDS;
    this.heartbeatIntervalMs = opts.heartbeatIntervalMs ?? DEFAULTS.heartbeatIntervalMs;
    if (!(this.heartbeatIntervalMs > 0 && this.heartbeatIntervalMs <= 250)) {
      throw new RangeError(`heartbeatIntervalMs must be in (0, 250] (a heartbeat at least every 500 ms), got ${this.heartbeatIntervalMs}`);
    }
    this.encode = opts.encode ?? protoViewUpdateEncoder();
    this.nowMs = opts.nowMs ?? Date.now;
    this.log = opts.logger ?? silentLogger;
    this.changeLog = new ChangeLog({ maxEntries: opts.logMaxEntries ?? DEFAULTS.logMaxEntries, maxBytes: opts.logMaxBytes ?? DEFAULTS.logMaxBytes });
    this.heartbeatTimer = setInterval(() => this.heartbeat(), this.heartbeatIntervalMs);
    this.heartbeatTimer.unref();
  }

  /** The version of the latest delta (0 before the first). */
  get version(): number {
    return this.currentVersion;
  }

  get watcherCount(): number {
    return this.watchers.size;
  }

  stats(): ViewPublisherStats {
    return {
      epoch: this.epoch,
      version: this.currentVersion,
      watchers: this.watchers.size,
      bytesSent: this.bytesSent,
      deltasPublished: this.deltasPublished,
      keyChangesPublished: this.keyChangesPublished,
      snapshotsSent: this.snapshotsSent,
      snapshotBuilds: this.snapshotBuilds,
      snapshotSlices: this.sliceCounters.slices,
      snapshotSliceMaxKeyIds: this.sliceCounters.maxSliceKeyIds,
      snapshotSliceMaxEntries: this.sliceCounters.maxSliceEntries,
      resumes: this.resumes,
      laggingEnded: this.laggingEnded,
      logEntries: this.changeLog.size,
      logBytes: this.changeLog.byteSize,
    };
  }

  // ---- streams ------------------------------------------------------------------------------

  /**
   * A stream opened (the Directory tells every tracker): it gets its `stream_id` (unique within the
   * epoch) and enters the view with the first state it tells; its close takes it out. One
   * listener object per stream, no closure per event.
   */
  streamOpened({ config }: Pick<OpenedStream, 'config'>): ViewStreamListener {
    return this.addStream(config);
  }

  /** `streamOpened` for a stream known by its identity alone (tests, benchmarks). */
  addStream(identity: ViewStreamIdentity): ViewStreamListener {
    const entry: StreamEntry = {
      id: this.nextStreamId++,
      identity,
      known: false,
      synchronized: false,
      sequence: -1n,
      error: '',
      deviceBlocks: 0,
      hostBlocks: 0,
      served: null,
      changes: new ResidencyBuffer(),
      reset: false,
      resetResidency: NO_RESIDENCY,
      upsert: false,
      removed: false,
      announced: false,
      dirty: false,
    };
    return {
      streamId: entry.id,
      // Hot path: one call per residency change of the served index.
      residencyChanged: (words, offset, _oldTiers, newTiers) => {
        if (entry.removed || !entry.known) return;
        entry.changes.push(words, offset, newTiers);
        // Changes after a pending reset are merged into it: they are not delta key changes.
        if (!entry.reset) this.pendingKeyChanges++;
        if (!entry.dirty) this.markDirty(entry);
      },
      batchApplied: (sequence, deviceBlocks, hostBlocks) => {
        if (entry.removed || !entry.known) return;
        entry.sequence = sequence;
        entry.deviceBlocks = deviceBlocks;
        entry.hostBlocks = hostBlocks;
        entry.upsert = true;
        if (!entry.dirty) this.markDirty(entry);
        // Size cut at a batch boundary, so a delta never holds half of an engine batch.
        if (this.pendingKeyChanges >= this.maxDeltaKeyChanges) this.flush();
      },
      indexReplaced: (sequence, served, residency) => {
        if (entry.removed || !entry.known) return;
        entry.sequence = sequence;
        entry.served = served;
        entry.deviceBlocks = served.deviceBlocks;
        entry.hostBlocks = served.hostBlocks;
        this.markReset(entry, residency);
        if (this.pendingKeyChanges >= this.maxDeltaKeyChanges) this.flush();
      },
      stateChanged: (state, error, sequence) => this.onState(entry, state, error, sequence),
      streamClosed: () => this.removeEntry(entry),
    };
  }

  private onState(entry: StreamEntry, state: StreamState, error: string, sequence: bigint): void {
    if (entry.removed || this.closed) return;
    if (!entry.known) {
      entry.known = true;
      this.streams.set(entry.id, entry);
    }
    entry.synchronized = state === 'SYNCHRONIZED';
    entry.error = error;
    entry.sequence = sequence;
    // Entering SYNCHRONIZED, the index follows at once (indexReplaced); until then nothing is served.
    entry.served = null;
    entry.deviceBlocks = 0;
    entry.hostBlocks = 0;
    this.markReset(entry, NO_RESIDENCY);
  }

  private removeEntry(entry: StreamEntry): void {
    if (entry.removed) return;
    entry.removed = true;
    entry.served = null;
    this.streams.delete(entry.id);
    if (!entry.reset) this.pendingKeyChanges -= entry.changes.length;
    entry.changes.clear(0);
    if (entry.announced) {
      this.removedStreamIds.push(entry.id);
      this.scheduleFlush();
    }
  }

  /** The stream's state and residency are replaced by `residency` in the next delta; pending changes are dropped. */
  private markReset(entry: StreamEntry, residency: ExportedResidency): void {
    if (!entry.reset) this.pendingKeyChanges -= entry.changes.length;
    entry.changes.clear(this.maxDeltaKeyChanges);
    entry.reset = true;
    entry.resetResidency = residency;
    if (!entry.dirty) this.markDirty(entry);
  }

  private markDirty(entry: StreamEntry): void {
    entry.dirty = true;
    this.dirtyStreams.push(entry);
    this.scheduleFlush();
  }

  // ---- instances ----------------------------------------------------------------------------

  /**
   * Hooks the instance table (discovery): its rows enter the view now, then every change
   * (registrations, replacements, states, loads, removals) becomes an instance upsert or removal.
   * Without it the view has no instances (static streams only).
   */
  attachInstanceTable(source: InstanceTableSource): void {
    if (this.instanceSource !== null) throw new Error('view publisher: an instance table is already attached');
    this.instanceSource = source;
    for (const v of source.instances()) {
      this.instances.set(v.name, v);
      this.pendingInstances.set(v.name, v);
    }
    this.unsubscribeInstances = source.onChange((c) => this.onInstanceChange(c));
    if (this.pendingInstances.size > 0) this.scheduleFlush();
  }

  private onInstanceChange(c: InstanceChange): void {
    const name = c.instance.name;
    if (c.kind === 'remove') {
      this.instances.delete(name);
      this.pendingInstances.set(name, null);
    } else {
      this.instances.set(name, c.instance);
      this.pendingInstances.set(name, c.instance);
    }
    this.scheduleFlush();
  }

  /**
   * Hooks in-flight load (routing.md "In-flight load"): a change of an instance's shares becomes
   * an upsert of that instance, which carries its shares as of the delta (ViewInstance.inflight).
   */
  attachInflight(source: InflightSource): void {
    if (this.inflight !== null) throw new Error('view publisher: an in-flight source is already attached');
    this.inflight = source;
    this.unsubscribeInflight = source.onChange((name) => {
      const v = this.instances.get(name);
      if (v === undefined) return;
      this.pendingInstances.set(name, v);
      if (!this.closed) this.flushTimer.throttled(this.inflightFlushMs);
    });
  }

  /** The view's message for one instance row, with its in-flight shares. */
  private wireInstance(v: InstanceView): WireViewInstance {
    return toWireViewInstance(v, null, this.inflight?.sharesOf(v.name) ?? null);
  }

  // ---- deltas -------------------------------------------------------------------------------

  private scheduleFlush(): void {
    if (!this.closed) this.flushTimer.throttled(this.flushIntervalMs);
  }

  /**
   * Publishes everything pending as the next version (nothing when nothing is pending): builds the
   * delta, encodes it once, appends it to the change log and pumps every watcher. Synchronous, so
   * the delta is one consistent cut of the view.
   */
  flush(): void {
    this.flushTimer.ranNow();
    if (this.closed) return;
    if (this.pendingInstances.size === 0 && this.removedStreamIds.length === 0 && this.dirtyStreams.length === 0) return;
    const delta: WireViewDelta = {
      instance_removals: [],
      instance_upserts: [],
      stream_removals: this.removedStreamIds,
      stream_upserts: [],
      stream_resets: [],
      residency: [],
    };
    this.removedStreamIds = [];
    for (const [name, v] of this.pendingInstances) {
      if (v !== null) {
        delta.instance_upserts.push(this.wireInstance(v));
        this.publishedInstances.add(name);
      } else if (this.publishedInstances.delete(name)) {
        delta.instance_removals.push(name);
      }
    }
    this.pendingInstances.clear();
    const dirty = this.dirtyStreams;
    let keyChanges = 0;
    for (let i = 0; i < dirty.length; i++) {
      const e = dirty[i]!;
      if (e.removed || !e.known) continue;
      if (e.reset) {
        const r = e.changes.length === 0 ? e.resetResidency : mergeResidency(e.resetResidency, e.changes);
        delta.stream_resets.push(this.wireStream(e, r));
      } else {
        if (e.upsert) delta.stream_upserts.push(this.wireStream(e, null));
        if (e.changes.length > 0) {
          keyChanges += e.changes.length;
          // Views into the stream's buffer: encoded below, before the buffer is reused.
          delta.residency.push({ stream_id: e.id, keys: e.changes.keys(), tiers: e.changes.tiers() });
        }
      }
      e.announced = true;
    }
    const now = this.nowMs();
    const version = this.currentVersion + 1;
    const bytes = this.encode({ epoch: this.epoch, version, sent_at_ms: now, delta });
    for (let i = 0; i < dirty.length; i++) {
      const e = dirty[i]!;
      e.dirty = false;
      e.reset = false;
      e.resetResidency = NO_RESIDENCY;
      e.upsert = false;
      e.changes.clear(this.maxDeltaKeyChanges);
    }
    dirty.length = 0;
    this.pendingKeyChanges = 0;
    this.currentVersion = version;
    this.snapshotCache = null;
    this.deltasPublished++;
    this.keyChangesPublished += keyChanges;
    this.changeLog.append(version, bytes);
    const oldest = this.changeLog.oldestVersion;
    for (const w of this.watchers) {
      if (w.nextVersion < oldest || !w.pump(this.changeLog, now)) this.endLagging(w);
    }
  }

  /** The stream's message from what it last told; `residency` null: state only (an upsert). */
  private wireStream(e: StreamEntry, residency: ExportedResidency | null): WireViewStream {
    const id = e.identity;
    const s: WireViewStream = {
      stream_id: e.id,
      instance_name: id.instanceName,
      dp_rank: id.dpRank,
      block_size: id.blockSize,
      hash_seed: id.hashSeed.toString(),
      incarnation_id: id.incarnationId ?? '',
      generation: id.generation ?? 0,
      synchronized: e.synchronized,
      sequence: e.sequence.toString(),
      error: e.error,
      device_blocks: e.deviceBlocks,
      host_blocks: e.hostBlocks,
      // engines.md §1: routers and the status page know each stream's kind from the view.
      engine_kind: id.engineKind ?? DEFAULT_ENGINE_KIND,
    };
    if (residency !== null) {
      s.keys = residency.keys;
      s.tiers = residency.tiers;
    }
    return s;
  }

  // ---- watchers -----------------------------------------------------------------------------

  /**
   * A router starts watching. Pending changes are published first, then: a resumable
   * (epoch, version) gets the log entries after it; anything else one full snapshot at the
   * current version. Live deltas follow either way.
   */
  watch(req: WatchRequest, sink: ViewSink): ViewWatcher {
    if (this.closed) {
      sink.end('closing', 'view publisher is closed');
      const w = new ViewWatcher(req.routerId, sink, this.currentVersion + 1, this.nowMs(), () => undefined);
      w.closed = true;
      return w;
    }
    this.flush();
    const now = this.nowMs();
    const resumable = req.epoch === this.epoch && Number.isSafeInteger(req.version) && this.changeLog.canResumeFrom(req.version);
    const w = new ViewWatcher(req.routerId, sink, resumable ? req.version + 1 : this.currentVersion + 1, now, (n) => {
      this.bytesSent += n;
    });
    w.onDrained = () => {
      if (!w.pump(this.changeLog, this.nowMs())) this.endLagging(w);
    };
    this.watchers.add(w);
    if (resumable) {
      this.resumes++;
    } else {
      this.snapshotsSent++;
      // One message, or parts ≤ 4 MiB sent back to back as they are built and the transport
      // takes them (the router swaps on the last one); deltas after the snapshot follow the last part.
      w.queueSnapshot(this.snapshotFeed(w, now));
    }
    this.log.info(
      { router_id: req.routerId, epoch: req.epoch, asked_version: req.version, version: this.currentVersion, start: resumable ? 'resume' : 'snapshot' },
      'view watcher joined',
    );
    if (!w.pump(this.changeLog, now)) this.endLagging(w);
    return w;
  }

  /** The watcher's stream ended on the router's side (cancelled, closed). */
  unwatch(w: ViewWatcher): void {
    if (!this.watchers.delete(w)) return;
    w.close();
    this.log.info({ router_id: w.routerId, sent_bytes: w.bytesSent, next_version: w.nextVersion }, 'view watcher left');
  }

  private endLagging(w: ViewWatcher): void {
    this.watchers.delete(w);
    this.laggingEnded++;
    const detail = `view_lagging: router ${w.routerId} needs version ${w.nextVersion}, the change log starts at ${this.changeLog.oldestVersion}; re-watch for a snapshot`;
    this.log.warn({ router_id: w.routerId, next_version: w.nextVersion, oldest: this.changeLog.oldestVersion }, 'view watcher fell behind the change log; ended');
    w.end('lagging', detail);
  }

  /**
   * The snapshot at the current version for `w`: the one-message snapshot of this version, or the
   * build in parts of this version while it can still be joined, or a new one.
   */
  private snapshotFeed(w: ViewWatcher, now: number): SnapshotFeed {
    const cached = this.snapshotCache;
    if (cached !== null && cached.version === this.currentVersion) return new OneMessageFeed(cached.bytes);
    const running = this.building;
    if (running !== null && running.version === this.currentVersion && running.joinable) {
      running.join(w);
      return running;
    }
    const instances: WireViewInstance[] = [];
    const names = [...this.instances.keys()].sort();
    for (const n of names) instances.push(this.wireInstance(this.instances.get(n)!));
    const streams: SnapshotStream[] = [];
    // Right after a flush: each served slot holds exactly what was told up to this version.
    for (const e of this.streams.values()) streams.push({ state: this.wireStream(e, null), residency: e.served, owner: e });
    const head = { epoch: this.epoch, version: this.currentVersion, sent_at_ms: now };
    const started = startSnapshot(head, instances, streams, { encode: this.encode, maxBytes: this.maxMessageBytes, sliceKeyIds: this.sliceKeyIds, counters: this.sliceCounters });
    if (!(started instanceof SnapshotBuild)) {
      this.snapshotCache = { version: this.currentVersion, bytes: started };
      return new OneMessageFeed(started);
    }
    this.snapshotBuilds++;
    this.building = started;
    started.join(w);
    return started;
  }

  /** Idle, caught-up watchers get a heartbeat at the current version (one encoding per tick). */
  private heartbeat(): void {
    if (this.watchers.size === 0) return;
    const now = this.nowMs();
    let bytes: Buffer | null = null;
    for (const w of this.watchers) {
      if (w.blocked || !w.caughtUp(this.changeLog) || now - w.lastWriteMs < this.heartbeatIntervalMs) continue;
      bytes ??= this.encode({ epoch: this.epoch, version: this.currentVersion, sent_at_ms: now, heartbeat: {} });
      w.send(bytes, now);
    }
  }

  /** Stops the timers, ends every watch (`closing`) and lets go of streams and instances. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.heartbeatTimer);
    this.flushTimer.cancel();
    for (const w of [...this.watchers]) w.end('closing', 'directory view publisher stopping; re-watch another directory');
    this.watchers.clear();
    this.unsubscribeInstances?.();
    this.unsubscribeInstances = null;
    this.unsubscribeInflight?.();
    this.unsubscribeInflight = null;
    // Let go of every stream: what they still push is ignored from here on.
    for (const e of this.streams.values()) e.removed = true;
    this.streams.clear();
    this.snapshotCache = null;
    this.building = null;
  }
}
