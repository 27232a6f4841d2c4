/**
 * kvcm-meta §9.4 scenarios R1–R5: two real meta-svc processes on one real redis-server
 * (free loopback port, persistence off), each answering any RPC.
 *
 *   test ──HTTP──▶ meta-svc A ──┐
 *        ──HTTP──▶ meta-svc B ──┴──▶ redis-server
 *
 * The test reads Redis itself only to see that A's snapshot holds the gate (R3) before it sends
 * B a delta; every assertion is on the RPC answers.
 */
import { expect } from 'chai';
import { Redis } from 'ioredis';
import { MetaProcess } from '../helpers/meta-process.js';
import { flushAll } from '../helpers/meta-stores.js';
import { waitFor } from '../helpers/ports.js';
import { RedisServer } from '../helpers/redis-server.js';

// `any`: loosely typed response JSON read by the assertions.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Json = any;

const I = 'test_instance';
const L2 = 'ST_EVENT_REPORT_L2';
const code = (r: Json): string => r.header.status.code;
const add = (key: number, tag = 'u'): Json => ({
  event_type: 'EVENT_BLOCK_ADD',
  block_add: { block_key: String(key), medium: 'gpu', specs: [{ name: 'tp0', uri: `event_report://h/${tag}/${key}` }] },
});
const report = (host: string, events: Json[]): Json => ({ instance_id: I, host_ip_port: host, storage_type: L2, events });

describe('kvcm-meta §9.4 two replicas on one Redis (R1–R5)', function () {
  this.timeout(90000);
  let redis: RedisServer;
  let a: MetaProcess | null = null;
  let b: MetaProcess | null = null;

  before(async () => {
    redis = await RedisServer.start();
  });
  after(async () => {
    await redis.destroy();
  });
  beforeEach(async () => {
    await flushAll(redis.port);
    // A first, so A holds the background lease (R4).
    a = await MetaProcess.start(redis.url(), ['--node_id=replica-a']);
    b = await MetaProcess.start(redis.url(), ['--node_id=replica-b']);
  });
  afterEach(async () => {
    await Promise.all([a?.kill(), b?.kill()]);
    a = b = null;
  });

  /** The keys' found locations (QT_BATCH_GET answers a missing key with an ST_UNSPECIFIED placeholder). */
  const locations = async (p: MetaProcess, keys: number[]): Promise<Json[]> =>
    (await p.call('getCacheLocation', { instance_id: I, block_keys: keys, query_type: 'QT_BATCH_GET' })).locations.filter((l: Json) => l.type !== 'ST_UNSPECIFIED');

  it('R1 a write on A is read on B: registration, a write session finished on B, reportEvent deltas', async () => {
    const registerR1 = (p: MetaProcess, userData: string): Promise<Json> =>
      p.call('registerInstance', {
        instance_group: 'test_group',
        instance_id: 'r1',
        block_size: 8,
        location_spec_infos: [{ name: 'tp0', size: 16 }],
        model_deployment: { model_name: 'm', user_data: userData },
      });
    expect(code(await registerR1(a!, 'v1'))).to.equal('OK');
    expect((await b!.call('getInstanceInfo', { instance_id: 'r1' })).instance_info.model_deployment.user_data).to.equal('v1');
    // A mutable field changed on B is seen on A (no stale registration cache).
    expect(code(await registerR1(b!, 'v2'))).to.equal('OK');
    expect((await a!.call('getInstanceInfo', { instance_id: 'r1' })).instance_info.model_deployment.user_data).to.equal('v2');

    const open = await a!.call('startWriteCache', { instance_id: I, block_keys: [1, 2] });
    expect(code(open)).to.equal('OK');
    const fin = await b!.call('finishWriteCache', { instance_id: I, write_session_id: open.write_session_id, success_blocks: { offset: 2 } });
    expect(code(fin)).to.equal('OK');
    expect(code(await a!.call('finishWriteCache', { instance_id: I, write_session_id: open.write_session_id, success_blocks: { offset: 2 } }))).to.equal('INVALID_ARGUMENT');
    expect(await locations(b!, [1, 2])).to.have.length(2);

    const r = await a!.call('reportEvent', report('10.0.0.1:1', [add(100), add(101)]));
    expect(code(r)).to.equal('OK');
    // B knows the reporter (shared registry, same generation) and shows its locations.
    expect((await locations(b!, [100, 101])).length).to.equal(2);
    const hb = await b!.call('reportEvent', report('10.0.0.1:1', [{ event_type: 'EVENT_HEARTBEAT', heartbeat: {} }]));
    expect(hb.committed_snapshot_version).to.equal(r.committed_snapshot_version);
  });

  it('R2 SIGKILL of A under reportEvent and lookup traffic: every acknowledged write is readable on B, retries on B lose nothing', async () => {
    const host = '10.0.0.2:1';
    const acked = new Set<number>();
    const sent: number[] = [];
    let stop = false;
    let next = 1;
    // Writers: 4 concurrent clients of A, 50 keys per request, until A dies.
    const writer = async (): Promise<void> => {
      while (!stop) {
        const keys = Array.from({ length: 50 }, () => next++);
        sent.push(...keys);
        const res = await fetch(`${a!.url}/api/reportEvent`, { method: 'POST', body: JSON.stringify(report(host, keys.map((k) => add(k)))) }).catch(() => null);
        if (res === null || res.status !== 200) return;
        const body = (await res.json()) as Json;
        if (code(body) === 'OK') for (const k of keys) acked.add(k);
      }
    };
    // Readers on B meanwhile.
    let lookups = 0;
    const reader = async (): Promise<void> => {
      while (!stop) {
        const r = await b!.call('getCacheLocation', { instance_id: I, block_keys: [1, 2, 3], query_type: 'QT_BATCH_GET' });
        expect(code(r)).to.equal('OK');
        lookups++;
      }
    };
    const writers = [writer(), writer(), writer(), writer()];
    const readers = [reader(), reader()];
    await waitFor(() => acked.size >= 2000, 60000, '2000 acknowledged keys');
    await a!.kill();
    await Promise.all(writers);
    stop = true;
    await Promise.all(readers);
    expect(lookups).to.be.greaterThan(0);

    // The client retries every unacknowledged key on B.
    const unacked = sent.filter((k) => !acked.has(k));
    for (let i = 0; i < unacked.length; i += 500) {
      const r = await b!.call('reportEvent', report(host, unacked.slice(i, i + 500).map((k) => add(k))));
      expect(code(r)).to.equal('OK');
    }
    const all = [...sent].sort((x, y) => x - y);
    let found = 0;
    for (let i = 0; i < all.length; i += 1000) found += (await locations(b!, all.slice(i, i + 1000))).length;
    expect(found).to.equal(all.length);
  });

  it('R3 a snapshot on A holds back the same reporter\'s delta on B until it commits; the delta then writes under the new generation', async () => {
    const host = '10.0.0.3:1';
    const first = await a!.call('reportEvent', report(host, [add(1)]));
    expect(code(first)).to.equal('OK');
    const watcher = new Redis({ host: '127.0.0.1', port: redis.port });
    try {
      const marker = `kvcm:{default}:rep:snap:${I}\u00008\u0000${host}`;
      // A big snapshot, so it is still writing when B's delta arrives.
      const blocks = Array.from({ length: 40000 }, (_, i) => ({ block_key: String(1000 + i), medium: 'gpu', specs: [{ name: 'tp0', uri: `event_report://h/s/${i}` }] }));
      const snap = a!.call('reportEvent', report(host, [{ event_type: 'EVENT_BLOCK_SNAPSHOT', block_snapshot: { blocks } }]));
      await waitFor(async () => (await watcher.exists(marker)) === 1, 30000, 'A\'s snapshot holding the gate');
      const delta = await b!.call('reportEvent', report(host, [add(7, 'd')]));
      const s = await snap;
      expect(code(s)).to.equal('OK');
      expect(code(delta)).to.equal('OK');
      expect(delta.committed_snapshot_version).to.equal(s.committed_snapshot_version);
      expect(s.committed_snapshot_version).to.not.equal(first.committed_snapshot_version);
      const [loc] = await locations(b!, [7]);
      expect(loc.location_specs[0].uri).to.equal(`event_report://h/d/7?s_version=${s.committed_snapshot_version}`);
      // Key 1 was not in the snapshot: hidden at once (strict mode).
      expect(await locations(b!, [1])).to.have.length(0);
    } finally {
      watcher.disconnect();
    }
  });

  it('R4 the background lease moves to B when A dies; B then expires A\'s abandoned write session', async () => {
    const held = async (p: MetaProcess): Promise<number> => {
      const text = await (await fetch(`${p.url}/metrics`)).text();
      const m = /^kvcm_background_lease_held (\d)$/m.exec(text);
      return m === null ? -1 : Number(m[1]);
    };
    await waitFor(async () => (await held(a!)) === 1, 10000, 'A holds the lease');
    expect(await held(b!)).to.equal(0);
    const open = await a!.call('startWriteCache', { instance_id: I, block_keys: [50], write_timeout_seconds: 1 });
    expect(code(open)).to.equal('OK');
    await a!.kill();
    await waitFor(async () => (await held(b!)) === 1, 20000, 'B takes the lease over');
    await waitFor(
      async () => (await b!.call('getCacheMetaDetail', { instance_id: I, block_keys: [50] })).items[0].locations.every((l: Json) => l.status === 'CLS_NOT_FOUND'),
      20000,
      'A\'s expired session swept by B',
    );
  });

  it('R5 Redis restart: SERVICE_NOT_READY and /health store_unavailable meanwhile, then both replicas serve again without a restart', async () => {
    await redis.stop();
    for (const p of [a!, b!]) {
      await waitFor(async () => (await fetch(`${p.url}/health`)).status === 503, 20000, '/health 503');
      expect(await (await fetch(`${p.url}/health`)).json()).to.deep.equal({ status: 'store_unavailable' });
      expect(code(await p.call('getCacheLocation', { instance_id: I, block_keys: [1] }))).to.equal('SERVICE_NOT_READY');
    }
    await redis.restart();
    for (const p of [a!, b!]) await waitFor(async () => (await fetch(`${p.url}/health`)).status === 200, 20000, '/health 200 again');
    // Persistence is off in the test, so Redis came back empty: register again and write.
    const reg = await b!.call('registerInstance', {
      instance_group: 'test_group',
      instance_id: I,
      block_size: 8,
      location_spec_infos: [{ name: 'tp0', size: 4096000 }],
    });
    expect(code(reg)).to.equal('OK');
    const open = await a!.call('startWriteCache', { instance_id: I, block_keys: [9] });
    expect(code(open)).to.equal('OK');
    expect(code(await b!.call('finishWriteCache', { instance_id: I, write_session_id: open.write_session_id, success_blocks: { offset: 1 } }))).to.equal('OK');
    expect(await locations(a!, [9])).to.have.length(1);
  });
});
