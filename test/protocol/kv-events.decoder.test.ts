// kv-events §12 "Decoder and framing" D1–D9 at the stream level: the engine simulator's rank
// publisher sends real three-frame messages over TCP ZeroMQ, a real StreamSubscriber decodes
// and indexes them, and the suite asserts what the stream does (state, error class, sequence,
// counters) and what a routing.md query returns. Byte-level cases of the pure decoder live in
// test/unit/decoder/; here every case crosses the socket.
//
//   StreamSubscriber SUB  ◀──[topic, seq, payload]──  XPUB  RankPublisher
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER  (recovery after each injected fault)
//
// Faults go out through publishFault/publishPayload/publishRaw, which leave the publisher's
// modelled state alone, so the recovery that follows each fault restores the truthful state.
// No timing assertions: waits are on states, counters and sequences.
import { expect } from 'chai';
import { encode } from '@msgpack/msgpack';
import { WireEncoder, u64be } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { waitFor } from '../helpers/ports.js';
import { keyIdentity } from '../../shared/keys/cache-identity.js';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import { ARRAY_BATCH_WITH_MAP_EVENT, MAP_BATCH, MAP_EVENT, POSITIONAL_BATCH, concatBytes as concat, specBytes } from '../helpers/spec-bytes.js';
import {
  OpenRigs,
  StreamRig,
  blockTokens,
  chainTokens,
  cleared,
  queryStreams,
  replica,
  stableClock,
  stored,
  type StreamRigOptions,
} from '../helpers/stream-harness.js';

const utf8 = (s: string): Uint8Array => new TextEncoder().encode(s);

// §4 first vector (seed 1024, block_size 4, tokens 1..8) as stored: low64 LE || high64 LE.
const K0 = specBytes('b0c6037e37a15e2d e8d8689c759e965f');
const K1 = specBytes('94600a4a64fa896e 3c6f4572bb0437f0');

const TOKENS_1_8 = chainTokens(0, 2);

/** A map-form BlockStored whose hash and parent are given as raw wire bytes (§3.3 forms). */
function rawHashStored(hashBytes: string, parentBytes: string, tokens: number[], medium: string): Uint8Array {
  return concat(
    specBytes('86 a4 "type" ab "BlockStored" ac "block_hashes" 91'),
    specBytes(hashBytes),
    specBytes('b1 "parent_block_hash"'),
    specBytes(parentBytes),
    specBytes('a9 "token_ids"'),
    encode(tokens),
    specBytes('aa "block_size" 04 a6 "medium"'),
    encode(medium),
  );
}

const encoder = new WireEncoder();

function batchOf(events: Uint8Array[], dpRank: number | null = 0): Uint8Array {
  return encoder.encodeBatch(1700000000.5, events, dpRank);
}

describe('kv-events §12 decoder and framing (D1–D9) over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();
  // faultThenRecover demands exactly one recovery per fault: a snapshot fetch slower than the
  // harness's 300 ms replay timeout on a loaded host would add a retry. No test here times one out.
  const open = (opts?: StreamRigOptions): Promise<StreamRig> => rigs.open({ ...opts, limits: { replayTimeoutMs: 3000, ...opts?.limits } });

  afterEach(() => rigs.closeAll());

  it('D1 the three §3.5 encodings index identically; a batch mixing both event forms applies in order', async () => {
    expect([POSITIONAL_BATCH.length, MAP_EVENT.length, ARRAY_BATCH_WITH_MAP_EVENT.length, MAP_BATCH.length]).to.deep.equal([44, 95, 107, 136]);
    const [a, b, c] = [await open({ instanceName: 'a' }), await open({ instanceName: 'b' }), await open({ instanceName: 'c' })];
    await Promise.all([a, b, c].map((r) => r.startSynchronized()));
    await a.pub.publishPayload(POSITIONAL_BATCH);
    await b.pub.publishPayload(ARRAY_BATCH_WITH_MAP_EVENT);
    await c.pub.publishPayload(MAP_BATCH);
    await Promise.all([a, b, c].map((r) => r.atSequence(0n)));
    for (const r of [a, b, c]) {
      expect(r.query(TOKENS_1_8)).to.deep.equal({
        instance_name: r.sub.config.instanceName,
        dp_rank: 0,
        engine_kind: 'xllm',
        synchronized: true,
        sequence: 0,
        device_hit_tokens: 8,
        host_only_hit_tokens: 0,
        reusable_prefix_tokens: 8,
        device_blocks: 2,
        host_blocks: 0,
        error: '',
      });
      expect([r.residencyOf(K0), r.residencyOf(K1)]).to.deep.equal([1, 1]);
    }
    // Same engine hashes, same tier sets, same keys (§7.5's definition of equal indexes).
    expect(a.sub.index?.sameStateAs(b.sub.index!)).to.equal(true);
    expect(b.sub.index?.sameStateAs(c.sub.index!)).to.equal(true);

    // Mixed forms in one batch; only in-order application leaves 11 on both tiers and 12 gone.
    await a.apply([
      cleared(),
      ['BlockStored', [21], null, blockTokens(10), 4, null, 'gpu'],
      stored([22], 21, blockTokens(11)),
      ['BlockRemoved', [22], 'gpu'],
      replica([21], 'cpu'),
    ]);
    const m = a.query(chainTokens(10, 2));
    expect([m.device_hit_tokens, m.host_only_hit_tokens, m.device_blocks, m.host_blocks]).to.deep.equal([4, 0, 1, 1]);
    expect(a.sub.index?.recordCount).to.equal(1);
  });

  it('D2 positional BlockStored with 5 elements is in scope on Device; unknown keys and extra elements are ignored', async () => {
    const rig = await open();
    await rig.startSynchronized();
    await rig.apply([['BlockStored', [11], null, blockTokens(0), 4]]);
    let m = rig.query(blockTokens(0));
    expect([m.device_hit_tokens, m.device_blocks, m.host_blocks]).to.deep.equal([4, 1, 0]);
    expect(rig.sub.counters.skipped.outOfScope).to.equal(0);
    // cache-identity §4 made group_idx, kv_cache_spec_kind (and, positionally, elements 9–12)
    // fields: group 0 of a reusable kind is the group this stream indexes. Unknown keys (ownership,
    // session_id) and elements after locality stay ignored.
    await rig.apply([
      { ...stored([12], 11, blockTokens(1)), group_idx: 0, kv_cache_spec_kind: 'full_attention', ownership: 'x', session_id: 's' },
      ['BlockStored', [13], 12, blockTokens(2), 4, null, 'cpu', null, null, null, null, null, null, 'trailing', 42],
    ]);
    m = rig.query(chainTokens(0, 3));
    expect([m.device_hit_tokens, m.host_only_hit_tokens, m.device_blocks, m.host_blocks]).to.deep.equal([8, 4, 2, 1]);
    await rig.apply([['BlockRemoved', [13], 'cpu', null, null, 'trailing']]);
    m = rig.query(chainTokens(0, 3));
    expect([m.device_hit_tokens, m.host_only_hit_tokens, m.host_blocks]).to.deep.equal([8, 0, 0]);
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('D3 every §3.3 hash row names the same record in any form; a uint64 above 2^53 stays exact', async () => {
    const rig = await open();
    await rig.startSynchronized();
    // [stored form, forms of the same engine hash used by later tokenless notices]
    const rows: [string, string[]][] = [
      ['0b', ['cf 00 00 00 00 00 00 00 0b']],
      ['cf ff ff ff ff ff ff ff fe', ['d3 ff ff ff ff ff ff ff fe', 'fe']],
      ['c4 02 12 34', ['cd 12 34']],
      ['c4 10 00 01 02 03 04 05 06 07 08 09 0a 0b 0c 0d 0e 0f', ['cf 08 09 0a 0b 0c 0d 0e 0f']],
      ['c4 00', ['00']],
    ];
    for (let i = 0; i < rows.length; i++) {
      const [storedForm, others] = rows[i];
      const events = [rawHashStored(storedForm, 'c0', blockTokens(i), 'gpu')];
      // A tokenless notice for an unknown hash is `inconsistent`: accepted means same hash.
      for (const f of others) events.push(concat(specBytes('84 a4 "type" ab "BlockStored" ac "block_hashes" 91'), specBytes(f), specBytes('a9 "token_ids" 90 a6 "medium" a3 "cpu"')));
      const seq = await rig.pub.publishPayload(batchOf(events));
      await rig.atSequence(seq);
      const m = rig.query(blockTokens(i));
      expect([m.device_hit_tokens, m.host_only_hit_tokens], `row ${i}`).to.deep.equal([4, 0]);
      expect([m.device_blocks, m.host_blocks], `row ${i}`).to.deep.equal([i + 1, i + 1]);
    }
    // A parent given as int64 −2 chains on the record stored as uint64 0xff..fe.
    const seq = await rig.pub.publishPayload(batchOf([rawHashStored('cd 99 99', 'd3 ff ff ff ff ff ff ff fe', blockTokens(9), 'gpu')]));
    await rig.atSequence(seq);
    expect(rig.query([...blockTokens(1), ...blockTokens(9)]).device_hit_tokens).to.equal(8);
    // 0xff..ff and 0xff..fe are the same double: only an exact decoder finds 0xff..ff unknown.
    await rig.pub.publishPayload(batchOf([concat(specBytes('84 a4 "type" ab "BlockStored" ac "block_hashes" 91 cf ff ff ff ff ff ff ff ff'), specBytes('a9 "token_ids" 90 a6 "medium" a3 "cpu"'))]));
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.errorClass()).to.equal('inconsistent');
    expect(rig.sub.error).to.contain('0xffffffffffffffff');
  });

  it('D4 media GPU, Gpu, cpu, CPU normalize and nil means Device; disk, "" and 7 → parse', async () => {
    const rig = await open({ nowMs: stableClock() });
    await rig.startSynchronized();
    await rig.apply([stored([1], null, blockTokens(0), 'GPU'), stored([2], 1, blockTokens(1), 'Gpu')]);
    await rig.apply([replica([1, 2], 'cpu')]);
    let m = rig.query(chainTokens(0, 3));
    expect([m.device_blocks, m.host_blocks]).to.deep.equal([2, 2]);
    await rig.apply([{ type: 'BlockRemoved', block_hashes: [2], medium: 'CPU' }, { ...stored([3], 2, blockTokens(2)), medium: null }]);
    m = rig.query(chainTokens(0, 3));
    expect([m.device_hit_tokens, m.host_only_hit_tokens, m.device_blocks, m.host_blocks]).to.deep.equal([12, 0, 3, 1]);
    // Positional BlockRemoved with its medium missing: nil → Device.
    await rig.apply([['BlockRemoved', [3]]]);
    const expected = rig.query(chainTokens(0, 3));
    expect([expected.device_hit_tokens, expected.device_blocks, expected.host_blocks]).to.deep.equal([8, 2, 1]);

    const bad: WireEvent[][] = [
      [stored([9], null, blockTokens(9), 'disk')],
      [{ type: 'BlockRemoved', block_hashes: [1], medium: '' }],
      [{ type: 'AllBlocksCleared', medium: 7 } as unknown as WireEvent],
    ];
    for (const events of bad) {
      const error = await rig.faultThenRecover('parse', () => rig.publishFault(events));
      expect(error).to.match(/^parse: /);
      // Recovery restored the publisher's (truthful) state, not any part of the bad batch.
      const now = rig.query(chainTokens(0, 3));
      expect({ ...now, sequence: 0 }).to.deep.equal({ ...expected, sequence: 0 });
    }
    expect(rig.sub.counters.syncLost.parse).to.equal(3);
  });

  it('D5 garbage, truncated or trailing MessagePack, 2 or 4 frames, a 7- or 9-byte seq → parse', async () => {
    const rig = await open({ topic: 'xllm-kv', nowMs: stableClock() });
    await rig.startSynchronized();
    await rig.apply([stored([1], null, blockTokens(0))]);
    const topic = utf8('xllm-kv');
    const nextSeq = (): Uint8Array => u64be(rig.pub.nextSeq);
    const faults: [string, () => Promise<unknown>][] = [
      ['garbage', () => rig.pub.publishPayload(specBytes('c1 ff 00 13 37'))],
      ['truncated', () => rig.pub.publishPayload(POSITIONAL_BATCH.subarray(0, 30))],
      ['trailing bytes', () => rig.pub.publishPayload(concat(POSITIONAL_BATCH, specBytes('00')))],
      ['2 frames', () => rig.pub.publishRaw([topic, nextSeq()])],
      ['4 frames', () => rig.pub.publishRaw([topic, nextSeq(), POSITIONAL_BATCH, specBytes('00')])],
      ['7-byte seq', () => rig.pub.publishRaw([topic, nextSeq().subarray(1), POSITIONAL_BATCH])],
      ['9-byte seq', () => rig.pub.publishRaw([topic, concat(specBytes('00'), nextSeq()), POSITIONAL_BATCH])],
    ];
    for (const [what, inject] of faults) {
      const error = await rig.faultThenRecover('parse', inject);
      expect(error, what).to.match(/^parse: /);
      expect(rig.query(blockTokens(0)).device_hit_tokens, what).to.equal(4);
    }
    expect(rig.sub.counters.syncLost.parse).to.equal(faults.length);
    // While UNSYNCHRONIZED the query reported no hits (sampled on every state event).
    const unsynced = rig.samples.filter((s) => s.state !== 'SYNCHRONIZED');
    expect(unsynced.length).to.be.greaterThan(0);
  });

  it('D6 topic xllm-kv2 on a stream configured xllm-kv is ignored and counted; state and sequence unchanged', async () => {
    const rig = await open({ topic: 'xllm-kv' });
    await rig.startSynchronized();
    await rig.apply([stored([1], null, blockTokens(0))]);
    // The SUB filter is a prefix match, so these arrive and must be dropped by the exact check
    // (§2 check 1) before any decode or seq check: a valid batch at the next seq, garbage at a
    // seq that would be a gap, and a message with the wrong frame count.
    const next = rig.pub.nextSeq;
    const valid = batchOf([encoder.encodeEvent(stored([2], 1, blockTokens(1)))]);
    await rig.pub.publishPayload(valid, { topic: 'xllm-kv2', seq: next, consumeSeq: false });
    await rig.pub.publishPayload(specBytes('c1 c1'), { topic: 'xllm-kv2', seq: next + 10n, consumeSeq: false });
    await rig.pub.publishRaw([utf8('xllm-kv2'), specBytes('01')]);
    await waitFor(() => rig.sub.counters.topicMismatch === 3, 5000, 'three topic mismatches');
    expect(rig.sub.state).to.equal('SYNCHRONIZED');
    expect(rig.sub.sequence).to.equal(0n);
    // The next batch on the right topic takes the seq the ignored one carried.
    const seq = await rig.apply([stored([3], 1, blockTokens(2))]);
    expect(seq).to.equal(next);
    expect(rig.query(chainTokens(0, 2)).device_hit_tokens).to.equal(4);
    expect(rig.query([...blockTokens(0), ...blockTokens(2)]).device_hit_tokens).to.equal(8);
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(rig.sub.counters.batchesApplied).to.equal(2);
  });

  it('D7 unknown type BlockMoved, a non-string tag, or a map without "type" → parse; the batch is not applied', async () => {
    const rig = await open({ nowMs: stableClock() });
    await rig.startSynchronized();
    await rig.apply([stored([1], null, blockTokens(0))]);
    const faults: WireEvent[][] = [
      // A good event first: the whole batch is rejected, never partly served (§5.2).
      [stored([5], null, blockTokens(5)), { type: 'BlockMoved', block_hashes: [1] } as unknown as WireEvent],
      [['BlockMoved', [1]]],
      [{ type: 7, block_hashes: [1] } as unknown as WireEvent],
      [[7, [1]]],
      [{ block_hashes: [1], medium: 'gpu' } as unknown as WireEvent],
    ];
    for (const events of faults) {
      const error = await rig.faultThenRecover('parse', () => rig.publishFault(events));
      expect(error).to.match(/^parse: /);
      expect(rig.query(blockTokens(5)).device_hit_tokens).to.equal(0);
      expect(rig.query(blockTokens(0)).device_hit_tokens).to.equal(4);
    }
  });

  it('D8 dp_rank different, nil or missing → protocol; token id 2^31 → parse; max_message_bytes + 1 → limit; that stream only', async () => {
    const rig = await open({ instanceName: 'engine-a', nowMs: stableClock() });
    const sibling = await open({ instanceName: 'engine-b' });
    await Promise.all([rig.startSynchronized(), sibling.startSynchronized()]);
    await rig.apply([stored([1], null, blockTokens(0))]);
    await sibling.apply([stored([1], null, blockTokens(0)), stored([2], 1, blockTokens(1))]);
    const siblingBefore = sibling.query(chainTokens(0, 2));
    const event = encoder.encodeEvent(stored([7], 1, blockTokens(7)));

    const cases: [string, string, () => Promise<unknown>][] = [
      ['dp_rank 1', 'protocol', () => rig.publishFault([stored([7], 1, blockTokens(7))], { dpRank: 1 })],
      ['dp_rank nil', 'protocol', () => rig.publishFault([stored([7], 1, blockTokens(7))], { dpRank: null })],
      ['dp_rank missing (array)', 'protocol', () => rig.pub.publishPayload(concat(specBytes('92 cb 41 d9 54 fc 40 20 00 00 91'), event))],
      ['dp_rank missing (map)', 'protocol', () => rig.pub.publishPayload(concat(specBytes('82 a2 "ts" cb 41 d9 54 fc 40 20 00 00 a6 "events" 91'), event))],
      ['token id 2^31', 'parse', () => rig.publishFault([stored([7], 1, [2 ** 31, 2, 3, 4])])],
    ];
    for (const [what, cls, inject] of cases) {
      const error = await rig.faultThenRecover(cls, inject);
      expect(error.startsWith(`${cls}: `), `${what}: ${error}`).to.equal(true);
    }

    // A payload of exactly max_message_bytes is applied; one byte more is `limit` (§2 check 3).
    const max = rig.sub.limits.maxMessageBytes;
    const padded = (padBytes: number, hash: number): WireEvent => ({ ...stored([hash], 1, blockTokens(hash)), pad: new Uint8Array(padBytes) });
    const sizeWithPad = (padBytes: number): number => batchOf([encoder.encodeEvent(padded(padBytes, 8))]).length;
    const pad = 1000 + (max - sizeWithPad(1000));
    expect(sizeWithPad(pad)).to.equal(max);
    await rig.apply([padded(pad, 8)]);
    expect(rig.query([...blockTokens(0), ...blockTokens(8)]).device_hit_tokens).to.equal(8);
    const error = await rig.faultThenRecover('limit', () => rig.publishFault([padded(pad + 1, 9)]));
    expect(error).to.equal(`limit: max_message_bytes ${max} exceeded`);
    expect(rig.query([...blockTokens(0), ...blockTokens(9)]).device_hit_tokens).to.equal(4);

    // The sibling stream never noticed.
    expect(sibling.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(sibling.query(chainTokens(0, 2))).to.deep.equal(siblingBefore);
    expect(queryStreams([rig, sibling], chainTokens(0, 2)).matches.map((m) => m.synchronized)).to.deep.equal([true, true]);
  });

  it('D9 (as cache-identity §4 replaced it) a non-nil lora_name is indexed under its identity; lora_id alone and extra_keys [[5]] are skipped and counted; extra_keys [nil] is indexed', async () => {
    const rig = await open();
    await rig.startSynchronized();
    const skipped = (): number[] => [rig.sub.counters.skipped.outOfScope, rig.sub.counters.skipped.multimodal ?? 0];
    await rig.apply([{ ...stored([21], null, blockTokens(0)), lora_name: 'adapter-a' }]);
    expect(skipped()).to.deep.equal([0, 0]);
    await rig.apply([{ ...stored([22], null, blockTokens(1)), lora_id: 7 }]);
    expect(skipped()).to.deep.equal([1, 0]);
    await rig.apply([{ ...stored([23], null, blockTokens(2)), extra_keys: [[5]] }]);
    expect(skipped()).to.deep.equal([1, 1]);
    // Counted per block: lora_id without a name on a two-block event.
    await rig.apply([{ ...stored([26, 27], null, chainTokens(4, 2)), lora_id: 8 }]);
    expect(skipped()).to.deep.equal([3, 1]);
    // None of them credits a plain request; the named LoRA's block credits its own requests only.
    for (const b of [0, 1, 2, 4]) expect(rig.query(blockTokens(b)).device_hit_tokens, `block ${b}`).to.equal(0);
    const lora = new StreamQuery().query(blockTokens(0), [rig.sub.toQueryable()], keyIdentity('adapter-a', null)).matches[0]!;
    expect(lora.device_hit_tokens).to.equal(4);
    let m = rig.query(blockTokens(0));
    expect([m.synchronized, m.device_blocks, m.host_blocks]).to.deep.equal([true, 1, 0]);

    await rig.apply([{ ...stored([24], null, blockTokens(3)), extra_keys: [null] }]);
    expect(skipped()).to.deep.equal([3, 1]);
    m = rig.query(blockTokens(3));
    expect([m.device_hit_tokens, m.device_blocks]).to.deep.equal([4, 2]);
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(rig.sub.error).to.equal('');
  });
});
