/**
 * architecture.md "The view stream" — the router's view cache: snapshot, every delta kind in the
 * proto's application order, stream resets superseding residency, version continuity (a gap is
 * never applied and asks for a snapshot), staleness (heartbeats count; a stale view gives no
 * credit and says "directory view stale"), and the routing.md query answer. Time is passed in.
 */
import { expect } from 'chai';
import { ViewCache, VIEW_STALE_ERROR } from '../../../router-svc/viewcache/view-cache.js';
import { ViewGapError, ViewProtocolError } from '../../../router-svc/viewcache/view-errors.js';
import { decodeViewUpdate } from '../../../router-svc/viewcache/view-update.js';
import { BOTH, DEVICE, HOST, apply, blockKeys, delta, heartbeat, residency, residencyChanges, snapshot, tokens, wireInstance, wireStream } from './view-fixtures.js';

const STALE_AFTER_MS = 3000;

describe('architecture.md view stream: router view cache', () => {
  let k: Uint8Array[];
  let cache: ViewCache;

  before(async () => {
    k = await blockKeys(tokens(16)); // 4 blocks of 4 tokens: k[0..3]
  });

  beforeEach(() => {
    cache = new ViewCache({ staleAfterMs: STALE_AFTER_MS });
  });

  /** A: k0 Device, k1 Host, k2 both (counts once, as Device); B: k0 Host only. */
  async function baseSnapshot(epoch = 'e1', version = 10): Promise<void> {
    await apply(
      cache,
      snapshot(epoch, version, [wireInstance('a:1'), wireInstance('b:1')], [
        wireStream(1, 'a:1', residency([k[0]!, k[1]!, k[2]!], [DEVICE, HOST, BOTH])),
        wireStream(2, 'b:1', residency([k[0]!], [HOST])),
      ]),
      0,
    );
  }

  it('before any snapshot the view is stale and has nothing to offer', () => {
    expect(cache.isStale(0, STALE_AFTER_MS)).to.equal(true);
    expect(cache.needsSnapshot).to.equal(true);
    expect(cache.query(tokens(8), 0)).to.deep.equal({ input_tokens: 8, block_size: 0, matches: [] });
  });

  it('snapshot: instances, streams and residency; §8 hits with a replica counted once, as Device', async () => {
    await baseSnapshot();
    expect(cache.epoch).to.equal('e1');
    expect(cache.version).to.equal(10n);
    expect(cache.isStale(100, STALE_AFTER_MS)).to.equal(false);
    expect(cache.instances().map((i) => i.name)).to.deep.equal(['a:1', 'b:1']);
    expect(cache.streamsOf('a:1').map((s) => s.streamId)).to.deep.equal([1]);
    const r = cache.query(tokens(16), 100);
    expect(r).to.deep.equal({
      input_tokens: 16,
      block_size: 4,
      matches: [
        // k0 D, k1 H, k2 D+H (Device), k3 absent: walk stops there.
        { instance_name: 'a:1', dp_rank: 0, synchronized: true, sequence: 7, device_hit_tokens: 8, host_only_hit_tokens: 4, reusable_prefix_tokens: 12, device_blocks: 2, host_blocks: 2, error: '', engine_kind: 'xllm' },
        { instance_name: 'b:1', dp_rank: 0, synchronized: true, sequence: 7, device_hit_tokens: 0, host_only_hit_tokens: 4, reusable_prefix_tokens: 4, device_blocks: 0, host_blocks: 1, error: '', engine_kind: 'xllm' },
      ],
    });
  });

  it('§8: an unsynchronized stream reports zero hits and blocks with its own error; an empty token list reports state and counts only', async () => {
    await apply(
      cache,
      snapshot('e1', 1, [wireInstance('a:1')], [
        wireStream(1, 'a:1', { ...residency([k[0]!], [DEVICE]), dp_rank: 0 }),
        wireStream(2, 'a:1', { ...residency([k[0]!], [DEVICE]), dp_rank: 1, synchronized: false, sequence: '-1', error: 'gap: expected 8, got 10' }),
      ]),
      0,
    );
    const r = cache.query(tokens(8), 1);
    expect(r.matches[1]).to.deep.equal({
      instance_name: 'a:1', dp_rank: 1, synchronized: false, sequence: -1, device_hit_tokens: 0, host_only_hit_tokens: 0, reusable_prefix_tokens: 0, device_blocks: 0, host_blocks: 0, error: 'gap: expected 8, got 10', engine_kind: 'xllm',
    });
    const empty = cache.query([], 1);
    expect(empty.matches[0]).to.include({ synchronized: true, device_hit_tokens: 0, device_blocks: 1 });
  });

  it('delta: every kind, applied in the proto order (removals before upserts, resets before incremental residency)', async () => {
    await baseSnapshot();
    await apply(
      cache,
      delta('e1', 11, {
        // Removed then upserted in the same delta: the upsert comes after, so it stays.
        instance_removals: ['a:1', 'b:1'],
        instance_upserts: [wireInstance('a:1', { state: 'LEASE_LOST' }), wireInstance('c:1')],
        // Stream 2 removed then upserted: the removal dropped its residency, the upsert keeps none.
        stream_removals: [2],
        stream_upserts: [wireStream(2, 'b:1', { sequence: '9' }), wireStream(1, 'a:1', { sequence: '8', synchronized: true })],
        // A new stream arrives by reset with k0 Device; incremental changes after it add k1 Host.
        stream_resets: [wireStream(3, 'c:1', residency([k[0]!], [DEVICE]))],
        residency: [residencyChanges(3, [k[1]!], [HOST]), residencyChanges(1, [k[1]!, k[2]!], [0, HOST])],
      }),
      5,
    );
    expect(cache.version).to.equal(11n);
    expect(cache.instances().map((i) => `${i.name}:${i.state}`)).to.deep.equal(['a:1:LEASE_LOST', 'c:1:ACTIVE']);
    expect(cache.tiersOf(2, k[0]!)).to.equal(0);
    // Stream 1's upsert kept its residency (state only); the residency change then removed k1
    // and left k2 on Host only.
    expect([cache.tiersOf(1, k[0]!), cache.tiersOf(1, k[1]!), cache.tiersOf(1, k[2]!)]).to.deep.equal([DEVICE, 0, HOST]);
    expect([cache.tiersOf(3, k[0]!), cache.tiersOf(3, k[1]!)]).to.deep.equal([DEVICE, HOST]);
    const r = cache.query(tokens(16), 6);
    expect(r.matches.map((m) => [m.instance_name, m.sequence, m.device_hit_tokens, m.host_only_hit_tokens, m.device_blocks, m.host_blocks])).to.deep.equal([
      ['a:1', 8, 4, 0, 1, 1],
      ['b:1', 9, 0, 0, 0, 0],
      ['c:1', 7, 4, 4, 1, 1],
    ]);
  });

  it('stream reset supersedes: the whole residency is replaced, earlier keys are gone', async () => {
    await baseSnapshot();
    await apply(cache, delta('e1', 11, { stream_resets: [wireStream(1, 'a:1', residency([k[3]!], [HOST]))] }), 1);
    expect([0, 1, 2].map((b) => cache.tiersOf(1, k[b]!))).to.deep.equal([0, 0, 0]);
    expect(cache.tiersOf(1, k[3]!)).to.equal(HOST);
    expect(cache.streamsOf('a:1')[0]).to.include({ deviceBlocks: 0, hostBlocks: 1 });
    expect(cache.query(tokens(16), 2).matches[0]!.reusable_prefix_tokens).to.equal(0);
  });

  it('a later snapshot replaces everything (epoch change after a directory restart)', async () => {
    await baseSnapshot('e1', 10);
    await apply(cache, snapshot('e2', 3, [wireInstance('z:1')], [wireStream(9, 'z:1', residency([k[0]!], [DEVICE]))]), 50);
    expect(cache.epoch).to.equal('e2');
    expect(cache.version).to.equal(3n);
    expect(cache.instances().map((i) => i.name)).to.deep.equal(['z:1']);
    expect(cache.streams().map((s) => s.streamId)).to.deep.equal([9]);
    expect(cache.tiersOf(1, k[0]!)).to.equal(0);
  });

  it('version gap: a delta that is not version + 1 is never applied, freshness is withdrawn until a snapshot', async () => {
    await baseSnapshot('e1', 10);
    const skip = decodeViewUpdate(delta('e1', 12, { instance_upserts: [wireInstance('x:1')] }));
    expect(() => cache.applyUpdate(skip, 1)).to.throw(ViewGapError).with.property('class', 'view_gap');
    expect(cache.instance('x:1')).to.equal(null);
    expect(cache.version).to.equal(10n);
    expect(cache.needsSnapshot).to.equal(true);
    expect(cache.isStale(2, STALE_AFTER_MS)).to.equal(true);
    // Even the delta that would have been next is refused now, and heartbeats prove nothing.
    expect(() => cache.applyUpdate(decodeViewUpdate(delta('e1', 11, {})), 2)).to.throw(ViewGapError);
    cache.applyUpdate(decodeViewUpdate(heartbeat('e1', 10)), 3);
    expect(cache.isStale(3, STALE_AFTER_MS)).to.equal(true);
    expect(cache.query(tokens(8), 3).matches[0]!.error).to.equal(VIEW_STALE_ERROR);
    await baseSnapshot('e1', 14);
    expect(cache.needsSnapshot).to.equal(false);
    expect(cache.isStale(4, STALE_AFTER_MS)).to.equal(false);
  });

  it('version gap: a delta of another epoch, and a heartbeat ahead of the view, are gaps', async () => {
    await baseSnapshot('e1', 10);
    expect(() => cache.applyUpdate(decodeViewUpdate(delta('e2', 11, {})), 1)).to.throw(ViewGapError);
    await baseSnapshot('e1', 10);
    expect(() => cache.applyUpdate(decodeViewUpdate(heartbeat('e1', 11)), 1)).to.throw(ViewGapError);
    expect(cache.needsSnapshot).to.equal(true);
  });

  it('atomic: a delta that cannot be applied whole (residency of an unknown stream) changes nothing', async () => {
    await baseSnapshot('e1', 10);
    const bad = decodeViewUpdate(delta('e1', 11, { instance_upserts: [wireInstance('x:1')], stream_removals: [1], residency: [residencyChanges(1, [k[3]!], [DEVICE])] }));
    expect(() => cache.applyUpdate(bad, 1)).to.throw(ViewProtocolError).with.property('class', 'view_protocol');
    expect(cache.instance('x:1')).to.equal(null);
    expect(cache.tiersOf(1, k[0]!)).to.equal(DEVICE);
    expect(cache.version).to.equal(10n);
  });

  it('snapshot parts: out of order or of another version are a protocol error that leaves the live view; a stream split over parts is joined', async () => {
    await baseSnapshot('e1', 10);
    const part = (index: number, last: boolean, version: number, streams: ReturnType<typeof wireStream>[]) =>
      decodeViewUpdate({ epoch: 'e2', version: String(version), body: 'snapshot_chunk', snapshot_chunk: { index, last, instances: index === 0 ? [wireInstance('a:1')] : [], streams }, sent_at_ms: '0' });
    expect(() => cache.applyUpdate(part(1, true, 20, []), 1)).to.throw(ViewProtocolError, /without part 0/);
    cache.applyUpdate(part(0, false, 20, [wireStream(7, 'a:1', residency([k[0]!], [DEVICE]))]), 1);
    expect(() => cache.applyUpdate(part(1, true, 21, []), 1)).to.throw(ViewProtocolError, /part 0 of e2\/20 was due|part 1 of e2\/20 was due/);
    expect([cache.epoch, cache.version, cache.tiersOf(1, k[0]!)]).to.deep.equal(['e1', 10n, DEVICE]);
    cache.applyUpdate(part(0, false, 20, [wireStream(7, 'a:1', residency([k[0]!], [DEVICE]))]), 1);
    cache.applyUpdate(part(1, true, 20, [wireStream(7, 'a:1', residency([k[1]!], [BOTH]))]), 1);
    expect([cache.epoch, cache.version, cache.tiersOf(7, k[0]!), cache.tiersOf(7, k[1]!), cache.tiersOf(1, k[0]!)]).to.deep.equal(['e2', 20n, DEVICE, BOTH, 0]);
    expect(cache.streams().map((s) => [s.instanceName, s.deviceBlocks, s.hostBlocks])).to.deep.equal([['a:1', 2, 1]]);
  });

  it('snapshot parts applied in steps (applyStep): the live view answers unchanged until the last step of the last part; anything else abandons a half-applied part', async () => {
    await baseSnapshot('e1', 10);
    const before = cache.query(tokens(16), 1);
    const part = (index: number, last: boolean, streams: ReturnType<typeof wireStream>[]) =>
      decodeViewUpdate({ epoch: 'e2', version: '20', body: 'snapshot_chunk', snapshot_chunk: { index, last, instances: index === 0 ? [wireInstance('a:1')] : [], streams }, sent_at_ms: '0' });
    const p0 = part(0, false, [wireStream(7, 'a:1', residency([], []))]);
    const p1 = part(1, true, [wireStream(7, 'a:1', residency([k[0]!, k[1]!, k[2]!], [DEVICE, DEVICE, HOST]))]);
    expect(cache.applyStep(p0, 1, 1)).to.equal(true);
    let steps = 0;
    while (!cache.applyStep(p1, 1, 1)) {
      steps++;
      expect([cache.epoch, cache.version]).to.deep.equal(['e1', 10n]);
      expect(cache.query(tokens(16), 1)).to.deep.equal(before);
    }
    expect(steps, 'steps before the last').to.equal(2);
    expect([cache.epoch, cache.version, cache.tiersOf(7, k[2]!)]).to.deep.equal(['e2', 20n, HOST]);
    expect(cache.query(tokens(16), 1).matches.map((m) => [m.instance_name, m.device_hit_tokens, m.host_only_hit_tokens])).to.deep.equal([['a:1', 8, 4]]);
    // A part left half applied, then a heartbeat: the assembly is dropped, a next part is out of order.
    const q0 = decodeViewUpdate({ epoch: 'e2', version: '30', body: 'snapshot_chunk', snapshot_chunk: { index: 0, last: false, instances: [], streams: [wireStream(8, 'a:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE]))] }, sent_at_ms: '0' });
    expect(cache.applyStep(q0, 1, 1)).to.equal(false);
    cache.applyUpdate(decodeViewUpdate(heartbeat('e2', 20)), 1);
    const q1 = decodeViewUpdate({ epoch: 'e2', version: '30', body: 'snapshot_chunk', snapshot_chunk: { index: 1, last: true, instances: [], streams: [] }, sent_at_ms: '0' });
    expect(() => cache.applyUpdate(q1, 1)).to.throw(ViewProtocolError, /without part 0/);
    expect([cache.version, cache.tiersOf(8, k[0]!)]).to.deep.equal([20n, 0]);
  });

  it('decoder: keys that are not 16 bytes per tier byte are a protocol error', () => {
    const w = delta('e1', 11, { residency: [{ stream_id: 1, keys: new Uint8Array(20), tiers: Uint8Array.from([1]) }] });
    expect(() => decodeViewUpdate(w)).to.throw(ViewProtocolError, /16 per tier byte/);
  });

  it('decoder: discovery.md defaults — MIX without a role acts as PREFILL, dp_size 0 means 1, no load report is null, 64-bit values exact', () => {
    const u = decodeViewUpdate(
      snapshot('e1', 1, [wireInstance('m:1', { type: 'MIX', current_role: '', dp_size: 0, load: null, generation: '18446744073709551615' })], [
        wireStream(1, 'm:1', { sequence: '9007199254740993', hash_seed: '18446744073709551615' }),
      ]),
    );
    if (u.kind !== 'snapshot') throw new Error('snapshot expected');
    expect(u.instances[0]).to.include({ currentRole: 'PREFILL', dpSize: 1, load: null, generation: 18446744073709551615n });
    expect(u.streams[0]).to.include({ sequence: 9007199254740993n, hashSeed: 18446744073709551615n });
    expect(() => decodeViewUpdate(snapshot('e1', 1, [wireInstance('x:1', { type: 'OTHER' })], []))).to.throw(ViewProtocolError, /unknown type/);
  });

  it('staleness: no message for view_stale_after_ms makes the view stale; heartbeats count', async () => {
    await baseSnapshot('e1', 10); // heard at 0
    expect(cache.isStale(STALE_AFTER_MS - 1, STALE_AFTER_MS)).to.equal(false);
    expect(cache.isStale(STALE_AFTER_MS, STALE_AFTER_MS)).to.equal(true);
    cache.applyUpdate(decodeViewUpdate(heartbeat('e1', 10)), 2500);
    expect(cache.lastHeardMs).to.equal(2500);
    expect(cache.isStale(STALE_AFTER_MS + 100, STALE_AFTER_MS)).to.equal(false);
  });

  it('stale view: every stream synchronized=false, zero hits and blocks, error "directory view stale"', async () => {
    await baseSnapshot('e1', 10);
    const r = cache.query(tokens(16), STALE_AFTER_MS + 1);
    expect(r.matches).to.have.length(2);
    for (const m of r.matches) {
      expect(m).to.deep.include({ synchronized: false, device_hit_tokens: 0, host_only_hit_tokens: 0, reusable_prefix_tokens: 0, device_blocks: 0, host_blocks: 0, error: 'directory view stale' });
    }
    // markStale withdraws credit at once; the next accepted message restores it.
    cache.applyUpdate(decodeViewUpdate(heartbeat('e1', 10)), 5000);
    cache.markStale('silent directory');
    expect(cache.query(tokens(16), 5001).matches[0]!.error).to.equal(VIEW_STALE_ERROR);
    cache.applyUpdate(decodeViewUpdate(heartbeat('e1', 10)), 5002);
    expect(cache.query(tokens(16), 5003).matches[0]!.device_hit_tokens).to.equal(8);
  });

  it('§4: the key chain is computed per (block_size, seed): streams with other block sizes and seeds match their own keys', async () => {
    const k8 = await blockKeys(tokens(16), 8, 1024);
    const s2048 = await blockKeys(tokens(16), 4, 2048);
    await apply(
      cache,
      snapshot('e1', 1, [wireInstance('a:1'), wireInstance('b:1'), wireInstance('c:1')], [
        wireStream(1, 'a:1', residency([k[0]!, k[1]!], [DEVICE, DEVICE])),
        wireStream(2, 'b:1', { ...residency([k8[0]!, k8[1]!], [DEVICE, HOST]), block_size: 8 }),
        wireStream(3, 'c:1', { ...residency([s2048[0]!], [DEVICE]), hash_seed: '2048' }),
      ]),
      0,
    );
    const r = cache.query(tokens(16), 1);
    expect(r.block_size).to.equal(0);
    expect(r.matches.map((m) => [m.device_hit_tokens, m.host_only_hit_tokens])).to.deep.equal([
      [8, 0],
      [8, 8],
      [4, 0],
    ]);
  });
});
