// kv-events §6, §7 conformance scenarios R1–R12: the stream subscriber against the engine
// simulator's rank publisher over real TCP ZeroMQ sockets on free ports.
//
//   StreamSubscriber SUB  ◀──[topic, seq, batch]──  XPUB  RankPublisher (eventPort)
//   StreamSubscriber DEALER ──["", start_seq]──▶ ROUTER (replayPort)
//                           ◀──["", W, chunk]… ["", ff×8, ""]──
//
// Every test samples the query view on every state move, applied batch and index swap: outside
// SYNCHRONIZED the index must be null, and hits are counted on the stream's slot of its shared
// residency group.
// No timing assertions: waits are on states, events and counters. The rig (publisher +
// subscriber + sample log) is the shared one in test/helpers/stream-harness.ts.
import { expect } from 'chai';
import type { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { EMPTY_FRAME, TERMINATOR_WATERMARK, WireEncoder, encodeSnapshotChunks, u64be } from '../../tools/engine-sim/wire-encoding.js';
import type { WireEvent, WireSnapshotBlock } from '../../tools/engine-sim/wire-types.js';
import { waitFor } from '../helpers/ports.js';
import {
  BLOCK_SIZE,
  StreamRig as Rig,
  blockTokens,
  chainTokens,
  cleared,
  sleep,
  snapBlock,
  stored,
} from '../helpers/stream-harness.js';

/**
 * Starts the subscriber with its snapshot reply held back 600 ms and resolves once it has asked for
 * the snapshot and subscribed: whatever is published next is buffered behind the reply (§7.2).
 */
async function startWithReplyHeld(r: Rig): Promise<void> {
  r.pub.snapshotFaults.delayMs = 600;
  r.sub.start();
  await waitFor(() => r.pub.snapshotRequests.length === 1, 5000, 'snapshot request');
  await r.pub.waitForSubscribers(1);
}

/** Batch i of one chain: stores block 100+i on 100+i−1 (nil parent for batch 0). */
function chainBatch(i: number): WireEvent[] {
  return [stored([100 + i], i === 0 ? null : 99 + i, blockTokens(i))];
}

/** The publisher's state after chain batches 0..n−1, as snapshot blocks. */
function chainState(n: number): WireSnapshotBlock[] {
  const state: WireSnapshotBlock[] = [];
  for (let i = 0; i < n; i++) state.push(snapBlock(100 + i, i === 0 ? null : 99 + i, blockTokens(i)));
  return state;
}

describe('kv-events §7 recovery (R1–R12) over real ZeroMQ', function () {
  this.timeout(20_000);
  let rig: Rig | null = null;

  afterEach(async () => {
    if (rig !== null) {
      expect(rig.staleViewSeen, 'an index was visible outside SYNCHRONIZED').to.equal(false);
      await rig.close();
    }
    rig = null;
  });

  it('R1 empty state with W = 0 → synchronized with sequence −1', async () => {
    rig = await Rig.open();
    expect(rig.sub.state).to.equal('CONNECTING');
    expect(rig.errorClass()).to.equal('connecting');
    expect(rig.sub.index).to.equal(null);
    await rig.startSynchronized();
    expect(rig.sub.sequence).to.equal(-1n);
    expect(rig.sub.error).to.equal('');
    expect(rig.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(rig.pub.snapshotRequests).to.deep.equal([0n]);
    expect(rig.sub.counters.recoveriesOk).to.equal(1);
    const q = rig.sub.toQueryable();
    expect(q.synchronized).to.equal(true);
    expect(q.sequence).to.equal(-1n);
    expect(q.index?.entryCount).to.equal(0);
  });

  it('R1 first connect: snapshot plus buffered suffix published in one atomic step', async () => {
    rig = await Rig.open({ limits: { replayTimeoutMs: 3000 } });
    const r = rig;
    // Batches 0, 1 go out before anyone subscribes: only the snapshot can carry them.
    await r.pub.publish([cleared()]);
    await r.pub.publish([stored([100], null, blockTokens(0))]);
    // The reply is captured at request time (W = 2) and held back while 2, 3 are published.
    const all = chainTokens(0, 3);
    r.probes = [all];
    await startWithReplyHeld(r);
    await r.pub.publish([stored([101], 100, blockTokens(1))]);
    await r.pub.publish([stored([102], 101, blockTokens(2), 'cpu')]);
    await r.synchronized();
    expect(r.sub.sequence).to.equal(3n);
    expect(r.tierHits(all)).to.deep.equal({ deviceBlocks: 2, hostOnlyBlocks: 1 });
    // The first synchronized sample already holds snapshot and suffix: no partial view.
    const firstSynced = r.samples.find((s) => s.state === 'SYNCHRONIZED');
    expect(firstSynced).to.deep.equal({ state: 'SYNCHRONIZED', sequence: 3n, hits: [3] });
    expect(r.samples.filter((s) => s.state !== 'SYNCHRONIZED').every((s) => s.hits[0] === 0)).to.equal(true);
    expect(r.sub.counters.batchesApplied).to.equal(2);
  });

  it('R1 residency changes are reported for the served index only; swaps are view resets', async () => {
    const changes: { state: StreamState | null; oldTiers: number; newTiers: number }[] = [];
    let sub: StreamSubscriber | null = null;
    rig = await Rig.open({
      onResidencyChange: (_w, _o, oldTiers, newTiers) => changes.push({ state: sub?.state ?? null, oldTiers, newTiers }),
    });
    const r = rig;
    sub = r.sub;
    const views: string[] = [];
    r.listen({ batchApplied: () => views.push('batch'), indexReplaced: () => views.push('reset') });
    r.pub.setSnapshotState([snapBlock(1, null, blockTokens(0)), snapBlock(2, 1, blockTokens(1), ['gpu', 'cpu'])]);
    await r.startSynchronized();
    // Building F reported nothing; its publication is one reset.
    expect(changes).to.deep.equal([]);
    expect(views).to.deep.equal(['reset']);
    r.pub.clearSnapshotState();
    await r.pub.publish([stored([3], 2, blockTokens(2), 'cpu')]);
    await waitFor(() => views.length === 2, 5000, 'batch view');
    expect(views).to.deep.equal(['reset', 'batch']);
    expect(changes).to.deep.equal([{ state: 'SYNCHRONIZED', oldTiers: 0, newTiers: 2 }]);
  });

  it('R2 watermark dedupe: buffered 5..8 with W = 7 → 7 and 8 applied, sequence 8', async () => {
    rig = await Rig.open({ limits: { replayTimeoutMs: 3000 } });
    const r = rig;
    for (let i = 0; i < 5; i++) await r.pub.publish(chainBatch(i));
    // The publisher's state after batches 0..6, W = 7.
    r.pub.setSnapshotState(chainState(7), 7n);
    await startWithReplyHeld(r);
    for (let i = 5; i <= 8; i++) await r.pub.publish(chainBatch(i));
    await r.synchronized();
    expect(r.sub.sequence).to.equal(8n);
    expect(r.sub.counters.batchesApplied).to.equal(2);
    expect(r.hits(chainTokens(0, 10))).to.equal(9);
  });

  it('R3 a gap in the buffered suffix aborts recovery; the retry follows the §7.4 delay', async () => {
    rig = await Rig.open({ limits: { replayTimeoutMs: 3000 } });
    const r = rig;
    for (let i = 0; i < 5; i++) await r.pub.publish(chainBatch(i));
    r.pub.setSnapshotState(chainState(7), 7n);
    await startWithReplyHeld(r);
    await r.pub.publish(chainBatch(5));
    await r.pub.publish(chainBatch(6));
    r.pub.dropNextBatch();
    await r.pub.publish(chainBatch(7));
    await r.pub.publish(chainBatch(8));
    await r.inState('UNSYNCHRONIZED');
    expect(r.sub.error).to.equal('gap: expected 7, got 8');
    expect(r.sub.counters.recoveriesFailed).to.equal(1);
    expect(r.sub.counters.syncLost.gap).to.equal(1);
    expect(r.sub.consecutiveFailures).to.equal(1);
    // §7.4 with n = 1 and random() = 0: d = 100 ms, delay = d/2.
    expect(r.backoffs.at(-1)).to.deep.equal({ delayMs: 50, failures: 1 });
    // The retry gets the real state (W = 9, dropped batch 7 included).
    r.pub.clearSnapshotState();
    r.pub.snapshotFaults.delayMs = 0;
    await r.synchronized();
    expect(r.pub.snapshotRequests.length).to.equal(2);
    expect(r.sub.sequence).to.equal(8n);
    expect(r.hits(chainTokens(0, 10))).to.equal(9);
    expect(r.states).to.deep.equal(['RECOVERING', 'UNSYNCHRONIZED', 'RECOVERING', 'SYNCHRONIZED']);
  });

  it('R3 consecutive failed recoveries back off 50, 100, 200, 400 ms (random() = 0, §7.4)', async () => {
    // Every reply is stamped dp_rank 1: each recovery fails with protocol at once.
    rig = await Rig.open({ pubDpRank: 1 });
    const r = rig;
    r.sub.start();
    await waitFor(() => r.backoffs.length >= 5, 5000, 'four retries');
    expect(r.backoffs.slice(0, 5)).to.deep.equal([
      { delayMs: 0, failures: 0 },
      { delayMs: 50, failures: 1 },
      { delayMs: 100, failures: 2 },
      { delayMs: 200, failures: 3 },
      { delayMs: 400, failures: 4 },
    ]);
    expect(r.sub.counters.recoveriesFailed).to.be.greaterThanOrEqual(4);
    expect(r.sub.counters.recoveriesOk).to.equal(0);
  });

  it('R4 a live gap while synchronized → RECOVERING with zero hits until recovered', async () => {
    rig = await Rig.open();
    const r = rig;
    const all = chainTokens(0, 3);
    r.probes = [all];
    await r.startSynchronized();
    await r.pub.publish([stored([100], null, blockTokens(0))]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0 applied');
    r.pub.dropNextBatch();
    await r.pub.publish([stored([101], 100, blockTokens(1))]);
    await r.pub.publish([stored([102], 101, blockTokens(2))]);
    await waitFor(() => r.states.includes('RECOVERING') && r.sub.state === 'SYNCHRONIZED' && r.states.length >= 4, 5000, 'recovered');
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED', 'RECOVERING', 'SYNCHRONIZED']);
    expect(r.sub.counters.syncLost.gap).to.equal(1);
    expect(r.sub.sequence).to.equal(2n);
    expect(r.hits(all)).to.equal(3);
    const gapAt = r.samples.findIndex((s, i) => i > 0 && s.state === 'RECOVERING');
    const during = r.samples.slice(gapAt).filter((s) => s.state !== 'SYNCHRONIZED');
    expect(during.length).to.be.greaterThan(0);
    expect(during.every((s) => s.hits[0] === 0)).to.equal(true);
  });

  it('R5 seq going backwards (restart, same socket) discards the index; no stale hit at any point', async () => {
    rig = await Rig.open();
    const r = rig;
    const oldChain = chainTokens(0, 2);
    const newChain = chainTokens(50, 1);
    r.probes = [oldChain, newChain];
    await r.startSynchronized();
    await r.pub.publish([stored([100], null, blockTokens(0))]);
    await r.pub.publish([stored([101], 100, blockTokens(1))]);
    await waitFor(() => r.sub.sequence === 1n, 5000, 'seq 1 applied');
    expect(r.hits(oldChain)).to.equal(2);
    const before = r.samples.length;
    // The "new process" holds only block 200 and has published seq 0 (W = 1).
    r.pub.setSnapshotState([snapBlock(200, null, blockTokens(50))], 1n);
    await r.pub.publish([stored([200], null, blockTokens(50))], { seq: 0n });
    await waitFor(() => r.sub.state === 'SYNCHRONIZED' && r.sub.counters.recoveriesOk === 2, 5000, 'recovered after reset');
    expect(r.sub.counters.syncLost.seq_reset).to.equal(1);
    expect(r.sub.sequence).to.equal(0n);
    expect(r.hits(oldChain)).to.equal(0);
    expect(r.hits(newChain)).to.equal(1);
    const after = r.samples.slice(before);
    expect(after[0].state).to.equal('RECOVERING');
    expect(after[0].sequence).to.equal(-1n);
    expect(after.every((s) => s.hits[0] === 0), 'stale hit on the old chain').to.equal(true);
  });

  it('R5 publisher process restart: disconnect, then recovery from the new process, never a stale hit', async () => {
    rig = await Rig.open();
    const r = rig;
    const oldChain = chainTokens(0, 2);
    r.probes = [oldChain];
    await r.startSynchronized();
    await r.pub.publish([stored([100], null, blockTokens(0))]);
    await r.pub.publish([stored([101], 100, blockTokens(1))]);
    await waitFor(() => r.sub.sequence === 1n, 5000, 'seq 1 applied');
    const before = r.samples.length;
    await r.pub.restart();
    await waitFor(() => r.states.includes('CONNECTING'), 10_000, 'CONNECTING');
    await r.synchronized(10_000);
    await r.pub.waitForSubscribers(1);
    await r.pub.publish([cleared()]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0 of the new process');
    expect(r.hits(oldChain)).to.equal(0);
    expect(r.samples.slice(before).every((s) => s.hits[0] === 0), 'stale hit after restart').to.equal(true);
  });

  it('R6 buffer budget exceeded during recovery → limit: max_buffered_bytes, then retry', async () => {
    rig = await Rig.open({ limits: { replayTimeoutMs: 3000 } });
    const r = rig;
    await startWithReplyHeld(r);
    // Each batch: 400 chained blocks → ≈ 400·(8 + 16) + frames ≈ 15 KB of §7.2 cost.
    for (let b = 0; b < 6; b++) {
      const hashes = Array.from({ length: 400 }, (_, i) => 10_000 * (b + 1) + i);
      await r.pub.publish([stored(hashes, null, chainTokens(1000 * (b + 1), 400))]);
    }
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('limit');
    expect(r.sub.error).to.match(/^limit: max_buffered_bytes/);
    expect(r.sub.counters.syncLost.limit).to.equal(1);
    r.pub.snapshotFaults.delayMs = 0;
    await r.synchronized();
    expect(r.sub.sequence).to.equal(5n);
    expect(r.hits(chainTokens(1000, 400))).to.equal(400);
  });

  it('R7 missing terminator gives timeout; a late reply to the old request is never applied', async () => {
    rig = await Rig.open();
    const r = rig;
    const stale = blockTokens(77);
    r.probes = [stale];
    let staleHitSeen = false;
    const seen = (): void => {
      if (r.hits(stale) > 0) staleHitSeen = true;
    };
    r.listen({ batchApplied: seen, indexReplaced: seen });
    // Request 1: chunks holding the stale block, no terminator.
    r.pub.setSnapshotState([snapBlock(777, null, stale)], 0n);
    r.pub.snapshotFaults.omitTerminator = true;
    r.sub.start();
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('timeout');
    expect(r.sub.counters.syncLost.timeout).to.equal(1);
    // Request 2: a complete reply, but only after the deadline.
    r.pub.snapshotFaults.omitTerminator = false;
    r.pub.snapshotFaults.delayMs = 700;
    await waitFor(() => r.pub.snapshotRequests.length === 2, 5000, 'request 2');
    // Request 3: the real (empty) state at once.
    r.pub.clearSnapshotState();
    r.pub.snapshotFaults.delayMs = 0;
    await r.synchronized();
    expect(r.pub.snapshotRequests.length).to.equal(3);
    expect(r.sub.counters.syncLost.timeout).to.equal(2);
    // Let the late reply to request 2 go out; it must never be read.
    await sleep(800);
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    expect(r.hits(stale)).to.equal(0);
    expect(staleHitSeen).to.equal(false);
    expect(r.sub.counters.recoveriesOk).to.equal(1);
  });

  it('R8 orphaned snapshot suffix is skipped, independent prefixes kept; later events on orphans cause no recovery', async () => {
    rig = await Rig.open();
    const r = rig;
    r.pub.setSnapshotState([
      snapBlock(1, null, blockTokens(0), ['gpu', 'cpu']),
      snapBlock(2, 1, blockTokens(1)),
      // Parent 999 is not in the reply: 3 is an orphan, 4 its descendant.
      snapBlock(3, 999, blockTokens(10)),
      snapBlock(4, 3, blockTokens(11)),
      snapBlock(5, null, blockTokens(20), ['cpu']),
    ]);
    await r.startSynchronized();
    expect(r.sub.counters.skipped.orphan).to.equal(1);
    expect(r.sub.counters.skipped.descendant).to.equal(1);
    expect(r.hits(chainTokens(0, 2))).to.equal(2);
    expect(r.tierHits(chainTokens(20, 1))).to.deep.equal({ deviceBlocks: 0, hostOnlyBlocks: 1 });
    expect(r.hits(chainTokens(10, 2))).to.equal(0);
    const seq = r.sub.sequence;
    await r.pub.publish([
      { type: 'BlockStored', block_hashes: [3, 4], parent_block_hash: null, token_ids: [], block_size: null, medium: 'cpu' },
    ]);
    await r.pub.publish([{ type: 'BlockRemoved', block_hashes: [3], medium: 'gpu' }]);
    await waitFor(() => r.sub.sequence === seq + 2n, 5000, 'orphan events applied');
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    expect(r.sub.counters.recoveriesOk).to.equal(1);
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('R9 chunk with the wrong dp_rank → protocol', async () => {
    rig = await Rig.open({ pubDpRank: 1 });
    rig.sub.start();
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.errorClass()).to.equal('protocol');
    expect(rig.sub.counters.recoveriesFailed).to.be.greaterThanOrEqual(1);
  });

  it('R9 chunk with the wrong block_size → protocol', async () => {
    rig = await Rig.open({ pubBlockSize: 8 });
    rig.sub.start();
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.errorClass()).to.equal('protocol');
  });

  it('R9 mixed watermarks across chunks → protocol', async () => {
    rig = await Rig.open();
    const enc = new WireEncoder();
    const [c1] = encodeSnapshotChunks(enc, [snapBlock(1, null, blockTokens(0))], 0, BLOCK_SIZE, 65_536, 100);
    const [c2] = encodeSnapshotChunks(enc, [snapBlock(2, 1, blockTokens(1))], 0, BLOCK_SIZE, 65_536, 100);
    rig.pub.snapshotFaults.overrideChunks = () => [
      [EMPTY_FRAME, u64be(3n), c1],
      [EMPTY_FRAME, u64be(4n), c2],
      [EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME],
    ];
    rig.sub.start();
    await rig.inState('UNSYNCHRONIZED');
    expect(rig.errorClass()).to.equal('protocol');
  });

  it('R9 duplicate block hash in a reply → protocol; a reply with no chunk → protocol', async () => {
    rig = await Rig.open();
    const r = rig;
    r.pub.setSnapshotState([snapBlock(1, null, blockTokens(0)), snapBlock(1, null, blockTokens(5))]);
    r.sub.start();
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('protocol');
    expect(r.sub.error).to.contain('duplicate');
    r.pub.snapshotFaults.overrideChunks = () => [[EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME]];
    await waitFor(() => r.sub.counters.recoveriesFailed >= 2 && r.sub.state === 'UNSYNCHRONIZED', 5000, 'second failure');
    expect(r.errorClass()).to.equal('protocol');
    expect(r.sub.index).to.equal(null);
  });

  it('R10 a full-state batch restores synchronization from UNSYNCHRONIZED without a snapshot', async () => {
    // random() ≈ 1 picks the top of [d/2, d]: the longest UNSYNCHRONIZED window for the batch.
    rig = await Rig.open({ random: () => 0.99 });
    const r = rig;
    await r.startSynchronized();
    // Every snapshot request goes unanswered from now on.
    r.pub.snapshotFaults.dropRequests = true;
    await r.pub.publish([stored([1], null, blockTokens(0))], { dpRank: 1 });
    await r.inState('UNSYNCHRONIZED');
    expect(r.errorClass()).to.equal('protocol');
    // Wait for a longer §7.4 delay (n ≥ 3 → ≈ 400 ms) so the batch lands in UNSYNCHRONIZED.
    await waitFor(() => r.sub.state === 'UNSYNCHRONIZED' && r.sub.consecutiveFailures >= 3, 10_000, 'n ≥ 3');
    const requests = r.pub.snapshotRequests.length;
    const unsyncedBefore = r.states.lastIndexOf('UNSYNCHRONIZED');
    await r.pub.publish([cleared(), stored([10, 11], null, chainTokens(30, 2), 'gpu')]);
    await r.synchronized();
    expect(r.states.lastIndexOf('UNSYNCHRONIZED')).to.equal(unsyncedBefore);
    expect(r.states.at(-2)).to.equal('UNSYNCHRONIZED');
    expect(r.sub.counters.restores).to.equal(1);
    expect(r.pub.snapshotRequests.length).to.equal(requests);
    expect(r.hits(chainTokens(30, 2))).to.equal(2);
    expect(r.sub.sequence).to.equal(r.pub.nextSeq - 1n);
    expect(r.sub.error).to.equal('');
  });

  it('R10 a full-state batch after a seq reset restores without a snapshot', async () => {
    rig = await Rig.open();
    const r = rig;
    r.probes = [chainTokens(0, 1)];
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await r.pub.publish([stored([2], 1, blockTokens(1))]);
    await waitFor(() => r.sub.sequence === 1n, 5000, 'seq 1');
    const before = r.samples.length;
    r.pub.snapshotFaults.dropRequests = true;
    await r.pub.publish([cleared(), stored([20], null, blockTokens(40))], { seq: 0n });
    await waitFor(() => r.sub.counters.restores === 1 && r.sub.state === 'SYNCHRONIZED', 5000, 'restored');
    expect(r.sub.counters.syncLost.seq_reset).to.equal(1);
    expect(r.pub.snapshotRequests.length).to.equal(1);
    expect(r.sub.sequence).to.equal(0n);
    expect(r.hits(chainTokens(0, 1))).to.equal(0);
    expect(r.hits(blockTokens(40))).to.equal(1);
    expect(r.samples.slice(before).every((s) => s.hits[0] === 0)).to.equal(true);
    // Later batches continue from the restored seq.
    await r.pub.publish([stored([21], 20, blockTokens(41))]);
    await waitFor(() => r.sub.sequence === 1n, 5000, 'seq 1 after restore');
    expect(r.hits(chainTokens(40, 2))).to.equal(2);
  });

  it('R10 a full-state batch with an unknown parent restores nothing', async () => {
    rig = await Rig.open();
    const r = rig;
    await r.startSynchronized();
    r.pub.snapshotFaults.dropRequests = true;
    await r.pub.publish([stored([1], null, blockTokens(0))], { dpRank: 1 });
    await r.inState('UNSYNCHRONIZED');
    await r.pub.publish([cleared(), stored([30], 999, blockTokens(60))]);
    // A valid full-state batch right after shows the bad one was processed and not counted.
    await r.pub.publish([cleared(), stored([40], null, blockTokens(70))]);
    await waitFor(() => r.sub.state === 'SYNCHRONIZED', 5000, 'restored by the second batch');
    expect(r.sub.counters.restores).to.equal(1);
    expect(r.sub.sequence).to.equal(r.pub.nextSeq - 1n);
    expect(r.hits(blockTokens(60))).to.equal(0);
    expect(r.hits(blockTokens(70))).to.equal(1);
  });

  it('R11 reconciliation with equal state changes nothing and stays synchronized', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1, 2], null, chainTokens(0, 2))]);
    await waitFor(() => r.reconciles.length >= 1, 5000, 'a reconciliation');
    expect(r.reconciles[0]).to.equal('equal');
    expect(r.sub.counters.silentLoss).to.equal(0);
    expect(r.sub.counters.reconcileFailures).to.equal(0);
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(r.hits(chainTokens(0, 2))).to.equal(2);
  });

  it('R11 last batch dropped on a quiet publisher → replaced, silent_loss +1, synchronized throughout', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0');
    r.pub.dropNextBatch();
    await r.pub.publish([stored([2], 1, blockTokens(1))]);
    await waitFor(() => r.reconciles.length >= 1, 5000, 'a reconciliation');
    expect(r.reconciles[0]).to.equal('lost');
    expect(r.sub.counters.silentLoss).to.equal(1);
    expect(r.sub.sequence).to.equal(1n);
    expect(r.hits(chainTokens(0, 2))).to.equal(2);
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    // Live traffic continues from the reconciled seq.
    await r.pub.publish([stored([3], 2, blockTokens(2))]);
    await waitFor(() => r.sub.sequence === 2n, 5000, 'seq 2');
    expect(r.hits(chainTokens(0, 3))).to.equal(3);
  });

  it('R11 differing state at the same seq is swapped in and counted as silent_loss', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0');
    // The publisher's state at W = 1 also holds a Host replica we never heard of.
    r.pub.setSnapshotState([snapBlock(1, null, blockTokens(0), ['gpu', 'cpu'])], 1n);
    await waitFor(() => r.reconciles.length >= 1, 5000, 'a reconciliation');
    expect(r.reconciles[0]).to.equal('replaced');
    expect(r.sub.counters.silentLoss).to.equal(1);
    expect(r.sub.index?.hostBlocks).to.equal(1);
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('R11 a reconciliation timeout counts reconcile_failures and the view stays synchronized', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0');
    r.pub.snapshotFaults.dropRequests = true;
    await waitFor(() => r.reconciles.length >= 1, 5000, 'a reconciliation');
    expect(r.reconciles[0]).to.equal('abandoned');
    expect(r.sub.counters.reconcileFailures).to.equal(1);
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    expect(r.hits(blockTokens(0))).to.equal(1);
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
  });

  it('R11 leaving SYNCHRONIZED during a check abandons it (reconcile_failures)', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000, replayTimeoutMs: 2000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0');
    r.pub.snapshotFaults.dropRequests = true;
    await waitFor(() => r.pub.snapshotRequests.length === 2, 5000, 'reconciliation request');
    r.pub.snapshotFaults.dropRequests = false;
    r.pub.dropNextBatch();
    await r.pub.publish([stored([2], 1, blockTokens(1))]);
    await r.pub.publish([stored([3], 2, blockTokens(2))]);
    await waitFor(() => r.reconciles.length >= 1, 5000, 'check ended');
    expect(r.reconciles[0]).to.equal('abandoned');
    expect(r.sub.counters.reconcileFailures).to.equal(1);
    expect(r.sub.counters.syncLost.gap).to.equal(1);
    await waitFor(() => r.sub.state === 'SYNCHRONIZED' && r.sub.sequence === 2n, 5000, 'recovered');
    expect(r.hits(chainTokens(0, 3))).to.equal(3);
  });

  it('R11 a reconciliation reply with a protocol error → UNSYNCHRONIZED', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    r.pub.setSnapshotState([snapBlock(1, null, blockTokens(0)), snapBlock(1, null, blockTokens(1))]);
    await waitFor(() => r.reconciles.length >= 1, 5000, 'a reconciliation');
    expect(r.reconciles[0]).to.equal('failed');
    expect(r.states.slice(0, 3)).to.deep.equal(['RECOVERING', 'SYNCHRONIZED', 'UNSYNCHRONIZED']);
    expect(r.errors[2]).to.match(/^protocol: /);
    expect(r.sub.counters.reconcileFailures).to.equal(0);
  });

  it('R11 a reconciliation watermark behind last is a seq_reset (§7.1)', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    r.probes = [chainTokens(0, 2)];
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await r.pub.publish([stored([2], 1, blockTokens(1))]);
    await waitFor(() => r.sub.sequence === 1n, 5000, 'seq 1');
    // A new process behind the same sockets that has published only seq 0 (W = 1 ≤ last).
    r.pub.setSnapshotState([snapBlock(1, null, blockTokens(0))], 1n);
    await waitFor(() => r.sub.counters.syncLost.seq_reset === 1, 5000, 'seq_reset');
    expect(r.errors[2]).to.equal('seq_reset: got 0 after 1');
    await r.synchronized();
    expect(r.sub.sequence).to.equal(0n);
    expect(r.hits(chainTokens(0, 2))).to.equal(1);
  });

  it('R12 disconnect → unsynchronized at once, recovery after reconnect', async () => {
    rig = await Rig.open();
    const r = rig;
    const chain = chainTokens(0, 2);
    r.probes = [chain];
    await r.startSynchronized();
    await r.pub.publish([stored([1, 2], null, chain)]);
    await waitFor(() => r.sub.sequence === 0n, 5000, 'seq 0');
    const before = r.samples.length;
    await r.pub.restart({ keepState: true });
    await waitFor(() => r.states.includes('CONNECTING'), 10_000, 'CONNECTING');
    // The first sample after the disconnect is already CONNECTING with no index and no sequence.
    expect(r.samples[before]).to.deep.equal({ state: 'CONNECTING', sequence: -1n, hits: [0] });
    expect(r.errors[r.states.indexOf('CONNECTING')]).to.equal(`disconnected: ${r.pub.eventEndpoint}`);
    expect(r.sub.counters.syncLost.disconnected).to.equal(1);
    await r.synchronized(10_000);
    // Same blocks (kept state), new process: seq restarts, W = 0.
    expect(r.sub.sequence).to.equal(-1n);
    expect(r.hits(chain)).to.equal(2);
    expect(r.states.slice(-3)).to.deep.equal(['CONNECTING', 'RECOVERING', 'SYNCHRONIZED']);
  });

  it('R12 a publisher silent beyond resync_interval_ms stays synchronized', async () => {
    rig = await Rig.open({ limits: { resyncIntervalMs: 1000 } });
    const r = rig;
    await r.startSynchronized();
    await r.pub.publish([stored([1], null, blockTokens(0))]);
    await waitFor(() => r.reconciles.length >= 2, 8000, 'two reconciliation periods');
    expect(r.states).to.deep.equal(['RECOVERING', 'SYNCHRONIZED']);
    expect(r.reconciles.slice(0, 2)).to.deep.equal(['equal', 'equal']);
    expect(r.sub.counters.syncLost).to.deep.equal({});
    expect(r.hits(blockTokens(0))).to.equal(1);
  });
});
