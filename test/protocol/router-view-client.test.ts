/**
 * architecture.md "The view stream", router side, over real gRPC: a grpc-js server in this file
 * implements KvDirectory.WatchView from proto/kvdirectory.proto and plays scripted updates to
 * the router's ViewClient.
 *
 *   test server (WatchView)                      ViewClient → ViewCache
 *   ── snapshot e1/5 ──────────────────────────▶ ready, query answers from the view
 *   ── delta e1/6, heartbeat e1/6 ─────────────▶ 'update' 6
 *   ── end of stream ──────────────────────────▶ WatchView{epoch e1, version 6} (resume)
 *   ── snapshot e2/1 (directory restarted) ────▶ everything replaced
 *   ── silence ────────────────────────────────▶ 'stale', then a new WatchView
 * Fresh ephemeral ports per test; every server and client is closed in afterEach.
 */
import { once } from 'node:events';
import { expect } from 'chai';
import * as grpc from '@grpc/grpc-js';
import type { WireViewUpdate } from '../../shared/view/view-wire.js';
import { ViewClient, type ViewClientOptions } from '../../router-svc/viewcache/view-client.js';
import { VIEW_STALE_ERROR } from '../../router-svc/viewcache/view-cache.js';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { Directory, type DirectoryStreamFactory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { ScriptedDirectory, send, type Watch } from '../helpers/scripted-directory.js';
import { DEVICE, blockKeys, delta, heartbeat, residency, residencyChanges, snapshot, tokens, wireInstance, wireStream } from '../unit/router/view-fixtures.js';

/** The next 'update' event carrying `version`. */
async function updateTo(client: ViewClient, version: bigint): Promise<void> {
  for (;;) {
    const [v] = (await once(client, 'update')) as [bigint];
    if (v === version) return;
  }
}

describe('architecture.md view stream: router ViewClient over real gRPC', () => {
  const servers: ScriptedDirectory[] = [];
  let client: ViewClient | null = null;
  let k: Uint8Array[];

  before(async () => {
    k = await blockKeys(tokens(8));
  });

  afterEach(async () => {
    await client?.close();
    client = null;
    for (const s of servers.splice(0)) s.stop();
  });

  async function directory(): Promise<ScriptedDirectory> {
    const s = await ScriptedDirectory.start();
    servers.push(s);
    return s;
  }

  function start(addrs: ScriptedDirectory[], over: Partial<ViewClientOptions> = {}): ViewClient {
    client = ViewClient.start({ directoryAddrs: addrs.map((a) => a.address), routerId: 'router-test', staleAfterMs: 3000, backoffBaseMs: 20, backoffMaxMs: 100, ...over });
    return client;
  }

  const base = (epoch: string, version: number): WireViewUpdate =>
    snapshot(epoch, version, [wireInstance('a:1')], [wireStream(1, 'a:1', residency([k[0]!], [DEVICE]))]);

  /** Serves `base(epoch, version)` on the client's next watch of `d`; resolves once the client is ready. */
  async function readyOn(d: ScriptedDirectory, c: ViewClient, epoch: string, version: number): Promise<Watch> {
    const w = await d.nextWatch();
    send(w, base(epoch, version));
    await c.whenReady();
    return w;
  }

  it('fresh watch: router_id, empty epoch and x-internal-token; snapshot makes it ready; deltas and heartbeats apply in order', async () => {
    const d = await directory();
    const c = start([d], { internalApiToken: 's3cret' });
    const w = await d.nextWatch();
    expect(w.req).to.deep.equal({ router_id: 'router-test', epoch: '', version: '0' });
    expect(w.token).to.equal('s3cret');
    send(w, base('e1', 5));
    await c.whenReady();
    expect(c.cache.query(tokens(8), Date.now()).matches[0]).to.include({ device_hit_tokens: 4 });
    send(w, delta('e1', 6, { residency: [residencyChanges(1, [k[1]!], [DEVICE])] }));
    send(w, heartbeat('e1', 6));
    await updateTo(c, 6n);
    expect(c.cache.query(tokens(8), Date.now()).matches[0]).to.include({ device_hit_tokens: 8 });
    expect(c.cache.version).to.equal(6n);
  });

  it('a broken stream resumes with (epoch, version), and the directory continues with deltas', async () => {
    const d = await directory();
    const c = start([d]);
    const w1 = await d.nextWatch();
    send(w1, base('e1', 5));
    send(w1, delta('e1', 6, { instance_upserts: [wireInstance('b:1')] }));
    await updateTo(c, 6n);
    w1.call.end();
    const w2 = await d.nextWatch();
    expect(w2.req).to.deep.equal({ router_id: 'router-test', epoch: 'e1', version: '6' });
    send(w2, delta('e1', 7, { residency: [residencyChanges(1, [k[1]!], [DEVICE])] }));
    await updateTo(c, 7n);
    expect(c.cache.instances().map((i) => i.name)).to.deep.equal(['a:1', 'b:1']);
    expect(c.cache.query(tokens(8), Date.now()).matches[0]!.device_hit_tokens).to.equal(8);
  });

  it('epoch change (directory restart): the snapshot of the new epoch replaces everything', async () => {
    const d = await directory();
    const c = start([d]);
    const w1 = await readyOn(d, c, 'e1', 5);
    w1.call.emit('error', { code: grpc.status.UNAVAILABLE, details: 'directory restarting' });
    const w2 = await d.nextWatch();
    expect(w2.req).to.include({ epoch: 'e1', version: '5' });
    send(w2, snapshot('e2', 1, [wireInstance('z:1')], [wireStream(4, 'z:1')]));
    await once(c, 'snapshot');
    expect(c.cache.epoch).to.equal('e2');
    expect(c.cache.instances().map((i) => i.name)).to.deep.equal(['z:1']);
    expect(c.cache.streams().map((s) => s.streamId)).to.deep.equal([4]);
  });

  it('a version gap is never applied: the client resubscribes fresh and takes the new snapshot', async () => {
    const d = await directory();
    const c = start([d]);
    const w1 = await readyOn(d, c, 'e1', 5);
    send(w1, delta('e1', 7, { instance_upserts: [wireInstance('x:1')] }));
    const w2 = await d.nextWatch();
    expect(w2.req).to.include({ epoch: '', version: '0' });
    expect(c.cache.instance('x:1')).to.equal(null);
    expect(c.cache.query(tokens(8), Date.now()).matches[0]!.error).to.equal(VIEW_STALE_ERROR);
    send(w2, base('e1', 9));
    await updateTo(c, 9n);
    expect(c.cache.isStale(Date.now(), 3000)).to.equal(false);
  });

  it('failover: an unreachable first address, then the second one serves the view', async () => {
    const dead = await directory();
    dead.stop(); // its port is now closed: connecting fails
    const live = await directory();
    const c = start([dead, live]);
    await readyOn(live, c, 'e1', 1);
    expect(c.currentAddress).to.equal(`127.0.0.1:${live.port}`);
  });

  it('failover: the serving directory goes away, the next address is asked to resume and answers with its own snapshot', async () => {
    const a = await directory();
    const b = await directory();
    const c = start([a, b]);
    await readyOn(a, c, 'eA', 3);
    a.stop();
    const wb = await b.nextWatch();
    expect(wb.req).to.include({ epoch: 'eA', version: '3' });
    send(wb, snapshot('eB', 40, [wireInstance('b:1')], []));
    await once(c, 'snapshot');
    expect(c.cache.epoch).to.equal('eB');
    expect(c.cache.version).to.equal(40n);
  });

  it('an update that cannot be applied (malformed residency) is not applied: the next address is asked for a snapshot', async () => {
    const a = await directory();
    const b = await directory();
    const c = start([a, b]);
    const wa = await readyOn(a, c, 'eA', 3);
    send(wa, delta('eA', 4, { instance_upserts: [wireInstance('x:1')], residency: [{ stream_id: 1, keys: new Uint8Array(20), tiers: Uint8Array.from([1]) }] }));
    const wb = await b.nextWatch();
    expect(wb.req).to.include({ epoch: '', version: '0' });
    expect(c.cache.instance('x:1')).to.equal(null);
    expect(c.cache.version).to.equal(3n);
    send(wb, snapshot('eB', 8, [wireInstance('b:1')], []));
    await once(c, 'snapshot');
    expect(c.cache.isStale(Date.now(), 3000)).to.equal(false);
  });

  it('staleness: a silent directory makes the view stale (no credit, "directory view stale") and the client watches again', async () => {
    const d = await directory();
    const c = start([d], { staleAfterMs: 300 });
    await readyOn(d, c, 'e1', 5);
    await once(c, 'stale');
    const m = c.cache.query(tokens(8), Date.now()).matches[0]!;
    expect(m).to.include({ synchronized: false, device_hit_tokens: 0, error: 'directory view stale' });
    const w2 = await d.nextWatch();
    expect(w2.req).to.include({ epoch: 'e1', version: '5' });
    send(w2, heartbeat('e1', 5));
    await once(c, 'connected');
    // The heartbeat is applied right after 'connected' is emitted: wait until it lands.
    while (c.cache.isStale(Date.now(), 300)) await new Promise((r) => setImmediate(r));
    expect(c.cache.query(tokens(8), Date.now()).matches[0]).to.include({ synchronized: true, device_hit_tokens: 4 });
  });

  it('close() before the first snapshot rejects whenReady with class "closed"', async () => {
    const d = await directory();
    const c = start([d]);
    await d.nextWatch();
    const ready = c.whenReady();
    await c.close();
    client = null;
    const err = await ready.then(() => null, (e: unknown) => e);
    expect(err).to.have.property('class', 'closed');
  });
});

/**
 * Against the real directory: engine simulator rank publisher ─ZMQ─▶ StreamSubscriber ─▶
 * ViewPublisher ─WatchView─▶ ViewClient. The router's query must converge to the directory's own
 * Query answer after live events, and the view must follow a replacement directory (new epoch)
 * at the second address.
 */
describe('architecture.md view stream: router ViewClient against the real directory WatchView', () => {
  const BLOCK = 4;
  const INSTANCE = 'engine-a:8000';
  let pub: RankPublisher | null = null;
  const views: ViewPublisher[] = [];
  const directories: Directory[] = [];
  const servers: DirectoryGrpcServer[] = [];
  let client: ViewClient | null = null;

  afterEach(async () => {
    await client?.close();
    client = null;
    for (const v of views.splice(0)) v.close();
    for (const s of servers.splice(0)) await s.close(500);
    for (const d of directories.splice(0)) await d.close();
    await pub?.close();
    pub = null;
  });

  async function realDirectory(p: RankPublisher): Promise<{ directory: Directory; server: DirectoryGrpcServer }> {
    const v = new ViewPublisher({ flushIntervalMs: 10 });
    views.push(v);
    const factory: DirectoryStreamFactory = (cfg, limits) => StreamSubscriber.create(cfg, limits, { random: () => 0 });
    const directory = new Directory({
      enabled: true,
      streamSource: 'static',
      maxStreams: 8,
      limits: { ...DEFAULT_STREAM_LIMITS, replayTimeoutMs: 2000, resyncIntervalMs: 0 },
      createStream: factory,
      trackers: [v],
    });
    directories.push(directory);
    await directory.addStream({ instanceName: INSTANCE, dpRank: 0, blockSize: BLOCK, endpoint: p.eventEndpoint, replayEndpoint: p.replayEndpoint, topic: '', hashSeed: 1024n });
    const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, view: v });
    servers.push(server);
    return { directory, server };
  }

  const storedEvent = (hashes: number[], parent: number | null, toks: number[], medium = 'gpu'): WireEvent => ({
    type: 'BlockStored', block_hashes: hashes, parent_block_hash: parent, token_ids: toks, block_size: BLOCK, medium,
  });

  it('the router query converges to the directory Query; a replacement directory at the next address replaces the view', async () => {
    pub = await RankPublisher.start({ eventPort: await freePort(), replayPort: await freePort(), dpRank: 0, blockSize: BLOCK, maxMessageBytes: 1 << 20 });
    const first = await realDirectory(pub);
    const second = await realDirectory(pub);
    const c = (client = ViewClient.start({
      directoryAddrs: [{ host: '127.0.0.1', port: first.server.port }, { host: '127.0.0.1', port: second.server.port }],
      routerId: 'router-real',
      staleAfterMs: 3000,
      backoffBaseMs: 20,
      backoffMaxMs: 100,
    }));
    await c.whenReady();
    await pub.waitForSubscribers(2);
    await pub.publish([storedEvent([1, 2, 3], null, tokens(12))]);
    await pub.publish([storedEvent([1, 2], null, [], 'cpu')]);
    const t = tokens(16);
    await waitFor(() => first.directory.query(t).matches[0]?.reusable_prefix_tokens === 12, 10_000, 'directory indexed the events');
    const want = first.directory.query(t);
    await waitFor(() => JSON.stringify(c.cache.query(t, Date.now())) === JSON.stringify(want), 10_000, 'router view equals the directory');
    expect(c.cache.query(t, Date.now())).to.deep.equal(want);
    expect(want.matches[0]).to.include({ device_hit_tokens: 12, device_blocks: 3, host_blocks: 2 });
    expect(c.cache.epoch).to.equal(views[0]!.epoch);

    // The first directory goes away: the second (another process lifetime, another epoch) is asked
    // to resume, answers with its snapshot, and the router's answer is that directory's.
    await first.server.close(0);
    views[0]!.close();
    await waitFor(() => c.cache.epoch === views[1]!.epoch, 10_000, 'view of the second directory');
    await waitFor(() => second.directory.query(t).matches[0]?.reusable_prefix_tokens === 12, 10_000, 'second directory indexed the events');
    const again = second.directory.query(t);
    await waitFor(() => JSON.stringify(c.cache.query(t, Date.now())) === JSON.stringify(again), 10_000, 'router view equals the second directory');
    expect(c.cache.isStale(Date.now(), 3000)).to.equal(false);
  });
});
