/**
 * Background metadata cleanup of event-report locations (kvcm-meta §7.11). Best effort, one job
 * at a time, ≤ 256 locations per transaction, every delete conditional on the row revision seen
 * by the scan and on the trigger's condition re-checked right before the write. Metadata only:
 * it never contacts a stored URI.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { MetaStore, ScannedLocation, StoreMutation } from '../store/meta-store.js';
import { parseReportLocationId, reportLocationIdPrefix, storedSVersion } from './report-location-id.js';
import type { Reporter, ReporterRegistry } from './reporter-registry.js';

export type CleanupReason = 'snapshot' | 'tombstone' | 'orphan';

type CleanupJob =
  | { readonly reason: 'snapshot'; readonly reporter: Reporter; readonly fence: string }
  | { readonly reason: 'tombstone'; readonly reporter: Reporter; readonly epoch: number }
  | { readonly reason: 'orphan' };

/** §7.11: ≤ 256 locations per transaction. */
export const CLEANUP_BATCH = 256;
/**
 * Work per tick: after this many pages (2048 rows) the job sleeps CLEANUP_PAUSE_MS, and it
 * yields to the event loop after every page, so 200k rows of cleanup never hold the service
 * (SQLite calls are synchronous) — lookups and deltas run between the pages (issue 16).
 */
export const CLEANUP_PAGES_PER_TICK = 8;
export const CLEANUP_PAUSE_MS = 5;

export interface ReportCleanupDeps {
  readonly store: MetaStore;
  readonly registry: ReporterRegistry;
  readonly logger: Logger;
  /** Called with the number of locations deleted per batch (kvcm_cleanup_deleted_locations_total). */
  readonly onDeleted?: (reason: CleanupReason, count: number) => void;
  /**
   * Brings the reporter registry up to date before each page's conditions are checked (§9.4:
   * another replica may have re-registered a reporter; an orphan pass must know every reporter).
   */
  readonly refresh?: () => Promise<void>;
  /** Defaults CLEANUP_PAGES_PER_TICK / CLEANUP_PAUSE_MS (benchmarks vary them). */
  readonly pagesPerTick?: number;
  readonly pauseMs?: number;
}

export class ReportCleanup {
  private readonly queue: CleanupJob[] = [];
  /** Jobs whose pass failed; re-queued by `retryFailed` on the next checker tick. */
  private failed: CleanupJob[] = [];
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly deps: ReportCleanupDeps) {
    deps.registry.onTombstone((reporter, epoch) => this.enqueue({ reason: 'tombstone', reporter, epoch }));
  }

  /** After a snapshot commit: the reporter's locations without the new fence (§7.11 row 1). */
  afterSnapshot(reporter: Reporter): void {
    this.enqueue({ reason: 'snapshot', reporter, fence: reporter.fence });
  }

  /**
   * Again the tombstone pass of a reporter still tombstoned with its current epoch: rows landed
   * after the first pass went by (a snapshot stage finished late, §9.4 roll-forward).
   */
  afterTombstone(reporter: Reporter): void {
    if (reporter.tombstoned) this.enqueue({ reason: 'tombstone', reporter, epoch: reporter.epoch });
  }

  /** Restart orphans: locations of reporters still UNKNOWN after timeout + grace (§7.13). */
  orphans(): void {
    this.enqueue({ reason: 'orphan' });
  }

  /** Re-run jobs that failed (store errors); their conditions are re-checked at deletion time. */
  retryFailed(): void {
    const jobs = this.failed;
    this.failed = [];
    for (const job of jobs) this.enqueue(job);
  }

  /** Resolves when the queue is empty (tests and shutdown). */
  async idle(): Promise<void> {
    while (this.running) await this.running;
  }

  /** No new jobs; the running batch finishes. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.queue.length = 0;
    await this.idle();
  }

  private enqueue(job: CleanupJob): void {
    if (this.stopped) return;
    this.queue.push(job);
    if (!this.running) this.running = this.drain();
  }

  private async drain(): Promise<void> {
    try {
      for (let job = this.queue.shift(); job && !this.stopped; job = this.queue.shift()) {
        try {
          await this.run(job);
        } catch (err) {
          // Best effort (§7.11): the data stays hidden; the job is retried on the next checker tick.
          this.deps.logger.warn({ err, reason: job.reason }, 'event-report cleanup failed');
          this.failed.push(job);
        }
      }
    } finally {
      this.running = null;
    }
  }

  private async run(job: CleanupJob): Promise<void> {
    const { store } = this.deps;
    const instanceId = job.reason === 'orphan' ? null : job.reporter.instanceId;
    const prefix = job.reason === 'orphan' ? 'kvs#' : reportLocationIdPrefix(job.reporter.storageType);
    let cursor: string | null = null;
    const pagesPerTick = this.deps.pagesPerTick ?? CLEANUP_PAGES_PER_TICK;
    let pages = 0;
    do {
      if (this.stopped) return;
      // Keyset paging (each page starts after the last row seen), bounded work per tick.
      if (pages > 0) await (pages % pagesPerTick === 0 ? sleep(this.deps.pauseMs ?? CLEANUP_PAUSE_MS) : yieldToLoop());
      pages++;
      const page = await store.scanLocations(instanceId, { locationIdPrefix: prefix }, cursor, CLEANUP_BATCH);
      cursor = page.cursor;
      if (this.deps.refresh) await this.deps.refresh();
      // Condition re-checked here, with no await before the write (§7.11 "at deletion time").
      const mutations: StoreMutation[] = [];
      for (const item of page.items) {
        if (this.shouldDelete(job, item)) {
          mutations.push({
            op: 'deleteLocationIf',
            instanceId: item.instanceId,
            blockKey: item.blockKey,
            locationId: item.location.locationId,
            expectRev: item.location.rev,
          });
        }
      }
      if (mutations.length > 0) {
        const results = await store.apply(mutations);
        let deleted = 0;
        for (const r of results) if (r.applied) deleted++;
        if (deleted > 0) this.deps.onDeleted?.(job.reason, deleted);
      }
    } while (cursor !== null);
  }

  private shouldDelete(job: CleanupJob, item: ScannedLocation): boolean {
    const id = parseReportLocationId(item.location.locationId);
    if (!id) return false;
    if (job.reason === 'orphan') {
      // Still UNKNOWN: no reporter of that identity has been seen since start.
      return this.deps.registry.get(item.instanceId, id.storageType, id.hostIpPort) === undefined;
    }
    const r = job.reporter;
    if (id.storageType !== r.storageType || id.hostIpPort !== r.hostIpPort) return false;
    if (job.reason === 'tombstone') return r.tombstoned && r.epoch === job.epoch;
    // Snapshot: only while that fence is still current (a failed or newer snapshot changes it),
    // and never a row carrying the fence or an in-flight candidate.
    if (r.fence !== job.fence || r.fence === '') return false;
    for (const spec of item.location.specs) {
      const v = storedSVersion(spec.uri);
      if (v !== null && v !== '' && (v === r.fence || v === r.candidate)) return false;
    }
    return true;
  }
}

function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}
