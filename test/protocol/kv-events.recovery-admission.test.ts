// Directory-wide snapshot admission (`max_concurrent_recoveries`, our extension beyond kv-events
// §9) over real TCP ZeroMQ: several StreamSubscribers share one RecoveryAdmission, each against
// its own engine-simulator RankPublisher.
//
//   StreamSubscriber i ── waits for a slot ──▶ DEALER ──["", start_seq]──▶ ROUTER (publisher i)
//                                             ◀──["", W, chunk]… ["", ff×8, ""]── (held delayMs)
//
// With a cap of 1 the exchanges run one after another; §6 `replay_timeout_ms` covers request to
// terminator only, so four exchanges whose sum exceeds it still all succeed. Waits are on
// states, counters and the publishers' request logs; the one sleep lets a resync period pass.
import { expect } from 'chai';
import { RecoveryAdmission } from '../../directory-svc/recovery/recovery-admission.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { waitFor } from '../helpers/ports.js';
import { OpenRigs, blockTokens, sleep, stored } from '../helpers/stream-harness.js';
import type { StreamRig } from '../helpers/stream-harness.js';

/** Snapshot requests arriving at publishers and exchanges ending at subscribers, in order. */
type ExchangeEvent = { kind: 'request' | 'end'; stream: number };

/**
 * Logs each request as its publisher receives it (its `snapshotRequests` push) and each end of
 * an exchange as the subscriber leaves RECOVERING, so the log shows how many were outstanding.
 */
function logExchanges(rigs: readonly StreamRig[]): ExchangeEvent[] {
  const log: ExchangeEvent[] = [];
  rigs.forEach((rig, stream) => {
    const requests = rig.pub.snapshotRequests;
    const push = requests.push.bind(requests);
    requests.push = (...items: bigint[]): number => {
      log.push({ kind: 'request', stream });
      return push(...items);
    };
    rig.listen({
      stateChanged: (state: StreamState) => {
        if (state !== 'RECOVERING' && rig.states.at(-2) === 'RECOVERING') log.push({ kind: 'end', stream });
      },
    });
  });
  return log;
}

/** Most requests outstanding (received, exchange not yet ended) at any point of the log. */
function maxOutstanding(log: readonly ExchangeEvent[]): number {
  let now = 0;
  let max = 0;
  for (const e of log) {
    now += e.kind === 'request' ? 1 : -1;
    max = Math.max(max, now);
  }
  return max;
}

describe('kv-events snapshot admission (max_concurrent_recoveries) over real ZeroMQ', function () {
  this.timeout(30_000);
  const rigs = new OpenRigs();

  afterEach(() => rigs.closeAll());

  it('cap 1: four delayed recoveries run one at a time, none times out, all SYNCHRONIZED', async () => {
    const admission = new RecoveryAdmission(1);
    const replayTimeoutMs = 500;
    const delayMs = 300; // 4 × 300 > 500: only the queueing keeps them apart
    const streams: StreamRig[] = [];
    for (let i = 0; i < 4; i++) {
      streams.push(await rigs.open({ instanceName: `engine-${i}`, recoveryAdmission: admission, limits: { replayTimeoutMs } }));
    }
    const log = logExchanges(streams);
    for (const r of streams) {
      // State before the subscriber connects: the snapshot carries it (W = 1).
      await r.pub.publish([stored([100], null, blockTokens(0))]);
      r.pub.snapshotFaults.delayMs = delayMs;
    }
    for (const r of streams) r.sub.start();
    // While three streams queue, live traffic is buffered as in §7.2 step 1 and applied after.
    await Promise.all(streams.map((r) => r.pub.waitForSubscribers(1)));
    const last: bigint[] = [];
    for (const r of streams) last.push(await r.pub.publish([stored([101], 100, blockTokens(1))]));
    await Promise.all(streams.map((r, i) => r.atSequence(last[i], 10_000)));

    for (const r of streams) {
      expect(r.sub.counters.syncLost.timeout ?? 0, `${r.sub.config.instanceName} timed out`).to.equal(0);
      expect(r.errors.filter((e) => e.startsWith('timeout'))).to.deep.equal([]);
      expect(r.sub.counters.recoveriesOk).to.equal(1);
      expect(r.pub.snapshotRequests).to.have.length(1);
      expect(r.hits([...blockTokens(0), ...blockTokens(1)])).to.equal(2);
    }
    expect(log.filter((e) => e.kind === 'request')).to.have.length(4);
    expect(maxOutstanding(log), JSON.stringify(log)).to.equal(1);
    // Strictly alternating: each request is answered and ended before the next is sent.
    for (let k = 0; k < log.length; k += 2) {
      expect(log[k]).to.deep.equal({ kind: 'request', stream: log[k].stream });
      expect(log[k + 1]).to.deep.equal({ kind: 'end', stream: log[k].stream });
    }
    expect(admission.inUse).to.equal(0);
    expect(admission.queued).to.equal(0);
  });

  it('cap 1: a queued stream that disconnects leaves the queue, releases nothing, the others complete', async () => {
    const admission = new RecoveryAdmission(1);
    const streams: StreamRig[] = [];
    for (let i = 0; i < 3; i++) {
      streams.push(await rigs.open({ instanceName: `engine-${i}`, recoveryAdmission: admission, limits: { replayTimeoutMs: 2000 } }));
    }
    const [holder, leaver, waiter] = streams;
    holder.pub.snapshotFaults.delayMs = 600;
    holder.sub.start();
    await waitFor(() => holder.pub.snapshotRequests.length === 1, 5000, 'first snapshot request');
    leaver.sub.start();
    await waitFor(() => admission.queued === 1, 5000, 'second stream queued');
    waiter.sub.start();
    await waitFor(() => admission.queued === 2, 5000, 'third stream queued');
    expect(leaver.sub.state).to.equal('RECOVERING');

    // §7.4: the publisher process goes away; the queued stream goes to CONNECTING at once.
    await leaver.pub.close();
    await leaver.inState('CONNECTING', 10_000);
    expect(admission.inUse, 'the holder still holds the only slot').to.equal(1);
    expect(admission.queued).to.equal(1);

    await holder.synchronized(10_000);
    await waiter.synchronized(10_000);
    expect(leaver.pub.snapshotRequests).to.have.length(0);
    expect(holder.pub.snapshotRequests).to.have.length(1);
    expect(waiter.pub.snapshotRequests).to.have.length(1);
    expect(leaver.sub.counters.syncLost.disconnected).to.equal(1);
    expect(admission.inUse).to.equal(0);
    expect(admission.queued).to.equal(0);
  });

  it('cap 1: a queued stream restored by a full-state batch (§7.3) leaves the queue', async () => {
    const admission = new RecoveryAdmission(1);
    const holder = await rigs.open({ instanceName: 'engine-0', recoveryAdmission: admission, limits: { replayTimeoutMs: 3000 } });
    const restored = await rigs.open({ instanceName: 'engine-1', recoveryAdmission: admission, limits: { replayTimeoutMs: 3000 } });
    holder.pub.snapshotFaults.delayMs = 1500;
    holder.sub.start();
    await waitFor(() => holder.pub.snapshotRequests.length === 1, 5000, 'first snapshot request');
    restored.sub.start();
    await waitFor(() => admission.queued === 1, 5000, 'second stream queued');
    await restored.pub.waitForSubscribers(1);
    const seq = await restored.pub.publish([{ type: 'AllBlocksCleared', medium: null }, stored([7], null, blockTokens(0))]);
    await restored.atSequence(seq);
    expect(restored.sub.counters.restores).to.equal(1);
    expect(admission.queued).to.equal(0);
    expect(admission.inUse).to.equal(1);
    await holder.synchronized(10_000);
    expect(restored.pub.snapshotRequests).to.have.length(0);
    expect(admission.inUse).to.equal(0);
  });

  it('§7.5 a reconciliation with no free slot is skipped until the next interval, never queued', async () => {
    const admission = new RecoveryAdmission(1);
    const r = await rigs.open({ recoveryAdmission: admission, limits: { resyncIntervalMs: 1000, replayTimeoutMs: 300 } });
    await r.startSynchronized();
    expect(r.pub.snapshotRequests).to.have.length(1);
    // Another stream's recovery holds the only slot for more than one resync period.
    const release = admission.tryAcquire();
    expect(release).to.be.a('function');
    await sleep(1500);
    expect(r.pub.snapshotRequests, 'no reconciliation request while the slot is held').to.have.length(1);
    expect(r.reconciles).to.deep.equal([]);
    expect(admission.queued, 'the check did not queue').to.equal(0);
    expect(r.sub.state).to.equal('SYNCHRONIZED');
    release!();
    await waitFor(() => r.reconciles.length > 0, 5000, 'reconciliation after the slot was freed');
    expect(r.reconciles[0]).to.equal('equal');
    expect(r.sub.counters.reconcileFailures).to.equal(0);
    expect(admission.inUse).to.equal(0);
  });
});
