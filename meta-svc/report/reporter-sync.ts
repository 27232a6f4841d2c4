/**
 * How reporter state (kvcm-meta §7.5–§7.9) is shared between meta-svc replicas (§9.4). With the
 * embedded store there is one process and the registry is the truth (`LOCAL_REPORTER_SYNC`:
 * nothing to do). With Redis the registry is a mirror of shared records: every RPC first catches
 * up with the other replicas' changes, and a reportEvent request runs holding its reporter's
 * cluster-wide lock, which is also the §7.7 gate across replicas (a snapshot holding it keeps the
 * same reporter's deltas waiting on every replica, with the same bounded wait).
 */
import type { Reporter, ReporterIdentity } from './reporter-registry.js';

/** What holds a reporter's lock: a snapshot refuses a second snapshot at once (§7.7). */
export type ReporterLockKind = 'snapshot' | 'delta';

/** `timeout`: not acquired within the wait; `snapshot_busy`: a snapshot holds it and we are one too. */
export type ReporterLockRefusal = 'timeout' | 'snapshot_busy';

export interface ReporterSync {
  /** Brings the local registry up to date with every other replica's committed changes. */
  catchUp(): Promise<void>;
  /**
   * Runs `fn` holding the reporter's lock, after reloading its shared record into the registry;
   * saves the record after `fn` (also when it throws). Local: runs `fn` at once.
   */
  withReporter<T>(id: ReporterIdentity, kind: ReporterLockKind, waitMs: number, fn: () => Promise<T>): Promise<T | ReporterLockRefusal>;
  /** Saves a reporter now, inside `withReporter` (a snapshot's candidate must be seen by cleanup elsewhere). */
  saveNow(reporter: Reporter): Promise<void>;
  /** True when the lease of background work is this replica's (local: always). */
  readonly backgroundHolder: () => boolean;
}

export const LOCAL_REPORTER_SYNC: ReporterSync = {
  catchUp: () => Promise.resolve(),
  withReporter: (_id, _kind, _waitMs, fn) => fn(),
  saveNow: () => Promise.resolve(),
  backgroundHolder: () => true,
};
