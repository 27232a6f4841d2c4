/**
 * How reporter state (kvcm-meta §7.5–§7.9) is shared between meta-svc replicas (§9.4). With the
 * embedded store there is one process and the registry is the truth (`LOCAL_REPORTER_SYNC`:
 * nothing to do). With Redis the registry is a mirror of shared records:
 *
 * - every RPC first catches up with the other replicas' saved changes (`catchUp`);
 * - every change of a reporter's state is a `transition`: under the reporter's cluster-wide
 *   lock, its shared record is reloaded, the change applied, the record saved (short: no store
 *   I/O inside), so creating a reporter and its first generation stays atomic (§7.5, D-04);
 * - the §7.7 gate spans replicas: after the local gate granted, a delta registers a cluster
 *   lease and a snapshot a cluster marker, each waiting for the other kind on other replicas
 *   with the same bounded wait (`acquireDelta` / `acquireSnapshot`).
 */
import type { ReporterIdentity } from './reporter-registry.js';

/** A granted cluster-wide gate hold; released when the run ends. */
export interface ClusterGateHold {
  /** The reporter's shared state was reloaded when the hold was granted (no `refresh` needed). */
  readonly refreshed?: boolean;
  release(): Promise<void>;
}

export interface ReporterSync {
  /** Brings the local registry up to date with every other replica's saved changes. */
  catchUp(): Promise<void>;
  /** Runs the synchronous state change `fn` on the freshest shared state and saves the result. */
  transition<T>(id: ReporterIdentity, fn: () => T): Promise<T>;
  /**
   * Reloads one reporter's shared state without changing it (no lock: one read). A run that
   * needs no state change (a live reporter that already has a generation) checks its epoch
   * against this instead of taking a transition (§7.5).
   */
  refresh(id: ReporterIdentity): Promise<void>;
  /** §7.7 across replicas: a delta waits (≤ `waitMs`) while another replica's snapshot holds the gate. */
  acquireDelta(id: ReporterIdentity, waitMs: number): Promise<ClusterGateHold | 'in_progress' | 'snapshot_required'>;
  /** §7.7 across replicas: refused at once when another replica's snapshot holds it; drains their deltas ≤ `waitMs`. */
  acquireSnapshot(id: ReporterIdentity, waitMs: number): Promise<ClusterGateHold | 'in_progress' | 'snapshot_required'>;
  /** §9.3 drain: waits for another replica's gate end at once with `snapshot_required`. */
  drain(): void;
  /** True when the lease of background work is this replica's (local: always). */
  readonly backgroundHolder: () => boolean;
}

const NO_HOLD: ClusterGateHold = Object.freeze({ release: () => Promise.resolve() });

export const LOCAL_REPORTER_SYNC: ReporterSync = {
  catchUp: () => Promise.resolve(),
  transition: (_id, fn) => Promise.resolve(fn()),
  refresh: () => Promise.resolve(),
  acquireDelta: () => Promise.resolve(NO_HOLD),
  acquireSnapshot: () => Promise.resolve(NO_HOLD),
  backgroundHolder: () => true,
  drain: () => undefined,
};
