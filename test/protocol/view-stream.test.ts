// architecture.md "The view stream": WatchView end to end over real sockets. The engine
// simulator's rank publisher feeds a real StreamSubscriber over TCP ZeroMQ; the directory's view
// publisher streams the residency to a real grpc-js client, which applies the snapshot and the
// ordered deltas to a plain Map model (test/helpers/view-model.ts) that must equal the directory's
// own index after every phase.
//
//   RankPublisher ──PUB/ROUTER──▶ StreamSubscriber ──StreamObserver (Directory trackers)──▶ ViewPublisher
//                                        │ (Directory)                                      │ WatchView
//                                        ▼                                                  ▼
//                                   StreamIndex.exportResidency  ══ must equal ══  client ViewModel
//
// Waits are on states, sequences and versions (polling), never on elapsed time.
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { InstanceListing } from '../../directory-svc/view/instance-listing.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import type { WireListInstancesResponse } from '../../shared/view/view-wire.js';
import type { WireGetStatsResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { connectKvDirectory } from '../helpers/kv-directory-client.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { ViewModel, residencyMap, type DecodedViewUpdate } from '../helpers/view-model.js';

const BLOCK_SIZE = 4;
const INSTANCE = 'engine-a:8000';

interface KvViewClient extends grpc.Client {
  WatchView(req: { router_id: string; epoch: string; version: string }): grpc.ClientReadableStream<DecodedViewUpdate>;
  ListInstances(req: Record<string, never>, cb: (err: grpc.ServiceError | null, res: WireListInstancesResponse) => void): void;
  GetStats(req: Record<string, never>, cb: (err: grpc.ServiceError | null, res: WireGetStatsResponse) => void): void;
}

function tokens(n: number): number[] {
  return [4 * n + 1, 4 * n + 2, 4 * n + 3, 4 * n + 4];
}

function chain(first: number, count: number): number[] {
  const out: number[] = [];
  for (let i = 0; i < count; i++) out.push(...tokens(first + i));
  return out;
}

function stored(hashes: number[], parent: number | null, toks: number[], medium = 'gpu'): WireEvent {
  return { type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: toks, block_size: BLOCK_SIZE, medium };
}

function removed(hashes: number[], medium = 'gpu'): WireEvent {
  return { type: 'BlockRemoved', block_hashes: hashes, medium };
}

/** One open WatchView call and the model it feeds. */
class Watch {
  readonly model = new ViewModel();
  readonly updates: DecodedViewUpdate[] = [];
  status: grpc.StatusObject | null = null;
  error: Error | null = null;
  constructor(readonly call: grpc.ClientReadableStream<DecodedViewUpdate>) {
    call.on('data', (u: DecodedViewUpdate) => {
      this.updates.push(u);
      try {
        this.model.apply(u);
      } catch (e) {
        this.error = e instanceof Error ? e : new Error(String(e));
      }
    });
    call.on('status', (s: grpc.StatusObject) => {
      this.status = s;
    });
    call.on('error', () => undefined); // the status carries it
  }
}

describe('architecture.md view stream: WatchView end to end', () => {
  let pub: RankPublisher | null = null;
  let view: ViewPublisher | null = null;
  let directory: Directory | null = null;
  let server: DirectoryGrpcServer | null = null;
  let client: KvViewClient | null = null;
  let subscribers: StreamSubscriber[] = [];
  let states: StreamState[] = [];

  afterEach(async () => {
    client?.close();
    client = null;
    view?.close();
    view = null;
    await server?.close(500);
    server = null;
    await directory?.close();
    directory = null;
    await pub?.close();
    pub = null;
    subscribers = [];
    states = [];
  });

  async function open(opts: { logMaxEntries?: number } = {}): Promise<{ pub: RankPublisher; view: ViewPublisher; sub: StreamSubscriber; client: KvViewClient }> {
    pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: BLOCK_SIZE, maxMessageBytes: 1 << 20 });
    const v = new ViewPublisher({ flushIntervalMs: 10, ...opts });
    view = v;
    const factory: DirectoryStreamFactory = async (cfg, limits) => {
      const sub = await StreamSubscriber.create(cfg, limits, { random: () => 0 });
      subscribers.push(sub);
      return sub;
    };
    directory = new Directory({
      enabled: true,
      streamSource: 'static',
      maxStreams: 8,
      limits: { ...DEFAULT_STREAM_LIMITS, replayTimeoutMs: 2000, resyncIntervalMs: 0 },
      createStream: factory,
      trackers: [v, { streamOpened: () => ({ stateChanged: (s: StreamState) => states.push(s) }) }],
    });
    await directory.addStream({
      instanceName: INSTANCE,
      dpRank: 0,
      blockSize: BLOCK_SIZE,
      endpoint: pub.eventEndpoint,
      replayEndpoint: pub.replayEndpoint,
      topic: '',
      hashSeed: 1024n,
    });
    server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, view: v, instances: new InstanceListing(null) });
    client = connectKvDirectory<KvViewClient>(server.port);
    const sub = subscribers[0]!;
    await waitFor(() => sub.state === 'SYNCHRONIZED', 10_000, 'stream synchronized');
    await pub.waitForSubscribers(1);
    return { pub, view: v, sub, client };
  }

  function watch(c: KvViewClient, epoch = '', version = 0): Watch {
    return new Watch(c.WatchView({ router_id: 'router-test', epoch, version: String(version) }));
  }

  /** The client's model equals the directory: same version, same stream state, same residency. */
  async function converged(w: Watch, v: ViewPublisher, sub: StreamSubscriber, seq: bigint): Promise<void> {
    await waitFor(() => sub.state === 'SYNCHRONIZED' && sub.sequence === seq, 10_000, `stream synchronized at seq ${seq}`);
    v.flush();
    await waitFor(() => w.error !== null || w.model.version === v.version, 10_000, `client at version ${v.version}`);
    expect(w.error, 'client model refused an update').to.equal(null);
    const s = w.model.streamByName(INSTANCE, 0);
    expect(s, 'stream in the client view').to.not.equal(null);
    expect(s!.state.synchronized).to.equal(true);
    expect(s!.state.sequence).to.equal(seq.toString());
    const index = sub.index!;
    expect(s!.residency).to.deep.equal(residencyMap(index.exportResidency()));
    // And key by key through the index's own lookup.
    for (const [hex, tiers] of s!.residency) expect(index.residencyOf(Buffer.from(hex, 'hex'), 0)).to.equal(tiers);
    expect(Number(s!.state.device_blocks)).to.equal(index.deviceBlocks);
    expect(Number(s!.state.host_blocks)).to.equal(index.hostBlocks);
  }

  it('stores, removals, a gap-triggered recovery and a seq reset: the applied snapshot + deltas equal the index', async () => {
    const { pub: p, view: v, sub, client: c } = await open();
    await p.publish([stored([1, 2, 3], null, chain(0, 3))]);
    const w = watch(c);
    await p.publish([stored([4, 5], 3, chain(3, 2)), stored([1, 2], null, [], 'cpu')]);
    await p.publish([removed([5]), removed([2])]);
    await converged(w, v, sub, 2n);
    expect(w.model.snapshots).to.equal(1);

    // Gap: batch 3 is dropped on the wire (the engine applied it), batch 4 reveals the gap.
    p.dropNextBatch();
    await p.publish([stored([6, 7], 4, chain(10, 2))]);
    await p.publish([removed([1, 3])]);
    await converged(w, v, sub, 4n);
    expect(sub.counters.syncLost.gap).to.equal(1);
    const resets = w.updates.filter((u) => u.body === 'delta' && u.delta!.stream_resets.length > 0).length;
    expect(resets).to.be.greaterThan(0);

    // Seq reset: the publisher restarts its numbering on the same socket.
    await p.publish([stored([8], 7, chain(12, 1)), removed([4], 'gpu')], { seq: 0n });
    await converged(w, v, sub, 0n);
    expect(sub.counters.syncLost.seq_reset).to.equal(1);
    expect(states).to.include('RECOVERING');

    // Live again after the recoveries.
    await p.publish([stored([9, 10], 8, chain(13, 2), 'cpu')]);
    await converged(w, v, sub, 1n);
    expect(w.model.snapshots).to.equal(1);
    expect(w.model.streamByName(INSTANCE, 0)!.residency.size).to.be.greaterThan(0);
  });

  it('resume after a disconnect with (epoch, version) gets only the missing deltas', async () => {
    const { pub: p, view: v, sub, client: c } = await open();
    await p.publish([stored([1, 2], null, chain(0, 2))]);
    const first = watch(c);
    await converged(first, v, sub, 0n);
    const { epoch, version } = first.model;
    first.call.cancel();
    await waitFor(() => v.watcherCount === 0, 5000, 'watcher gone');

    for (let i = 0; i < 3; i++) {
      await p.publish([stored([10 + i], i === 0 ? 2 : 9 + i, chain(20 + i, 1))]);
      await waitFor(() => sub.sequence === BigInt(1 + i), 5000, `seq ${1 + i}`);
      v.flush();
    }
    const missed = v.version - version;
    expect(missed).to.be.greaterThanOrEqual(3);

    const again = watch(c, epoch, version);
    // The resumed client starts from the first model's state and must reach the directory's.
    again.model.epoch = epoch;
    again.model.version = version;
    for (const [id, s] of first.model.streams) again.model.streams.set(id, { state: s.state, residency: new Map(s.residency) });
    await converged(again, v, sub, 3n);
    expect(again.updates.every((u) => u.body !== 'snapshot')).to.equal(true);
    const deltas = again.updates.filter((u) => u.body === 'delta').map((u) => Number(u.version));
    expect(deltas.slice(0, missed)).to.deep.equal(Array.from({ length: missed }, (_, i) => version + 1 + i));
    expect(v.stats().resumes).to.equal(1);
  });

  it('resume with an unknown epoch (another directory lifetime) gets a full snapshot', async () => {
    const { pub: p, view: v, sub, client: c } = await open();
    await p.publish([stored([1, 2, 3], null, chain(0, 3))]);
    await waitFor(() => sub.sequence === 0n, 5000, 'seq 0');
    const w = watch(c, 'an-epoch-from-before-a-restart', 3);
    await converged(w, v, sub, 0n);
    expect(w.updates[0]!.body).to.equal('snapshot');
    expect(w.updates[0]!.epoch).to.equal(v.epoch);
    expect(w.model.snapshots).to.equal(1);
  });

  it('heartbeats arrive while the directory is idle, at the current version', async () => {
    const { view: v, client: c } = await open();
    const w = watch(c);
    await waitFor(() => w.model.heartbeats >= 2, 10_000, 'two heartbeats');
    const hb = w.updates.filter((u) => u.body === 'heartbeat');
    expect(hb.every((u) => Number(u.version) === v.version && u.epoch === v.epoch)).to.equal(true);
  });

  it('ListInstances without discovery: no instances, etcd not connected', async () => {
    const { client: c } = await open();
    const res = await new Promise<WireListInstancesResponse>((resolve, reject) => c.ListInstances({}, (err, r) => (err ? reject(err) : resolve(r))));
    expect(res.instances).to.deep.equal([]);
    expect(res.etcd_connected).to.equal(false);
  });

  it('GetStats reports the view epoch, version and watcher count', async () => {
    const { view: v, client: c } = await open();
    const w = watch(c);
    await waitFor(() => w.model.snapshots === 1, 5000, 'snapshot');
    const res = await new Promise<WireGetStatsResponse>((resolve, reject) => c.GetStats({}, (err, r) => (err ? reject(err) : resolve(r))));
    expect([res.view_epoch, res.view_version, res.view_watchers]).to.deep.equal([v.epoch, String(v.version), 1]);
  });

  it('a router that stops reading is ended with ABORTED once it falls out of the log; what it got has no gap', async () => {
    const { pub: p, view: v, sub, client: c } = await open({ logMaxEntries: 4 });
    const w = watch(c);
    await waitFor(() => w.model.snapshots === 1, 5000, 'snapshot');
    w.call.pause(); // the router stops reading: HTTP/2 flow control fills, then the server's buffer
    let seq = -1;
    for (let i = 0; i < 400 && v.stats().laggingEnded === 0; i++) {
      // ~1000 keys per delta (≈17 kB), so the transport fills after a few dozen deltas.
      const toks: number[] = [];
      const hashes: number[] = [];
      for (let b = 0; b < 1000; b++) {
        hashes.push(i * 1000 + b + 1);
        toks.push(...tokens(i * 1000 + b));
      }
      const events = [stored(hashes, null, toks)];
      if (i > 0) events.push(removed(hashes.map((h) => h - 1000)));
      seq = Number(await p.publish(events));
      await waitFor(() => sub.sequence === BigInt(seq), 5000, `seq ${seq}`);
      v.flush();
    }
    expect(v.stats().laggingEnded).to.equal(1);
    expect(v.watcherCount).to.equal(0);
    w.call.resume();
    await waitFor(() => w.status !== null, 10_000, 'status');
    expect(w.status!.code).to.equal(grpc.status.ABORTED);
    expect(w.status!.details).to.match(/^view_lagging: /);
    expect(w.error, 'a delta was skipped').to.equal(null);
    expect(w.model.version).to.be.lessThan(v.version);
    // Re-watching from where it stopped (now outside the log) gets a snapshot equal to the index.
    const again = watch(c, w.model.epoch, w.model.version);
    await converged(again, v, sub, BigInt(seq));
    expect(again.updates[0]!.body).to.equal('snapshot');
  });

  it('a stopping directory ends every watch with UNAVAILABLE so routers fail over', async () => {
    const { view: v, client: c } = await open();
    const w = watch(c);
    await waitFor(() => w.model.snapshots === 1, 5000, 'snapshot');
    v.close();
    await waitFor(() => w.status !== null, 5000, 'status');
    expect(w.status!.code).to.equal(grpc.status.UNAVAILABLE);
  });
});
