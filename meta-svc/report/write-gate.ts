/**
 * The per-reporter snapshot/delta write gate (kvcm-meta §7.7). Deltas share the gate through
 * leases; a snapshot closes it, drains the leases and then writes alone. Waits are bounded by
 * `snapshot_delta_drain_timeout_ms`; nothing is ever queued behind a second snapshot.
 *
 * Pure state machine apart from the timers, which are injected so tests can drive timeouts.
 */

/** `granted`: go ahead. `in_progress`: §7.7 timeout or contention. `snapshot_required`: woken by HOST_DOWN/shutdown (§7.5). */
export type GateOutcome = 'granted' | 'in_progress' | 'snapshot_required';

export interface GateTimers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

export const realTimers: GateTimers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (h) => clearTimeout(h as ReturnType<typeof setTimeout>),
};

interface Waiter {
  resolve(outcome: GateOutcome): void;
  timer: unknown;
}

export class WriteGate {
  private leases = 0;
  /** A snapshot has closed the gate (draining or writing). */
  private snapshotHeld = false;
  private readonly deltaWaiters = new Set<Waiter>();
  private drainWaiter: Waiter | null = null;

  constructor(private readonly timers: GateTimers = realTimers) {}

  get activeLeases(): number {
    return this.leases;
  }

  get isSnapshotHeld(): boolean {
    return this.snapshotHeld;
  }

  get waitingDeltas(): number {
    return this.deltaWaiters.size;
  }

  /** §7.7: a delta run takes a lease, or waits for the holding snapshot to finish. */
  acquireDelta(drainTimeoutMs: number): Promise<GateOutcome> {
    if (!this.snapshotHeld) {
      this.leases++;
      return Promise.resolve('granted');
    }
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: undefined };
      waiter.timer = this.timers.set(() => {
        // Timeout: no lease taken, the snapshot is unaffected.
        if (this.deltaWaiters.delete(waiter)) resolve('in_progress');
      }, drainTimeoutMs);
      this.deltaWaiters.add(waiter);
    });
  }

  releaseDelta(): void {
    if (this.leases <= 0) throw new Error('write gate: releaseDelta without a lease');
    this.leases--;
    if (this.leases === 0 && this.drainWaiter) {
      const w = this.drainWaiter;
      this.drainWaiter = null;
      this.timers.clear(w.timer);
      w.resolve('granted');
    }
  }

  /**
   * §7.7: a second snapshot is refused at once; otherwise close the gate and wait for the
   * leases to drain. A drain timeout reopens the gate and lets waiting deltas resume.
   */
  acquireSnapshot(drainTimeoutMs: number): Promise<GateOutcome> {
    if (this.snapshotHeld) return Promise.resolve('in_progress');
    this.snapshotHeld = true;
    if (this.leases === 0) return Promise.resolve('granted');
    return new Promise((resolve) => {
      const waiter: Waiter = { resolve, timer: undefined };
      waiter.timer = this.timers.set(() => {
        if (this.drainWaiter !== waiter) return;
        this.drainWaiter = null;
        this.reopen();
        resolve('in_progress');
      }, drainTimeoutMs);
      this.drainWaiter = waiter;
    });
  }

  /** Commit or abort of a granted snapshot: reopen and hand leases to the waiting deltas. */
  releaseSnapshot(): void {
    if (!this.snapshotHeld) throw new Error('write gate: releaseSnapshot without holding the gate');
    this.reopen();
  }

  /**
   * HOST_DOWN, tombstoning or shutdown (§7.5, §9.3): every waiter resolves `snapshot_required`.
   * A snapshot already writing keeps the gate; its epoch check fails it.
   */
  wakeAll(): void {
    for (const w of this.deltaWaiters) {
      this.timers.clear(w.timer);
      w.resolve('snapshot_required');
    }
    this.deltaWaiters.clear();
    if (this.drainWaiter) {
      const w = this.drainWaiter;
      this.drainWaiter = null;
      this.timers.clear(w.timer);
      this.snapshotHeld = false;
      w.resolve('snapshot_required');
    }
  }

  private reopen(): void {
    this.snapshotHeld = false;
    // Hand the leases over synchronously so a snapshot arriving next must drain these deltas
    // (§7.7: a snapshot never overtakes a leased delta).
    for (const w of this.deltaWaiters) {
      this.timers.clear(w.timer);
      this.leases++;
      w.resolve('granted');
    }
    this.deltaWaiters.clear();
  }
}
