/**
 * Per-reporter state of reportEvent (kvcm-meta §7.5, §7.9), process memory only (§7.13: a
 * restart forgets every reporter, so all are UNKNOWN). A reporter is `instance_id +
 * storage_type + host_ip_port`; all methods are synchronous, which makes creating a reporter
 * and its first generation atomic under concurrent requests (D-04).
 *
 * Liveness is evaluated at read time from `last_seen` and the caller's `nowMs`; the periodic
 * checker only applies the effects of expiry (§7.9).
 */
import { randomBytes } from 'node:crypto';
import { WriteGate, realTimers, type GateTimers } from './write-gate.js';
import type { EventReportStorageType } from './report-location-id.js';
import { DEFAULT_EVENT_REPORT_TIMINGS, type EventReportTimings } from '../config/event-report-timings.js';

export type ReporterLiveness = 'UNKNOWN' | 'AVAILABLE' | 'UNAVAILABLE' | 'TOMBSTONED';

export interface ReporterIdentity {
  readonly instanceId: string;
  readonly storageType: EventReportStorageType;
  readonly hostIpPort: string;
  /** Config `global_unique_name` of the group's event-report storage of that type. */
  readonly storageName: string;
}

/** Mutable state of one reporter; only the registry and the reportEvent executor write it. */
export interface Reporter extends ReporterIdentity {
  readonly key: string;
  timings: EventReportTimings;
  lastSeenMs: number;
  tombstoned: boolean;
  readonly media: Set<string>;
  /** s_version of deltas; '' = none (§7.5). */
  generation: string;
  /** Committed snapshot token; set = strict visibility (§7.10 (6)). */
  fence: string;
  /** Token of a snapshot being written, '' when none: protects its rows from cleanup (§7.11). */
  candidate: string;
  /**
   * A committed snapshot (its token) whose staged rows are still landing on the shared store,
   * '' when none (offloaded-writes.ts: roll-forward). Always '' on SQLite.
   */
  applying: string;
  /** Lifecycle epoch: bumped by REGISTER and tombstoning; runs compare it before writing (§7.5). */
  epoch: number;
  /** No snapshot before this (§7.8); 0 = none. */
  rateLimitDeadlineMs: number;
  readonly gate: WriteGate;
}

/**
 * A reporter's shared state (§9.4: the registry, generations, rate limit and liveness are shared
 * between replicas). The gate is not in it: across replicas the reporter's lock is the gate.
 */
export interface ReporterRecord {
  readonly storageName: string;
  readonly lastSeenMs: number;
  readonly tombstoned: boolean;
  readonly media: readonly string[];
  readonly generation: string;
  readonly fence: string;
  readonly candidate: string;
  /** Absent in records of replicas that predate it: ''. */
  readonly applying?: string;
  readonly epoch: number;
  readonly rateLimitDeadlineMs: number;
}

/** Called once per tombstoning (HOST_DOWN, grace expiry) with the epoch the cleanup must still see (§7.11). */
export type TombstoneListener = (reporter: Reporter, epoch: number) => void;

export function reporterKey(instanceId: string, storageType: number, hostIpPort: string): string {
  // instance ids have no control characters (§4.1), so NUL cannot collide.
  return `${instanceId}\u0000${storageType}\u0000${hostIpPort}`;
}

/** The identity parts of a `reporterKey`; null for any other text. */
export function parseReporterKey(key: string): { instanceId: string; storageType: number; hostIpPort: string } | null {
  const parts = key.split('\u0000');
  if (parts.length !== 3 || !/^\d+$/.test(parts[1]!)) return null;
  return { instanceId: parts[0]!, storageType: Number(parts[1]), hostIpPort: parts[2]! };
}

/** 32 lowercase hex from a CSPRNG (§7.6). */
export function newVersionToken(): string {
  return randomBytes(16).toString('hex');
}

export class ReporterRegistry {
  private readonly reporters = new Map<string, Reporter>();
  private readonly listeners: TombstoneListener[] = [];

  constructor(
    private readonly timingsFor: (storageName: string) => EventReportTimings = () => DEFAULT_EVENT_REPORT_TIMINGS,
    private readonly timers: GateTimers = realTimers,
  ) {}

  /** The timings of one event-report storage (per-storage overrides applied, §8). */
  timingsOf(storageName: string): EventReportTimings {
    return this.timingsFor(storageName);
  }

  onTombstone(listener: TombstoneListener): void {
    this.listeners.push(listener);
  }

  get(instanceId: string, storageType: number, hostIpPort: string): Reporter | undefined {
    return this.reporters.get(reporterKey(instanceId, storageType, hostIpPort));
  }

  /** True while `reporter` is the record registered under its key (lets readers cache a lookup). */
  holds(reporter: Reporter): boolean {
    return this.reporters.get(reporter.key) === reporter;
  }

  all(): IterableIterator<Reporter> {
    return this.reporters.values();
  }

  /** §7.9 at read time. An expired reporter reads TOMBSTONED even before the checker ran. */
  liveness(reporter: Reporter | undefined, nowMs: number): ReporterLiveness {
    if (!reporter) return 'UNKNOWN';
    if (reporter.tombstoned) return 'TOMBSTONED';
    const idleMs = nowMs - reporter.lastSeenMs;
    const t = reporter.timings;
    if (idleMs > t.heartbeatTimeoutMs + t.cleanupGraceMs) return 'TOMBSTONED';
    if (idleMs > t.heartbeatTimeoutMs) return 'UNAVAILABLE';
    return 'AVAILABLE';
  }

  livenessOf(instanceId: string, storageType: number, hostIpPort: string, nowMs: number): ReporterLiveness {
    return this.liveness(this.get(instanceId, storageType, hostIpPort), nowMs);
  }

  /** §7.5 REGISTER: create or clear the tombstone, merge media, refresh, new epoch. Never creates a generation. */
  register(id: ReporterIdentity, media: Iterable<string>, nowMs: number): Reporter {
    const r = this.settle(this.reporters.get(reporterKey(id.instanceId, id.storageType, id.hostIpPort)), nowMs) ?? this.create(id, nowMs);
    if (r.tombstoned) {
      // New lifecycle after a tombstone: no generation, no fence, fresh media (§7.5, §7.9).
      r.tombstoned = false;
      r.generation = '';
      r.fence = '';
      r.media.clear();
      r.rateLimitDeadlineMs = 0;
      r.timings = this.timingsFor(id.storageName);
    }
    for (const m of media) r.media.add(m);
    r.lastSeenMs = nowMs;
    r.epoch++;
    return r;
  }

  /** §7.5 HEARTBEAT: lazily create, refresh `last_seen`. null when tombstoned (NODE_NOT_REGISTERED). */
  heartbeat(id: ReporterIdentity, nowMs: number): Reporter | null {
    const r = this.admit(id, nowMs);
    if (r) r.lastSeenMs = nowMs;
    return r;
  }

  /**
   * Admission of ADD/DELETE/SNAPSHOT (§7.5): lazily create an unknown reporter (AVAILABLE, §7.9);
   * null when tombstoned. Never refreshes `last_seen` of an existing reporter.
   */
  admit(id: ReporterIdentity, nowMs: number): Reporter | null {
    const existing = this.settle(this.reporters.get(reporterKey(id.instanceId, id.storageType, id.hostIpPort)), nowMs);
    if (existing) return existing.tombstoned ? null : existing;
    return this.create(id, nowMs);
  }

  /** The delta generation, created on first use (§7.5 ADD/DELETE). */
  ensureGeneration(r: Reporter): string {
    if (r.generation === '') r.generation = newVersionToken();
    return r.generation;
  }

  /**
   * §7.5 HOST_DOWN. Unknown reporters get a tombstoned record so their persisted history is
   * cleaned like any other tombstone; repeats are no-ops.
   */
  hostDown(id: ReporterIdentity, nowMs: number): void {
    let r = this.settle(this.reporters.get(reporterKey(id.instanceId, id.storageType, id.hostIpPort)), nowMs);
    if (!r) r = this.create(id, nowMs);
    if (!r.tombstoned) this.tombstone(r);
    // A repeat re-queues the cleanup (same epoch) in case an earlier pass failed.
    else for (const l of this.listeners) l(r, r.epoch);
  }

  /** The checker's pass (§7.9): tombstone every reporter past timeout + grace. */
  expire(nowMs: number): void {
    for (const r of this.reporters.values()) this.settle(r, nowMs);
  }

  /** The shared part of a reporter's state (§9.4). */
  toRecord(r: Reporter): ReporterRecord {
    return {
      storageName: r.storageName,
      lastSeenMs: r.lastSeenMs,
      tombstoned: r.tombstoned,
      media: [...r.media],
      generation: r.generation,
      fence: r.fence,
      candidate: r.candidate,
      applying: r.applying,
      epoch: r.epoch,
      rateLimitDeadlineMs: r.rateLimitDeadlineMs,
    };
  }

  /**
   * Another replica's committed state of a reporter (§9.4), applied in place: the Reporter
   * object (and its local gate) stays the same, so readers' cached references stay valid.
   */
  applyRecord(id: { readonly instanceId: string; readonly storageType: number; readonly hostIpPort: string }, rec: ReporterRecord): Reporter {
    let r = this.reporters.get(reporterKey(id.instanceId, id.storageType, id.hostIpPort));
    // Records are only ever saved for event-report storage types (§7.2 step 2 admitted them).
    r ??= this.create({ ...id, storageType: id.storageType as EventReportStorageType, storageName: rec.storageName }, rec.lastSeenMs);
    r.lastSeenMs = rec.lastSeenMs;
    r.tombstoned = rec.tombstoned;
    r.media.clear();
    for (const m of rec.media) r.media.add(m);
    r.generation = rec.generation;
    r.fence = rec.fence;
    r.candidate = rec.candidate;
    r.applying = rec.applying ?? '';
    r.epoch = rec.epoch;
    r.rateLimitDeadlineMs = rec.rateLimitDeadlineMs;
    return r;
  }

  /** Shutdown (§9.3): gate waiters get SNAPSHOT_REQUIRED; in-flight runs fail their epoch check. */
  wakeAllForShutdown(): void {
    for (const r of this.reporters.values()) {
      r.epoch++;
      r.gate.wakeAll();
    }
  }

  private create(id: ReporterIdentity, nowMs: number): Reporter {
    const r: Reporter = {
      instanceId: id.instanceId,
      storageType: id.storageType,
      hostIpPort: id.hostIpPort,
      storageName: id.storageName,
      key: reporterKey(id.instanceId, id.storageType, id.hostIpPort),
      timings: this.timingsFor(id.storageName),
      lastSeenMs: nowMs,
      tombstoned: false,
      media: new Set(),
      generation: '',
      fence: '',
      candidate: '',
      applying: '',
      epoch: 0,
      rateLimitDeadlineMs: 0,
      gate: new WriteGate(this.timers),
    };
    this.reporters.set(r.key, r);
    return r;
  }

  /** Applies a pending expiry tombstone before the reporter is used. */
  private settle(r: Reporter | undefined, nowMs: number): Reporter | undefined {
    if (r && !r.tombstoned && this.liveness(r, nowMs) === 'TOMBSTONED') this.tombstone(r);
    return r;
  }

  /** §7.5 HOST_DOWN effects: hidden at once, generation and fence cleared, new epoch, waiters woken, cleanup queued. */
  private tombstone(r: Reporter): void {
    r.tombstoned = true;
    r.generation = '';
    r.fence = '';
    r.epoch++;
    r.gate.wakeAll();
    for (const l of this.listeners) l(r, r.epoch);
  }
}
