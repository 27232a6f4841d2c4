/**
 * kvcm-meta §7.7 write gate as a pure state machine: timers are injected and fired by hand, so
 * drain timeouts need no sleeping.
 */
import { expect } from 'chai';
import { WriteGate, type GateOutcome, type GateTimers } from '../../../meta-svc/report/write-gate.js';

class ManualTimers implements GateTimers {
  private next = 1;
  readonly pending = new Map<number, () => void>();
  set(fn: () => void): unknown {
    const id = this.next++;
    this.pending.set(id, fn);
    return id;
  }
  clear(h: unknown): void {
    this.pending.delete(h as number);
  }
  fireAll(): void {
    const fns = [...this.pending.values()];
    this.pending.clear();
    for (const f of fns) f();
  }
}

/** Settled value of a promise after the microtask queue ran, or 'pending'. */
async function peek(p: Promise<GateOutcome>): Promise<GateOutcome | 'pending'> {
  return Promise.race([p, new Promise<'pending'>((r) => setImmediate(() => r('pending')))]);
}

describe('kvcm-meta §7.7 write gate', () => {
  let timers: ManualTimers;
  let gate: WriteGate;
  beforeEach(() => {
    timers = new ManualTimers();
    gate = new WriteGate(timers);
  });

  it('deltas share the gate through leases', async () => {
    expect(await gate.acquireDelta(10)).to.equal('granted');
    expect(await gate.acquireDelta(10)).to.equal('granted');
    expect(gate.activeLeases).to.equal(2);
  });

  it('C-03 a snapshot waits for leased deltas to drain, then is granted', async () => {
    await gate.acquireDelta(10);
    const snap = gate.acquireSnapshot(10);
    expect(await peek(snap)).to.equal('pending');
    gate.releaseDelta();
    expect(await snap).to.equal('granted');
    expect(timers.pending.size).to.equal(0);
  });

  it('S-04 a second snapshot while one holds the gate is SNAPSHOT_IN_PROGRESS at once, never queued', async () => {
    expect(await gate.acquireSnapshot(10)).to.equal('granted');
    expect(await gate.acquireSnapshot(10)).to.equal('in_progress');
    gate.releaseSnapshot();
    expect(await gate.acquireSnapshot(10)).to.equal('granted');
  });

  it('C-02 drain timeout aborts the snapshot and reopens the gate; waiting deltas resume', async () => {
    await gate.acquireDelta(10);
    const snap = gate.acquireSnapshot(10);
    const waiting = gate.acquireDelta(10);
    expect(await peek(waiting)).to.equal('pending');
    // Fire only the snapshot's drain timer (the first one set).
    const [first] = [...timers.pending.entries()];
    timers.pending.delete(first![0]);
    first![1]();
    expect(await snap).to.equal('in_progress');
    expect(await waiting).to.equal('granted');
    expect(gate.isSnapshotHeld).to.equal(false);
    expect(gate.activeLeases).to.equal(2);
  });

  it('C-03 a delta waiting beyond the drain timeout gets SNAPSHOT_IN_PROGRESS and takes no lease', async () => {
    expect(await gate.acquireSnapshot(10)).to.equal('granted');
    const d = gate.acquireDelta(10);
    timers.fireAll();
    expect(await d).to.equal('in_progress');
    expect(gate.activeLeases).to.equal(0);
    expect(gate.isSnapshotHeld).to.equal(true);
  });

  it('deltas resumed after a commit hold leases before any later snapshot (no overtaking)', async () => {
    expect(await gate.acquireSnapshot(10)).to.equal('granted');
    const d = gate.acquireDelta(10);
    gate.releaseSnapshot();
    expect(gate.activeLeases).to.equal(1);
    const snap2 = gate.acquireSnapshot(10);
    expect(await d).to.equal('granted');
    expect(await peek(snap2)).to.equal('pending');
    gate.releaseDelta();
    expect(await snap2).to.equal('granted');
  });

  it('C-01 wakeAll resolves a draining snapshot and waiting deltas with SNAPSHOT_REQUIRED', async () => {
    await gate.acquireDelta(10);
    const snap = gate.acquireSnapshot(10);
    const d = gate.acquireDelta(10);
    gate.wakeAll();
    expect(await snap).to.equal('snapshot_required');
    expect(await d).to.equal('snapshot_required');
    expect(gate.isSnapshotHeld).to.equal(false);
    expect(timers.pending.size).to.equal(0);
    gate.releaseDelta();
    expect(gate.activeLeases).to.equal(0);
  });
});
