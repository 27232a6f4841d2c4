// kv-events §12 "Index" I1–I10 at the stream level: batches published by the engine simulator's
// rank publisher over real TCP ZeroMQ, indexed by a real StreamSubscriber, checked through the
// routing.md query (StreamQuery) and, for the §4 vectors, by looking the spec's key bytes up in
// the served index. The pure index has its own unit and property suites (test/unit/index/).
//
//   StreamSubscriber SUB  ◀──[topic, seq, batch]──  XPUB  RankPublisher
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER  (recovery after each injected fault)
//
// No timing assertions: waits are on states, counters and sequences.
import { expect } from 'chai';
import type { StreamMatch } from '../../shared/view/query-result.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import {
  OpenRigs,
  StreamRig,
  blockTokens,
  chainTokens,
  cleared,
  queryStreams,
  removed,
  replica,
  stableClock,
  stored,
  type StreamRigOptions,
} from '../helpers/stream-harness.js';
import { specBytes } from '../helpers/spec-bytes.js';

/** Byte-reverse: the canonical (big-endian) digest the spec warns against using as the key. */
function canonical(key: Uint8Array): Uint8Array {
  return Uint8Array.from(key).reverse();
}

const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

/** The hit and block fields of a match, in the order of the §5.3 table. */
function counts(m: StreamMatch): { device: number; hostOnly: number; reusable: number; deviceBlocks: number; hostBlocks: number } {
  return {
    device: m.device_hit_tokens,
    hostOnly: m.host_only_hit_tokens,
    reusable: m.reusable_prefix_tokens,
    deviceBlocks: m.device_blocks,
    hostBlocks: m.host_blocks,
  };
}

describe('kv-events §12 index (I1–I10) over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();
  // faultThenRecover demands exactly one recovery per fault: a snapshot fetch slower than the
  // harness's 300 ms replay timeout on a loaded host would add a retry. No test here times one out.
  const open = (opts?: StreamRigOptions): Promise<StreamRig> => rigs.open({ ...opts, limits: { replayTimeoutMs: 3000, ...opts?.limits } });

  afterEach(() => rigs.closeAll());

  it('I1 the served keys equal every §4 vector (seeds 1024/2048, block sizes 4/16); canonical-digest order is absent', async () => {
    const bs4 = await open({ instanceName: 'seed1024-bs4' });
    const bs16 = await open({ instanceName: 'seed1024-bs16', blockSize: 16 });
    const seed2048 = await open({ instanceName: 'seed2048-bs4', hashSeed: 2048n });
    await Promise.all([bs4, bs16, seed2048].map((r) => r.startSynchronized()));
    const vector4 = [151643, 0, 65536, 2147483647];
    await bs4.apply([stored([11, 12], null, range(1, 8)), stored([13], null, vector4)]);
    await bs16.apply([{ type: 'BlockStored', block_hashes: [11, 12], parent_block_hash: null, token_ids: range(1, 32), block_size: 16, medium: 'gpu' }]);
    await seed2048.apply([stored([11, 12], null, range(1, 8))]);

    const vectors: [StreamRig, string][] = [
      [bs4, 'b0c6037e37a15e2d e8d8689c759e965f'],
      [bs4, '94600a4a64fa896e 3c6f4572bb0437f0'],
      [bs4, '22f546fead09d8b8 cb1ac82c86081df6'],
      [bs16, 'cce872f24ddd4da2 42181e528a8a5d7c'],
      [bs16, 'baf6ab6b946ce13c 3ba631d4ccf4656b'],
      [seed2048, 'd97bc90b289c0fc5 7fcf31e8a777322e'],
      [seed2048, 'dc7df32a8685cf7a 27f48a56eb501ae2'],
    ];
    for (const [rig, hex] of vectors) {
      const key = specBytes(hex);
      expect(rig.residencyOf(key), `${rig.sub.config.instanceName} ${hex}`).to.equal(1);
      expect(rig.residencyOf(canonical(key)), `canonical ${hex}`).to.equal(0);
    }
    // A seed-1024 key is not what the seed-2048 stream holds.
    expect(seed2048.residencyOf(specBytes('b0c6037e37a15e2d e8d8689c759e965f'))).to.equal(0);
    expect(bs4.query(range(1, 8)).device_hit_tokens).to.equal(8);
    expect(bs4.query(vector4).device_hit_tokens).to.equal(4);
    expect(bs16.query(range(1, 40)).device_hit_tokens).to.equal(32);
    expect(seed2048.query(range(1, 8)).device_hit_tokens).to.equal(8);
  });

  it('I2 hash 11 (tokens 1..4) then hash 12 (parent 11, tokens 5..8) yield K0, K1; a query over 1..10 matches 2 blocks', async () => {
    const rig = await open();
    await rig.startSynchronized();
    await rig.apply([stored([11], null, range(1, 4)), stored([12], 11, range(5, 8))]);
    expect(rig.residencyOf(specBytes('b0c6037e37a15e2d e8d8689c759e965f'))).to.equal(1);
    expect(rig.residencyOf(specBytes('94600a4a64fa896e 3c6f4572bb0437f0'))).to.equal(1);
    const result = queryStreams([rig], range(1, 10));
    expect(result).to.deep.equal({
      input_tokens: 10,
      block_size: 4,
      matches: [
        {
          instance_name: 'engine-a',
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
        },
      ],
    });
  });

  it('I3 an unknown non-nil parent, or a known hash re-stored with other tokens → inconsistent, then recovery', async () => {
    const rig = await open({ nowMs: stableClock() });
    await rig.startSynchronized();
    await rig.apply([stored([11], null, blockTokens(0))]);
    let error = await rig.faultThenRecover('inconsistent', () => rig.publishFault([stored([30], 999, blockTokens(5))]));
    expect(error).to.equal('inconsistent: unknown parent 0x00000000000003e7');
    expect(rig.query(blockTokens(5)).device_hit_tokens).to.equal(0);
    expect(rig.query(blockTokens(0)).device_hit_tokens).to.equal(4);
    error = await rig.faultThenRecover('inconsistent', () => rig.publishFault([stored([11], null, blockTokens(1))]));
    expect(error).to.match(/^inconsistent: /);
    expect(rig.query(blockTokens(1)).device_hit_tokens).to.equal(0);
    expect(rig.query(blockTokens(0)).device_hit_tokens).to.equal(4);
    expect(rig.sub.counters.syncLost.inconsistent).to.equal(2);
  });

  it('I4 token count ≠ block_size × hashes, or event block_size ≠ stream block_size → protocol', async () => {
    const rig = await open({ nowMs: stableClock() });
    await rig.startSynchronized();
    await rig.apply([stored([11], null, blockTokens(0))]);
    const faults: WireEvent[] = [
      stored([12, 13], 11, range(1, 7)),
      // 8 tokens for 2 hashes fits the stream's block_size 4: only the declared 8 is wrong.
      { ...stored([12, 13], 11, chainTokens(1, 2)), block_size: 8 },
    ];
    for (const event of faults) {
      const error = await rig.faultThenRecover('protocol', () => rig.publishFault([event]));
      expect(error).to.match(/^protocol: /);
      expect(rig.query(chainTokens(0, 3)).device_hit_tokens).to.equal(4);
    }
  });

  it('I5 a tokenless cpu event adds Host to known blocks (block counts overlap); an unknown hash → inconsistent', async () => {
    const rig = await open();
    await rig.startSynchronized();
    await rig.apply([stored([11, 12], null, range(1, 8))]);
    await rig.apply([replica([11, 12], 'cpu')]);
    expect(counts(rig.query(range(1, 10)))).to.deep.equal({ device: 8, hostOnly: 0, reusable: 8, deviceBlocks: 2, hostBlocks: 2 });
    expect(rig.sub.index?.entryCount).to.equal(4);
    // §5.3 seq 5, with its exact error text.
    await rig.publishFault([replica([13], 'cpu')]);
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.sub.error).to.equal('inconsistent: unknown hash 0x000000000000000d');
    const m = rig.query(range(1, 10));
    expect(m.synchronized).to.equal(false);
    expect(counts(m)).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 0 });
  });

  it('I6 a tokenless event naming a skipped LoRA hash is accepted; a child of a skipped LoRA block is a descendant', async () => {
    const rig = await open();
    await rig.startSynchronized();
    // cache-identity §4 rule 1: a LoRA known only by lora_id (no lora_name) is the skipped kind.
    await rig.apply([{ ...stored([40], null, blockTokens(0)), lora_id: 3 }]);
    expect(rig.sub.counters.skipped.outOfScope).to.equal(1);
    await rig.apply([replica([40], 'cpu')]);
    await rig.apply([stored([41], 40, blockTokens(1))]);
    expect(rig.sub.counters.skipped.descendant).to.equal(1);
    expect(counts(rig.query(chainTokens(0, 2)))).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 0 });
    // The records exist (they keep later events consistent) but are never matched.
    expect(rig.sub.index?.recordCount).to.equal(2);
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('I7 removing Device keeps the Host replica; removing both drops the mapping; unknown hashes are a no-op (§5.3)', async () => {
    const rig = await open();
    await rig.startSynchronized();
    const q = range(1, 10);
    // §5.3 seqs 0–4: events, then dev/host blocks and device / host-only / reusable for 1..10.
    const table: [WireEvent[], number[]][] = [
      [[cleared()], [0, 0, 0, 0, 0]],
      [[stored([11, 12], null, range(1, 8))], [2, 0, 8, 0, 8]],
      [[replica([11, 12], 'cpu')], [2, 2, 8, 0, 8]],
      [[removed([12], 'gpu')], [1, 2, 4, 4, 8]],
      [[removed([11], 'gpu'), removed([11], 'cpu')], [0, 1, 0, 0, 0]],
    ];
    for (let seq = 0; seq < table.length; seq++) {
      const [events, [dev, host, device, hostOnly, reusable]] = table[seq];
      expect(await rig.apply(events)).to.equal(BigInt(seq));
      expect(counts(rig.query(q)), `seq ${seq}`).to.deep.equal({ device, hostOnly, reusable, deviceBlocks: dev, hostBlocks: host });
      if (seq === 2) expect(rig.sub.index?.entryCount).to.equal(4);
    }
    // Both tiers gone: the record for 11 is deleted, 12 stays as a Host record.
    expect(rig.sub.index?.recordCount).to.equal(1);
    await rig.apply([removed([999], 'gpu'), removed([998], 'cpu'), removed([11], 'cpu')]);
    expect(rig.sub.index?.recordCount).to.equal(1);
    expect(counts(rig.query(q))).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 1 });
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('I8 AllBlocksCleared with gpu, cpu, nil clears the right tiers; the positional form clears both', async () => {
    const rig = await open();
    await rig.startSynchronized();
    const q = range(1, 8);
    await rig.apply([stored([11, 12], null, q), replica([11, 12], 'cpu')]);
    await rig.apply([cleared('gpu')]);
    expect(counts(rig.query(q))).to.deep.equal({ device: 0, hostOnly: 8, reusable: 8, deviceBlocks: 0, hostBlocks: 2 });
    await rig.apply([replica([11, 12], 'gpu')]);
    await rig.apply([cleared('cpu')]);
    expect(counts(rig.query(q))).to.deep.equal({ device: 8, hostOnly: 0, reusable: 8, deviceBlocks: 2, hostBlocks: 0 });
    await rig.apply([replica([11, 12], 'cpu')]);
    await rig.apply([cleared(null)]);
    expect(counts(rig.query(q))).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 0 });
    expect(rig.sub.index?.entryCount).to.equal(0);
    // Positional AllBlocksCleared has no medium position: a "gpu" element still clears both.
    await rig.apply([stored([11, 12], null, q), replica([11, 12], 'cpu')]);
    await rig.apply([['AllBlocksCleared', 'gpu']]);
    expect(counts(rig.query(q))).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 0 });
    expect(rig.sub.index?.entryCount).to.equal(0);
  });

  it('I9 matching stops at the first absent block although later blocks are resident (§5.3 seq 4)', async () => {
    const rig = await open();
    await rig.startSynchronized();
    await rig.apply([cleared()]);
    await rig.apply([stored([11, 12], null, range(1, 8))]);
    await rig.apply([replica([11, 12], 'cpu')]);
    await rig.apply([removed([12], 'gpu')]);
    await rig.apply([removed([11], 'gpu'), removed([11], 'cpu')]);
    // K1 (block 1) is still resident on Host, but block 0 is absent.
    expect(rig.residencyOf(specBytes('94600a4a64fa896e 3c6f4572bb0437f0'))).to.equal(2);
    expect(counts(rig.query(range(1, 10)))).to.deep.equal({ device: 0, hostOnly: 0, reusable: 0, deviceBlocks: 0, hostBlocks: 1 });
    // A longer chain with a hole at block 1: only block 0 matches.
    await rig.apply([stored([21, 22, 23, 24], null, chainTokens(10, 4))]);
    await rig.apply([removed([22], 'gpu')]);
    expect(counts(rig.query(chainTokens(10, 4)))).to.deep.equal({ device: 4, hostOnly: 0, reusable: 4, deviceBlocks: 3, hostBlocks: 1 });
  });

  it('I10 replicas and parents count as entries; exceeding max_blocks_per_stream → limit on that stream only', async () => {
    const limits = { maxBlocksPerStream: 5 };
    const rig = await open({ instanceName: 'engine-a', limits });
    const sibling = await open({ instanceName: 'engine-b', limits });
    await Promise.all([rig.startSynchronized(), sibling.startSynchronized()]);
    for (const r of [rig, sibling]) {
      await r.apply([stored([11, 12], null, range(1, 8))]);
      await r.apply([replica([11, 12], 'cpu')]);
      // An UNINDEXED record kept so later events on it stay consistent: an entry, not a block
      // (a LoRA known only by lora_id, cache-identity §4 rule 1; a lora_name is indexed now).
      await r.apply([{ ...stored([40], null, blockTokens(9)), lora_id: 3 }]);
      expect(r.sub.index?.entryCount).to.equal(5);
      expect(counts(r.query(range(1, 8)))).to.deep.equal({ device: 8, hostOnly: 0, reusable: 8, deviceBlocks: 2, hostBlocks: 2 });
    }
    const siblingBefore = sibling.query(range(1, 12));
    await rig.pub.publish([stored([13], 12, range(9, 12))]);
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.errorClass()).to.equal('limit');
    expect(rig.sub.error).to.equal('limit: max_blocks_per_stream 5 exceeded');
    const [a, b] = queryStreams([sibling, rig], range(1, 12)).matches;
    expect([a.instance_name, a.synchronized, a.device_hit_tokens]).to.deep.equal(['engine-a', false, 0]);
    expect(a.error).to.equal('limit: max_blocks_per_stream 5 exceeded');
    expect(b).to.deep.equal(siblingBefore);
    expect(sibling.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    // The sibling keeps applying while the other stream retries.
    await sibling.apply([removed([12], 'cpu')]);
    expect(sibling.sub.index?.entryCount).to.equal(4);
  });
});
