// kv-events §12 "DP isolation" P1–P3: two DP ranks of one instance, each a rank publisher bound
// as §1 lays them out (events at Be + r, snapshots at Br + r, consecutive free ports), each with
// its own StreamSubscriber. All state is per stream (§7, §8): an event, error or limit on one
// rank never touches the other, and prefixes are never assembled across ranks.
//
//   rank 0: SUB ◀── XPUB Be+0    DEALER ──▶ ROUTER Br+0
//   rank 1: SUB ◀── XPUB Be+1    DEALER ──▶ ROUTER Br+1
//
// No timing assertions: waits are on states, counters and sequences.
import { expect } from 'chai';
import type { StreamMatch } from '../../shared/view/query-result.js';
import { waitFor } from '../helpers/ports.js';
import { OpenRigs, StreamRig, chainTokens, queryStreams, removed, stableClock, stored } from '../helpers/stream-harness.js';

function port(endpoint: string): number {
  return Number(endpoint.slice(endpoint.lastIndexOf(':') + 1));
}

/** Per-rank hit and block fields of one query. */
function perRank(matches: StreamMatch[]): { rank: number; device: number; reusable: number; deviceBlocks: number; synchronized: boolean }[] {
  return matches.map((m) => ({
    rank: m.dp_rank,
    device: m.device_hit_tokens,
    reusable: m.reusable_prefix_tokens,
    deviceBlocks: m.device_blocks,
    synchronized: m.synchronized,
  }));
}

describe('kv-events §12 DP isolation (P1–P3) over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();

  async function openRanks(...opts: Parameters<typeof StreamRig.openRanks>): Promise<StreamRig[]> {
    const opened = await rigs.openRanks(...opts);
    await Promise.all(opened.map((r) => r.startSynchronized()));
    return opened;
  }

  afterEach(() => rigs.closeAll());

  it('P1 ranks 0 and 1 on base+0/base+1 keep separate indexes; events, errors and limits on one never affect the other', async () => {
    const [r0, r1] = await openRanks(2, { limits: { maxBlocksPerStream: 6 }, nowMs: stableClock() });
    expect(port(r1.pub.eventEndpoint)).to.equal(port(r0.pub.eventEndpoint) + 1);
    expect(port(r1.pub.replayEndpoint)).to.equal(port(r0.pub.replayEndpoint) + 1);
    expect([r0.sub.config.instanceName, r1.sub.config.instanceName]).to.deep.equal(['engine-a', 'engine-a']);

    // The same engine hashes on both ranks name different content: no conflict across ranks.
    const chainA = chainTokens(0, 2);
    const chainB = chainTokens(20, 2);
    await r0.apply([stored([11, 12], null, chainA)]);
    await r1.apply([stored([11, 12], null, chainB)]);
    expect(perRank(queryStreams([r0, r1], chainA).matches).map((m) => m.device)).to.deep.equal([8, 0]);
    expect(perRank(queryStreams([r0, r1], chainB).matches).map((m) => m.device)).to.deep.equal([0, 8]);

    // An error on rank 0: rank 1 neither leaves SYNCHRONIZED nor loses a hit.
    const r1Before = r1.query(chainB);
    await r0.publishFault([stored([30], 999, chainTokens(5, 1))]);
    await waitFor(() => r0.sub.counters.syncLost.inconsistent === 1 && r0.sub.state === 'SYNCHRONIZED', 10_000, 'rank 0 error and recovery');
    expect(r1.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(r1.query(chainB)).to.deep.equal(r1Before);

    // A limit on rank 1 (6 entries): rank 0 keeps serving and applying.
    const r0Seq = r0.sub.sequence;
    await r1.pub.publish([stored([13, 14, 15, 16, 17], 12, chainTokens(22, 5))]);
    await r1.inState('UNSYNCHRONIZED');
    expect(r1.errorClass()).to.equal('limit');
    await r0.apply([stored([13], 12, chainTokens(2, 1))]);
    expect(r0.sub.sequence).to.equal(r0Seq + 1n);
    const [m0, m1] = queryStreams([r0, r1], chainTokens(0, 3)).matches;
    expect([m0.synchronized, m0.device_hit_tokens, m0.error]).to.deep.equal([true, 12, '']);
    expect([m1.synchronized, m1.device_hit_tokens, m1.device_blocks]).to.deep.equal([false, 0, 0]);
    expect(m1.error).to.equal('limit: max_blocks_per_stream 6 exceeded');
    expect(r0.states.filter((s) => s === 'UNSYNCHRONIZED')).to.have.length(1);
  });

  it('P2 rank 0 holding 2 blocks and rank 1 holding 4 blocks of one prompt report 2 and 4, never combined', async () => {
    const [r0, r1] = await openRanks(2);
    const prompt = chainTokens(0, 4);
    await r0.apply([stored([1, 2], null, chainTokens(0, 2))]);
    await r1.apply([stored([1, 2, 3, 4], null, prompt)]);
    const result = queryStreams([r1, r0], prompt);
    expect([result.input_tokens, result.block_size]).to.deep.equal([16, 4]);
    expect(perRank(result.matches)).to.deep.equal([
      { rank: 0, device: 8, reusable: 8, deviceBlocks: 2, synchronized: true },
      { rank: 1, device: 16, reusable: 16, deviceBlocks: 4, synchronized: true },
    ]);
    // Rank 1 now holds only blocks 2..3 of the prompt: together the ranks hold all four blocks,
    // but no rank holds a prefix past block 1, and rank 1 matches nothing (block 0 absent).
    await r1.apply([removed([1, 2], 'gpu')]);
    expect(perRank(queryStreams([r0, r1], prompt).matches)).to.deep.equal([
      { rank: 0, device: 8, reusable: 8, deviceBlocks: 2, synchronized: true },
      { rank: 1, device: 0, reusable: 0, deviceBlocks: 2, synchronized: true },
    ]);
  });

  it('P3 a batch stamped dp_rank 1 on the rank-0 stream → protocol on that stream only', async () => {
    const [r0, r1] = await openRanks(2);
    await r0.apply([stored([1], null, chainTokens(0, 1))]);
    await r1.apply([stored([1], null, chainTokens(0, 1))]);
    const r1Before = r1.query(chainTokens(0, 2));
    // Rank 0's publisher stamps rank 1 (a misrouted batch).
    await r0.publishFault([stored([2], 1, chainTokens(1, 1))], { dpRank: 1 });
    await waitFor(() => r0.sub.counters.syncLost.protocol === 1, 5000, 'protocol on rank 0');
    expect(r0.errors[r0.states.indexOf('UNSYNCHRONIZED')]).to.match(/^protocol: /);
    expect(r1.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(r1.sub.counters.syncLost).to.deep.equal({});
    expect(r1.query(chainTokens(0, 2))).to.deep.equal(r1Before);
    // Rank 0 recovers from its own snapshot; the misrouted block is on neither rank.
    await r0.synchronized();
    const [m0, m1] = queryStreams([r0, r1], chainTokens(0, 2)).matches;
    expect([m0.dp_rank, m0.device_hit_tokens, m1.dp_rank, m1.device_hit_tokens]).to.deep.equal([0, 4, 1, 4]);
  });
});
