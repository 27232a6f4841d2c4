/**
 * The MetaService data path's shared parts (kvcm-meta §5.2–§5.5, §6): store, instance view,
 * §7.10 visibility, group lock, write sessions, hit statistics, the block-key hasher and limits.
 * `createDataPath` builds them; `startDataPath` runs the §9.1 startup cleanup before serving.
 * The RPC modules (rpc/write-cache.ts, rpc/lookup.ts, …) receive this object.
 */
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import type { Logger } from '../../shared/log/logger.js';
import type { MetaMetrics } from '../http/meta-metrics.js';
import { BLOCK_KEY_HASH_SEED } from '../keys/block-key-resolver.js';
import type { DataPathInstances } from '../lookup/data-path-instance.js';
import type { EventReportVisibility } from '../report/event-report-visibility.js';
import type { MetaStore } from '../store/meta-store.js';
import { GroupLock } from './group-lock.js';
import { HitStatistics } from './hit-statistics.js';
import type { SessionTimers } from './session-timers.js';
import { systemSessionTimers } from './session-timers.js';
import { deleteUnfinishedLocations } from './startup-cleanup.js';
import { WriteSessions } from './write-sessions.js';
import type { SessionBook } from './session-book.js';

export interface DataPathLimits {
  /** §8 `limits.max_keys_per_request` (100000). */
  readonly maxKeysPerRequest: number;
  /** §8 `write.default_timeout_seconds` (30). */
  readonly defaultWriteTimeoutSeconds: number;
  /** §8 `write.max_timeout_seconds` (3600). */
  readonly maxWriteTimeoutSeconds: number;
}

export const DEFAULT_DATA_PATH_LIMITS: DataPathLimits = Object.freeze({
  maxKeysPerRequest: 100000,
  defaultWriteTimeoutSeconds: 30,
  maxWriteTimeoutSeconds: 3600,
});

export interface DataPathOptions {
  readonly store: MetaStore;
  readonly instances: DataPathInstances;
  readonly visibility: EventReportVisibility;
  readonly metrics: MetaMetrics;
  readonly log: Logger;
  readonly limits?: DataPathLimits;
  /** Injected clock and timers (tests expire sessions without sleeping). */
  readonly timers?: SessionTimers;
  /**
   * Shared store (§9.4): sessions shared with the other replicas, swept by the background-lease
   * holder; no startup deletion of CLS_WRITING rows, which may be another replica's open session.
   */
  readonly shared?: { readonly book: SessionBook; readonly backgroundHolder: () => boolean };
}

export interface DataPath {
  readonly store: MetaStore;
  readonly instances: DataPathInstances;
  readonly visibility: EventReportVisibility;
  readonly metrics: MetaMetrics;
  readonly log: Logger;
  readonly limits: DataPathLimits;
  readonly timers: SessionTimers;
  readonly lock: GroupLock;
  readonly sessions: WriteSessions;
  readonly hits: HitStatistics;
  readonly hasher: ContentKeyHasher;
  readonly shared: DataPathOptions['shared'];
  /** The shared-session sweep timer (§9.4), running while started. */
  sweepTimer: ReturnType<typeof setInterval> | null;
}

/** How often the background-lease holder looks for expired shared sessions. */
const SESSION_SWEEP_MS = 1000;

export async function createDataPath(opts: DataPathOptions): Promise<DataPath> {
  const lock = new GroupLock();
  const timers = opts.timers ?? systemSessionTimers;
  const log = opts.log;
  return {
    store: opts.store,
    instances: opts.instances,
    visibility: opts.visibility,
    metrics: opts.metrics,
    log,
    limits: opts.limits ?? DEFAULT_DATA_PATH_LIMITS,
    timers,
    lock,
    sessions: new WriteSessions({ store: opts.store, instances: opts.instances, lock, timers, log, metrics: opts.metrics, book: opts.shared?.book }),
    hits: new HitStatistics(opts.store, log),
    hasher: await ContentKeyHasher.forSeed(BLOCK_KEY_HASH_SEED),
    shared: opts.shared,
    sweepTimer: null,
  };
}

/** §9.1 startup: delete CLS_WRITING (and finish CLS_DELETING) locations, then start the hit flush. */
export async function startDataPath(dp: DataPath): Promise<void> {
  const shared = dp.shared;
  if (shared) {
    // §9.4: sessions live in the shared store; expired ones (a dead replica's too) are swept by
    // the lease holder instead of deleting every CLS_WRITING row at start.
    dp.sweepTimer = setInterval(() => {
      if (!shared.backgroundHolder()) return;
      dp.sessions.sweepExpired().catch((err: unknown) => dp.log.warn({ err }, 'shared write session sweep failed'));
    }, SESSION_SWEEP_MS);
    dp.sweepTimer.unref();
    dp.log.info('meta data path ready: write sessions shared (§9.4)');
  } else {
    const deleted = await deleteUnfinishedLocations(dp.store);
    if (deleted > 0) dp.metrics.cleanupDeletedLocationsTotal.inc({ reason: 'startup_writing' }, deleted);
    dp.log.info({ deleted }, 'meta data path ready: unfinished write locations removed (§9.1)');
  }
  dp.hits.startTimer();
}

/** Shutdown (§9.3): sessions dropped, statistics flushed. The caller closes the store after. */
export async function stopDataPath(dp: DataPath): Promise<void> {
  if (dp.sweepTimer) clearInterval(dp.sweepTimer);
  dp.sweepTimer = null;
  dp.sessions.close();
  await dp.hits.close();
}
