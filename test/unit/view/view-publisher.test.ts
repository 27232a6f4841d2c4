// architecture.md "The view stream", directory side: delta batching, stream resets superseding
// pending changes, stream and instance changes, resumable watches, snapshots, and per-watcher flow
// control. The index is a real StreamIndex fed decoded events; the subscriber is stood in for by a
// small source that pushes to its observer as the subscriber does (the protocol suite uses the
// real one over ZeroMQ). Deltas are cut by calling
// flush() (the flush timer is set far away), so nothing here depends on timing.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import type { InstanceRegistration } from '../../../directory-svc/discovery/instance-json.js';
import { InstanceTable, type InstanceChange } from '../../../directory-svc/discovery/instance-table.js';
import type { PlanExclusion } from '../../../directory-svc/discovery/stream-planner.js';
import { StreamIndex, type SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { StreamQuery, type QueryableStream } from '../../../directory-svc/index/stream-query.js';
import type { StreamState } from '../../../directory-svc/subscription/stream-state.js';
import type { StreamCounters } from '../../../directory-svc/subscription/stream-counters.js';
import { StreamObservers, UNOBSERVED, type StreamObserver } from '../../../directory-svc/subscription/stream-observer.js';
import { Directory } from '../../../directory-svc/directory.js';
import { DEFAULT_STREAM_LIMITS } from '../../../shared/config/kv-events-config.js';
import { ViewPublisher, type InstanceTableSource, type ViewStreamListener } from '../../../directory-svc/view/view-publisher.js';
import type { ViewEndReason, ViewSink } from '../../../directory-svc/view/view-watcher.js';
import { InstanceListing } from '../../../directory-svc/view/instance-listing.js';
import { decodeViewUpdate, residencyMap, ViewModel, type DecodedViewUpdate } from '../../helpers/view-model.js';
import { range, removed, stored } from '../index/index-fixtures.js';
import { ServedResidency } from '../../../directory-svc/index/served-residency.js';
import { ResidencyGroups } from '../../../shared/index/residency-groups.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { decodeViewUpdate as routerDecode } from '../../../router-svc/viewcache/view-update.js';

/**
 * Stands in for a StreamSubscriber: its served index and state, told to its observer, and the
 * served index mirrored into the stream's slot of a shared group, as the subscriber does.
 */
class SourceStream {
  state: StreamState = 'SYNCHRONIZED';
  index: StreamIndex | null = null;
  sequence = -1n;
  error = '';
  readonly counters = {} as StreamCounters;
  private observer: StreamObserver = UNOBSERVED;
  /** The query view's mirror of whatever index is current (a test may swap `index` without telling). */
  readonly served: ServedResidency;
  constructor(readonly name: string) {
    this.served = new ServedResidency(sourceGroups, 4, sourceHasher!);
  }
  observe(observer: StreamObserver): void {
    this.observer = observer;
    this.announceState();
    if (this.state === 'SYNCHRONIZED' && this.index !== null) this.announceIndex();
  }
  start(): void {}
  async close(): Promise<void> {
    this.observer.streamClosed();
    this.served.close();
  }
  /** A fresh index that reports its residency changes while it is the one served. */
  newIndex(maxEntries = 10_000): StreamIndex {
    const index: StreamIndex = new StreamIndex({
      blockSize: 4,
      hasher: sourceHasher!,
      maxEntries,
      keySpace: this.served.group,
      onResidencyChange: (w, o, before, after) => {
        if (this.index !== index) return;
        if (this.served.servedIndex === index) this.served.change(index, w, o, after);
        else this.served.serve(index);
        this.observer.residencyChanged(w, o, before, after);
      },
    });
    return index;
  }
  /** The subscriber's batch announcement. */
  announceBatch(): void {
    this.observer.batchApplied(this.sequence, this.index?.deviceBlocks ?? 0, this.index?.hostBlocks ?? 0);
  }
  /** The subscriber's swap announcement. */
  announceIndex(): void {
    const index = this.index!;
    this.served.serve(index);
    this.observer.indexReplaced(this.sequence, this.served, index.exportResidency());
  }
  /** The subscriber's state move. */
  announceState(): void {
    this.served.serve(this.state === 'SYNCHRONIZED' ? this.index : null);
    this.observer.stateChanged(this.state, this.error, this.sequence);
  }
  toQueryable(): QueryableStream {
    const synchronized = this.state === 'SYNCHRONIZED';
    return {
      instanceName: this.name,
      dpRank: 0,
      blockSize: 4,
      hashSeed: 1024n,
      synchronized,
      sequence: this.sequence,
      error: this.error,
      index: synchronized ? this.index : null,
      residency: synchronized && this.index !== null ? this.served : null,
    };
  }
}

/** Collects what a watcher is sent; `full` makes write() report a full buffer. */
class MemorySink implements ViewSink {
  readonly sent: Buffer[] = [];
  full = false;
  ended: { reason: ViewEndReason; detail: string } | null = null;
  private drainCb: (() => void) | null = null;
  write(bytes: Buffer): boolean {
    this.sent.push(bytes);
    return !this.full;
  }
  onDrain(cb: () => void): void {
    this.drainCb = cb;
  }
  end(reason: ViewEndReason, detail: string): void {
    this.ended = { reason, detail };
  }
  drain(): void {
    this.full = false;
    const cb = this.drainCb;
    this.drainCb = null;
    cb?.();
  }
  updates(): DecodedViewUpdate[] {
    return this.sent.map(decodeViewUpdate);
  }
}

/** The seed-1024 hasher of the sources' indexes (set in `before`). */
let sourceHasher: ContentKeyHasher | null = null;
/** The directory's query view the sources mirror into (one group: block size 4, seed 1024); one per test. */
let sourceGroups = new ResidencyGroups();

function skips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

function registration(name: string, over: Partial<InstanceRegistration> = {}): InstanceRegistration {
  return {
    name,
    type: 'DEFAULT',
    rpcAddress: name,
    incarnationId: 'inc-1',
    registerTsMs: 1000,
    dpSize: 1,
    ttftProfile: [[128, 20]],
    tpotProfile: [],
    backendType: 'xllm',
    models: null,
    ...over,
  };
}

/** A real InstanceTable behind the InstanceTableSource surface (discovery's service does the same). */
class TableSource implements InstanceTableSource {
  readonly table = new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
  private listener: ((c: InstanceChange) => void) | null = null;
  exclusions: PlanExclusion[] = [];
  instances() {
    return this.table.instances();
  }
  onChange(listener: (c: InstanceChange) => void): () => void {
    this.listener = listener;
    return () => {
      this.listener = null;
    };
  }
  diagnostics() {
    return { etcdConnected: true, exclusions: this.exclusions };
  }
  emit(changes: readonly InstanceChange[]): void {
    for (const c of changes) this.listener?.(c);
  }
}

describe('architecture.md view stream: publisher', () => {
  let hasher: ContentKeyHasher;
  let publisher: ViewPublisher | null = null;
  let clock = 1_000_000;

  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
    sourceHasher = hasher;
  });

  afterEach(() => {
    publisher?.close();
    publisher = null;
  });

  function open(opts: { maxDeltaKeyChanges?: number; logMaxEntries?: number; logMaxBytes?: number } = {}): ViewPublisher {
    sourceGroups = new ResidencyGroups();
    publisher = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'epoch-a', nowMs: () => clock, ...opts });
    return publisher;
  }

  /** A synchronized source with an index wired to the publisher's observer for it. */
  function track(p: ViewPublisher, name: string): { src: SourceStream; handle: ViewStreamListener } {
    const src = new SourceStream(name);
    const handle = p.addStream({ instanceName: name, dpRank: 0, blockSize: 4, hashSeed: 1024n });
    src.index = src.newIndex();
    src.observe(new StreamObservers([handle]));
    return { src, handle };
  }

  /** Applies one batch to the source's index and announces it like the subscriber. */
  function batch(src: SourceStream, events: Parameters<StreamIndex['applyEvents']>[0]): void {
    src.index!.applyEvents(events, skips());
    src.sequence++;
    src.announceBatch();
  }

  function watchInto(p: ViewPublisher, model: ViewModel, sink: MemorySink, epoch = '', version = 0) {
    const w = p.watch({ routerId: 'r1', epoch, version }, sink);
    return w;
  }

  function applyAll(model: ViewModel, sink: MemorySink, from = 0): void {
    for (const u of sink.updates().slice(from)) model.apply(u);
  }

  it('delta batching: the key changes of several batches go into one delta with the next version, last write wins', () => {
    const p = open();
    const { src } = track(p, 'e1');
    const sink = new MemorySink();
    const model = new ViewModel();
    watchInto(p, model, sink);
    batch(src, [stored([1, 2, 3], null, range(1, 12), 1)]);
    batch(src, [removed([3], 1), stored([1], null, [], 2)]);
    batch(src, [stored([3], 2, range(9, 12), 1)]); // key 3 back: its last change wins
    p.flush();
    applyAll(model, sink);
    const updates = sink.updates();
    // snapshot at 1 (the stream's announcement was flushed first), then one delta with all three batches
    expect(updates.map((u) => [u.body, Number(u.version)])).to.deep.equal([
      ['snapshot', 1],
      ['delta', 2],
    ]);
    const delta = updates[1]!.delta!;
    expect(delta.residency).to.have.length(1);
    expect(delta.residency[0]!.tiers.length).to.equal(6); // 3 stores, 1 removal, 1 replica, key 3 again
    expect(delta.stream_upserts.map((s) => s.sequence)).to.deep.equal(['2']);
    expect(model.streamByName('e1', 0)!.residency).to.deep.equal(residencyMap(src.index!.exportResidency()));
    expect(p.stats().keyChangesPublished).to.equal(6);
  });

  it('delta size cut: reaching maxDeltaKeyChanges after a batch publishes at once, never inside a batch', () => {
    const p = open({ maxDeltaKeyChanges: 4 });
    const { src } = track(p, 'e1');
    p.flush();
    const v0 = p.version;
    src.index!.applyEvents([stored([1, 2, 3, 4, 5, 6], null, range(1, 24), 1)], skips());
    expect(p.version).to.equal(v0); // mid-batch: nothing cut
    src.announceBatch();
    expect(p.version).to.equal(v0 + 1);
    expect(p.stats().keyChangesPublished).to.equal(6);
  });

  it('stream reset supersedes pending changes: a recovered index replaces the residency atomically', () => {
    const p = open();
    const { src } = track(p, 'e1');
    const sink = new MemorySink();
    const model = new ViewModel();
    watchInto(p, model, sink);
    batch(src, [stored([1, 2], null, range(1, 8), 1)]);
    p.flush();
    batch(src, [stored([3], 2, range(9, 12), 1)]); // pending, then superseded
    // Recovery: a new index (as the subscriber builds it) is swapped in and announced as replaced.
    const fresh = src.newIndex();
    fresh.applyEvents([stored([7, 8], null, range(101, 108), 2)], skips());
    src.index = fresh;
    src.announceIndex();
    batch(src, [stored([9], 8, range(109, 112), 2)]); // after the reset: merged into its residency
    p.flush();
    applyAll(model, sink);
    const last = sink.updates().at(-1)!.delta!;
    expect(last.stream_resets).to.have.length(1);
    expect(last.residency).to.have.length(0);
    expect(last.stream_upserts).to.have.length(0);
    expect(model.streamByName('e1', 0)!.residency).to.deep.equal(residencyMap(fresh.exportResidency()));
    expect(model.streamByName('e1', 0)!.residency.size).to.equal(3);
  });

  it('leaving SYNCHRONIZED resets the stream to no residency, with its state and error', () => {
    const p = open();
    const { src } = track(p, 'e1');
    const sink = new MemorySink();
    const model = new ViewModel();
    batch(src, [stored([1, 2], null, range(1, 8), 1)]);
    watchInto(p, model, sink);
    src.state = 'RECOVERING';
    src.error = 'gap: expected seq 5, got 7';
    src.announceState();
    p.flush();
    applyAll(model, sink);
    const s = model.streamByName('e1', 0)!;
    expect(s.state.synchronized).to.equal(false);
    expect(s.state.error).to.equal('gap: expected seq 5, got 7');
    expect(s.residency.size).to.equal(0);
  });

  it('stream removal: an announced stream is removed by id; one added and removed between deltas never appears', () => {
    const p = open();
    const a = track(p, 'e1');
    p.flush();
    const sink = new MemorySink();
    const model = new ViewModel();
    watchInto(p, model, sink);
    const b = track(p, 'e2');
    a.handle.streamClosed!();
    b.handle.streamClosed!();
    p.flush();
    applyAll(model, sink);
    const d = sink.updates().at(-1)!.delta!;
    expect(d.stream_removals).to.deep.equal([a.handle.streamId]);
    expect(d.stream_resets).to.have.length(0);
    expect(model.streams.size).to.equal(0);
    expect(a.handle.streamId).to.not.equal(b.handle.streamId);
  });

  it('discovery streams: incarnation and generation ride from the plan through Directory.addStream into the view; close removes the stream', async () => {
    const p = open();
    const directory = new Directory({
      enabled: true,
      streamSource: 'discovery',
      maxStreams: 4,
      limits: DEFAULT_STREAM_LIMITS,
      createStream: (cfg) => new SourceStream(cfg.instanceName),
      trackers: [p],
    });
    try {
      const base = { dpRank: 0, blockSize: 4, endpoint: 'tcp://127.0.0.1:1', replayEndpoint: 'tcp://127.0.0.1:2', topic: '', hashSeed: 1024n };
      await directory.addStream({ ...base, instanceName: 'd:8000', generation: 7, incarnationId: 'inc-x' });
      await directory.addStream({ ...base, instanceName: 's:8000', endpoint: 'tcp://127.0.0.1:3', replayEndpoint: 'tcp://127.0.0.1:4' });
      const sink = new MemorySink();
      const model = new ViewModel();
      watchInto(p, model, sink);
      applyAll(model, sink);
      const d = model.streamByName('d:8000', 0)!.state;
      expect([d.incarnation_id, d.generation]).to.deep.equal(['inc-x', '7']);
      const st = model.streamByName('s:8000', 0)!.state;
      expect([st.incarnation_id, st.generation]).to.deep.equal(['', '0']);
      await directory.removeStream('d:8000', 0);
      p.flush();
      applyAll(model, sink, sink.sent.length - 1);
      expect(model.streamByName('d:8000', 0)).to.equal(null);
    } finally {
      await directory.close();
    }
  });

  it('engines.md §1 engine_kind on every ViewStream the directory publishes: snapshot, upsert and reset carry the kind (xllm when absent); the router reads it', async () => {
    const p = open();
    const directory = new Directory({
      enabled: true,
      streamSource: 'static',
      maxStreams: 4,
      limits: DEFAULT_STREAM_LIMITS,
      createStream: (cfg) => new SourceStream(cfg.instanceName),
      trackers: [p],
    });
    try {
      const base = { dpRank: 0, blockSize: 4, topic: '', hashSeed: 1024n };
      await directory.addStream({ ...base, instanceName: 'v:8000', endpoint: 'tcp://127.0.0.1:1', replayEndpoint: '', engineKind: 'vllm' });
      await directory.addStream({ ...base, instanceName: 'x:8000', endpoint: 'tcp://127.0.0.1:3', replayEndpoint: 'tcp://127.0.0.1:4' });
      const { src } = track(p, 'g:8000');
      const sglang = p.addStream({ instanceName: 'sg:8000', dpRank: 0, blockSize: 4, hashSeed: 1024n, engineKind: 'sglang' });
      const sgSrc = new SourceStream('sg:8000');
      sgSrc.index = sgSrc.newIndex();
      sgSrc.observe(new StreamObservers([sglang]));
      const sink = new MemorySink();
      watchInto(p, new ViewModel(), sink);
      const snap = sink.updates()[0]!;
      const kinds = new Map(snap.snapshot!.streams.map((s) => [s.instance_name, s.engine_kind]));
      expect(Object.fromEntries(kinds)).to.deep.equal({ 'v:8000': 'vllm', 'x:8000': 'xllm', 'g:8000': 'xllm', 'sg:8000': 'sglang' });
      // An upsert (a batch) and a reset (a recovered index) carry it too.
      sgSrc.index.applyEvents([stored([1], null, range(1, 4), 1)], skips());
      sgSrc.sequence++;
      sgSrc.announceBatch();
      p.flush();
      const fresh = sgSrc.newIndex();
      sgSrc.index = fresh;
      sgSrc.announceIndex();
      p.flush();
      const deltas = sink.updates().slice(1).map((u) => u.delta!);
      expect(deltas.flatMap((d) => d.stream_upserts.map((s) => s.engine_kind))).to.deep.equal(['sglang']);
      expect(deltas.flatMap((d) => d.stream_resets.map((s) => s.engine_kind))).to.deep.equal(['sglang']);
      const cache = new ViewCache({ staleAfterMs: 3_600_000 });
      await cache.hashers.ensure([1024n]);
      for (const u of sink.updates()) cache.applyUpdate(routerDecode(u), clock);
      expect(Object.fromEntries(cache.streams().map((s) => [s.instanceName, s.engineKind]))).to.deep.equal({ 'v:8000': 'vllm', 'x:8000': 'xllm', 'g:8000': 'xllm', 'sg:8000': 'sglang' });
      expect(src.index!.entryCount).to.equal(0);
    } finally {
      await directory.close();
    }
  });

  it('resume inside the log: (epoch, version) gets exactly the missing deltas, no snapshot', () => {
    const p = open();
    const { src } = track(p, 'e1');
    const first = new MemorySink();
    const model = new ViewModel();
    const w = watchInto(p, model, first);
    applyAll(model, first);
    p.unwatch(w); // the router disconnects
    for (let i = 0; i < 3; i++) {
      batch(src, [stored([10 + i], i === 0 ? null : 9 + i, range(1 + 4 * i, 4 + 4 * i), 1)]);
      p.flush();
    }
    const again = new MemorySink();
    p.watch({ routerId: 'r1', epoch: model.epoch, version: model.version }, again);
    const got = again.updates();
    expect(got.map((u) => u.body)).to.deep.equal(['delta', 'delta', 'delta']);
    expect(got.map((u) => Number(u.version))).to.deep.equal([model.version + 1, model.version + 2, model.version + 3]);
    applyAll(model, again);
    expect(model.streamByName('e1', 0)!.residency).to.deep.equal(residencyMap(src.index!.exportResidency()));
    expect(p.stats().resumes).to.equal(1);
  });

  it('resume outside the log or with an unknown epoch: one snapshot at the current version', () => {
    const p = open({ logMaxEntries: 2 });
    const { src } = track(p, 'e1');
    for (let i = 0; i < 5; i++) {
      batch(src, [stored([10 + i], i === 0 ? null : 9 + i, range(1 + 4 * i, 4 + 4 * i), 1)]);
      p.flush();
    }
    for (const [epoch, version] of [
      ['epoch-a', 1], // evicted
      ['epoch-old', p.version], // another process lifetime
      ['epoch-a', p.version + 7], // never reached
    ] as const) {
      const sink = new MemorySink();
      p.watch({ routerId: 'r', epoch, version }, sink);
      const got = sink.updates();
      expect(got.map((u) => [u.body, Number(u.version), u.epoch])).to.deep.equal([['snapshot', p.version, 'epoch-a']]);
      const model = new ViewModel();
      applyAll(model, sink);
      expect(model.streamByName('e1', 0)!.residency).to.deep.equal(residencyMap(src.index!.exportResidency()));
    }
  });

  it('flow control: a full watcher gets nothing until drain, then every delta in order', () => {
    const p = open();
    const { src } = track(p, 'e1');
    const sink = new MemorySink();
    const model = new ViewModel();
    const w = watchInto(p, model, sink);
    sink.full = true;
    batch(src, [stored([1], null, range(1, 4), 1)]);
    p.flush(); // written, buffer now reported full
    const written = sink.sent.length;
    for (let i = 0; i < 3; i++) {
      batch(src, [stored([2 + i], 1 + i, range(5 + 4 * i, 8 + 4 * i), 1)]);
      p.flush();
    }
    expect(sink.sent.length).to.equal(written);
    expect(w.blocked).to.equal(true);
    sink.drain();
    expect(sink.sent.length).to.equal(written + 3);
    applyAll(model, sink);
    expect(model.version).to.equal(p.version);
    expect(model.streamByName('e1', 0)!.residency).to.deep.equal(residencyMap(src.index!.exportResidency()));
  });

  it('flow control: a watcher that falls further behind than the log holds is ended as lagging, never skipped ahead', () => {
    const p = open({ logMaxEntries: 2 });
    const { src } = track(p, 'e1');
    const sink = new MemorySink();
    const model = new ViewModel();
    watchInto(p, model, sink);
    sink.full = true;
    for (let i = 0; i < 4; i++) {
      batch(src, [stored([1 + i], i === 0 ? null : i, range(1 + 4 * i, 4 + 4 * i), 1)]);
      p.flush();
    }
    expect(sink.ended?.reason).to.equal('lagging');
    expect(sink.ended?.detail).to.match(/^view_lagging: /);
    expect(p.watcherCount).to.equal(0);
    expect(p.stats().laggingEnded).to.equal(1);
    // What it was sent is a gap-free prefix.
    applyAll(model, sink);
    expect(model.version).to.be.lessThan(p.version);
  });

  it('instances: registrations, load updates, state moves and removals become instance upserts and removals', () => {
    const p = open();
    const src = new TableSource();
    src.table.put(registration('10.0.0.1:8000'), clock);
    p.attachInstanceTable(src);
    const sink = new MemorySink();
    const model = new ViewModel();
    watchInto(p, model, sink);
    src.emit(src.table.put(registration('10.0.0.2:8000', { type: 'MIX' }), clock).changes);
    src.emit(src.table.heartbeat({ name: '10.0.0.1:8000', incarnationId: 'inc-1', currentRole: null, load: { waitingRequests: 3, gpuCacheUsage: 0.5, recentMaxTtftMs: null, recentMaxTbtMs: null } }, clock).changes);
    p.flush();
    applyAll(model, sink);
    expect([...model.instances.keys()].sort()).to.deep.equal(['10.0.0.1:8000', '10.0.0.2:8000']);
    expect(model.instances.get('10.0.0.1:8000')!.load!.waiting_requests_num).to.equal('3');
    expect(model.instances.get('10.0.0.2:8000')!.load).to.equal(null);
    // Registered and gone between two deltas: never announced, so no removal either.
    const ghost = src.table.put(registration('10.0.0.9:8000'), clock).changes;
    src.emit(ghost);
    src.emit([{ kind: 'remove', instance: ghost[0]!.instance }]);
    p.flush();
    const quiet = sink.updates().at(-1)!;
    applyAll(model, sink, sink.sent.length - 1);
    expect(quiet.delta!.instance_upserts.map((i) => i.name)).to.deep.equal([]);
    expect(quiet.delta!.instance_removals).to.deep.equal([]);
    // SUSPECT then removed after the detect interval.
    const del = src.table.delete('DEFAULT', '10.0.0.1:8000', null);
    src.emit(src.table.probeResult(del.probe!, false, clock));
    src.emit(src.table.tick(clock + 20_000));
    p.flush();
    applyAll(model, sink, sink.sent.length - 1); // only the delta just published
    expect([...model.instances.keys()]).to.deep.equal(['10.0.0.2:8000']);
  });

  it('ListInstances: heartbeat age (-1 without one), the planner exclusion reason, etcd_connected', () => {
    const src = new TableSource();
    src.table.put(registration('b:8000'), clock);
    src.table.put(registration('a:8000'), clock);
    src.table.heartbeat({ name: 'a:8000', incarnationId: null, currentRole: null, load: null }, clock - 250);
    src.exclusions = [{ class: 'port_overflow', instances: ['b:8000'], detail: 'instance b:8000 needs ports up to 70000, above 65535' }];
    // Served by its own listing (not the publisher), at the same clock.
    const res = new InstanceListing(src, null, () => clock).listInstances();
    expect(res.etcd_connected).to.equal(true);
    expect(res.instances.map((i) => [i.name, i.heartbeat_age_ms, i.excluded_reason])).to.deep.equal([
      ['a:8000', 250, ''],
      ['b:8000', -1, 'port_overflow: instance b:8000 needs ports up to 70000, above 65535'],
    ]);
  });
  it('snapshot over 4 MiB: parts of at most 4 MiB each, one per transport drain, assembled by the router beside its live view and swapped on the last; later deltas follow', async () => {
    const p = open();
    const small = track(p, 'a-small');
    const big = track(p, 'b-big');
    batch(small.src, [stored([1, 2], null, range(1, 8), 1)]);
    const cache = new ViewCache({ staleAfterMs: 3_600_000 });
    await cache.hashers.ensure([1024n]);
    const first = new MemorySink();
    p.watch({ routerId: 'r1', epoch: '', version: 0 }, first);
    expect(first.updates().map((u) => u.body)).to.deep.equal(['snapshot']);
    for (const u of first.updates()) cache.applyUpdate(routerDecode(u), clock);
    const oldVersion = cache.version;
    // 260,000 keys × 17 bytes ≈ 4.4 MB of residency: more than one message may hold.
    const n = 260_000;
    big.src.index = big.src.newIndex(1 << 20);
    const tokens = new Array<number>(4 * n);
    for (let i = 0; i < tokens.length; i++) tokens[i] = i + 1;
    batch(big.src, [stored(Array.from({ length: n }, (_, i) => 1000 + i), null, tokens, 1)]);
    p.flush();
    // A full transport takes one part at a time: the next is sent only after a drain (and once
    // built: the parts are built over later event-loop turns).
    const second = new MemorySink();
    second.full = true;
    p.watch({ routerId: 'r2', epoch: '', version: 0 }, second);
    batch(small.src, [stored([3], 2, range(9, 12), 1)]);
    p.flush(); // a delta published meanwhile waits behind the snapshot's parts
    expect(second.sent).to.have.length(1);
    for (let guard = 0; guard < 1000 && second.updates().at(-1)!.body !== 'delta'; guard++) {
      second.full = true;
      second.drain();
      await new Promise((r) => setImmediate(r));
    }
    const all = second.updates();
    expect(all.at(-1)!.body).to.equal('delta');
    const parts = all.slice(0, -1);
    expect(parts.length, 'messages').to.be.greaterThan(1);
    for (const m of second.sent) expect(m.length, 'message bytes').to.be.at.most(4 * 1024 * 1024);
    expect(parts.map((u) => [u.body, u.snapshot_chunk?.index, u.snapshot_chunk?.last])).to.deep.equal(parts.map((_, i) => ['snapshot_chunk', i, i === parts.length - 1]));
    const probe = tokens.slice(0, 8);
    for (let i = 0; i < parts.length; i++) {
      cache.applyUpdate(routerDecode(parts[i]!), clock);
      const q = cache.query(probe, clock);
      const bigMatch = q.matches.find((m) => m.instance_name === 'b-big');
      if (i < parts.length - 1) {
        // Still the old view: version, streams and hits unchanged until the last part.
        expect(cache.version).to.equal(oldVersion);
        expect(bigMatch?.device_hit_tokens ?? 0).to.equal(0);
      } else {
        expect(cache.version).to.equal(BigInt(p.version - 1));
        expect(bigMatch?.device_hit_tokens).to.equal(8);
      }
    }
    cache.applyUpdate(routerDecode(all.at(-1)!), clock);
    expect(cache.version).to.equal(BigInt(p.version));
    const b = cache.streams().find((s) => s.instanceName === 'b-big')!;
    expect([b.deviceBlocks, b.hostBlocks]).to.deep.equal([n, 0]);
    expect(cache.streams().find((s) => s.instanceName === 'a-small')!.deviceBlocks).to.equal(3);
  });
  describe('snapshots in parts, built in slices while the view changes', () => {
    const LIMIT = 64 * 1024;
    const SLICE = 512;

    /** `blocks` blocks of one chain: engine hashes from `firstHash`, tokens from `firstToken`. */
    function chain(firstHash: number, blocks: number, firstToken: number, tier: 1 | 2) {
      return stored(Array.from({ length: blocks }, (_, i) => firstHash + i), null, range(firstToken, firstToken + 4 * blocks - 1), tier);
    }

    function routerApply(cache: ViewCache, updates: readonly DecodedViewUpdate[]): void {
      for (const u of updates) cache.applyUpdate(routerDecode(u), clock);
    }

    it('ends, after the deltas behind the last part, exactly equal to the directory (stores, removals, a reset, a state change, a stream removed, a new stream); parts ≤ the limit, slices bounded', async () => {
      const p = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'epoch-a', nowMs: () => clock, maxMessageBytes: LIMIT, snapshotSliceKeyIds: SLICE });
      publisher = p;
      sourceGroups = new ResidencyGroups();
      const a = track(p, 'a');
      const b = track(p, 'b');
      const c = track(p, 'c');
      const e = track(p, 'e');
      // a and b share a prefix (same content keys, one holder set), c and e hold their own.
      batch(a.src, [chain(1, 3000, 1, 1)]);
      batch(b.src, [chain(10_001, 2000, 1, 1), chain(20_001, 500, 900_001, 2)]);
      batch(c.src, [chain(30_001, 3000, 500_001, 1)]);
      batch(e.src, [chain(40_001, 1000, 700_001, 2)]);
      p.flush();
      const cache = new ViewCache({ staleAfterMs: 3_600_000 });
      await cache.hashers.ensure([1024n]);
      const sink = new MemorySink();
      p.watch({ routerId: 'r1', epoch: '', version: 0 }, sink);
      const startVersion = p.version;
      expect(sink.updates().map((u) => [u.body, u.snapshot_chunk?.index])).to.deep.equal([['snapshot_chunk', 0]]);
      let d: { src: SourceStream; handle: ViewStreamListener } | null = null;
      const changes: (() => Promise<void> | void)[] = [
        () => batch(a.src, [stored([3001, 3002], 3000, range(12_001, 12_008), 1)]),
        () => batch(b.src, [removed(Array.from({ length: 300 }, (_, i) => 10_001 + 1700 + i), 1), removed([20_001 + 499], 2)]),
        () => {
          // c recovers: a fresh index replaces its residency (a stream reset).
          const fresh = c.src.newIndex();
          fresh.applyEvents([chain(50_001, 1500, 500_001, 2)], skips());
          c.src.index = fresh;
          c.src.sequence += 5n;
          c.src.announceIndex();
        },
        () => p.flush(),
        () => {
          e.src.state = 'RECOVERING';
          e.src.error = 'gap: expected seq 2, got 4';
          e.src.announceState();
        },
        () => a.src.close(),
        () => {
          // A new stream takes the slot a left (same group).
          d = track(p, 'd');
          batch(d.src, [chain(60_001, 800, 1, 1)]);
        },
        () => batch(b.src, [stored([20_001 + 499], 20_001 + 498, range(900_001 + 4 * 499, 900_001 + 4 * 499 + 3), 1)]),
        () => p.flush(),
      ];
      let lastPartAt = -1;
      for (let turn = 0; turn < 10_000 && (lastPartAt < 0 || turn < changes.length); turn++) {
        if (turn < changes.length) await changes[turn]!();
        await new Promise((r) => setImmediate(r));
        if (lastPartAt < 0 && sink.updates().some((u) => u.snapshot_chunk?.last === true)) lastPartAt = turn;
      }
      // The changes happened while the parts were being built.
      expect(lastPartAt, 'turn of the last part').to.be.at.least(changes.length - 1);
      p.flush();
      const updates = sink.updates();
      const parts = updates.filter((u) => u.body === 'snapshot_chunk');
      expect(parts.length, 'parts').to.be.greaterThan(3);
      expect(parts.every((u) => Number(u.version) === startVersion)).to.equal(true);
      // Every part, then every delta after the snapshot's version, in order.
      const lastPart = updates.findIndex((u) => u.snapshot_chunk?.last === true);
      expect(lastPart).to.equal(parts.length - 1);
      expect(updates.slice(lastPart + 1).map((u) => Number(u.version))).to.deep.equal(range(startVersion + 1, p.version));
      for (const m of sink.sent) expect(m.length, 'message bytes').to.be.at.most(LIMIT);
      const st = p.stats();
      expect(st.snapshotBuilds).to.equal(1);
      expect(st.snapshotSlices, 'slices (event-loop turns)').to.be.greaterThan(parts.length);
      expect(st.snapshotSliceMaxKeyIds).to.be.at.most(SLICE);
      routerApply(cache, updates);
      expect(cache.version).to.equal(BigInt(p.version));
      // The router's view is the directory's: same streams, states, counts and residency key for key.
      const sources = [b.src, c.src, e.src, d!.src];
      expect(cache.streams().map((s) => s.instanceName)).to.deep.equal(['b', 'c', 'd', 'e']);
      for (const src of sources) {
        const s = cache.streams().find((x) => x.instanceName === src.name)!;
        const want = src.state === 'SYNCHRONIZED' ? residencyMap(src.index!.exportResidency()) : new Map<string, number>();
        expect([s.deviceBlocks, s.hostBlocks, s.synchronized, s.sequence], src.name).to.deep.equal([src.served.group.deviceBlocks(src.served.slot), src.served.group.hostBlocks(src.served.slot), src.state === 'SYNCHRONIZED', src.sequence]);
        let device = 0;
        for (const [hex, tiers] of want) {
          expect(cache.tiersOf(s.streamId, Buffer.from(hex, 'hex')), `${src.name} ${hex}`).to.equal(tiers);
          device += tiers & 1;
        }
        expect(s.deviceBlocks, `${src.name} device blocks`).to.equal(device);
      }
      // And the router answers the directory's Query.
      const query = new StreamQuery();
      for (const prompt of [range(1, 4 * 3002), range(500_001, 500_001 + 4 * 1600), range(900_001, 900_001 + 4 * 500), range(12_001, 12_008)]) {
        expect(cache.query(prompt, clock)).to.deep.equal(query.query(prompt, sources.map((x) => x.toQueryable())));
      }
    });

    it('the router keeps answering from its old view while parts arrive, and swaps on the last', async () => {
      const p = new ViewPublisher({ flushIntervalMs: 3_600_000, epoch: 'epoch-a', nowMs: () => clock, maxMessageBytes: LIMIT, snapshotSliceKeyIds: SLICE });
      publisher = p;
      sourceGroups = new ResidencyGroups();
      const a = track(p, 'a');
      batch(a.src, [chain(1, 10, 1, 1)]);
      const cache = new ViewCache({ staleAfterMs: 3_600_000 });
      await cache.hashers.ensure([1024n]);
      const first = new MemorySink();
      p.unwatch(p.watch({ routerId: 'r1', epoch: '', version: 0 }, first));
      routerApply(cache, first.updates());
      const oldVersion = cache.version;
      const prompt = range(1, 4 * 8000);
      const oldAnswer = cache.query(prompt, clock);
      expect(oldAnswer.matches[0]!.device_hit_tokens).to.equal(40);
      batch(a.src, [stored(Array.from({ length: 7990 }, (_, i) => 11 + i), 10, range(41, 4 * 8000), 1)]);
      p.flush();
      const second = new MemorySink();
      p.watch({ routerId: 'r2', epoch: '', version: 0 }, second);
      let applied = 0;
      for (let turn = 0; turn < 10_000; turn++) {
        const got = second.updates();
        for (; applied < got.length; applied++) {
          const u = got[applied]!;
          cache.applyUpdate(routerDecode(u), clock);
          if (u.snapshot_chunk?.last === true) {
            expect(cache.version).to.equal(BigInt(p.version));
            expect(cache.query(prompt, clock).matches[0]!.device_hit_tokens).to.equal(4 * 8000);
          } else {
            expect(cache.version).to.equal(oldVersion);
            expect(cache.query(prompt, clock)).to.deep.equal(oldAnswer);
          }
        }
        if (got.some((u) => u.snapshot_chunk?.last === true)) break;
        await new Promise((r) => setImmediate(r));
      }
      expect(applied, 'parts').to.be.greaterThan(3);
      expect(second.updates().at(-1)!.snapshot_chunk?.last).to.equal(true);
    });
  });
});
