/**
 * The reportEvent subsystem of one MetaService process (kvcm-meta §7), wired from its parts:
 * reporter registry, visibility for the lookups, executor, background cleanup and the liveness
 * checker. `startMetaService` creates one, hands `visibility` to the lookups and registers the
 * RPC with `registerReportEventRpc`.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { MetaMetrics } from '../http/meta-metrics.js';
import { StorageType, enumName } from '../meta-enums.js';
import type { MetaStore } from '../store/meta-store.js';
import { ReporterVisibility, type EventReportVisibility } from './event-report-visibility.js';
import { ReportCleanup } from './report-cleanup.js';
import { ReportEventExecutor } from './report-event-executor.js';
import { ReportLifecycle } from './report-lifecycle.js';
import { ReporterRegistry } from './reporter-registry.js';
import { DEFAULT_EVENT_REPORT_TIMINGS, type EventReportTimings } from '../config/event-report-timings.js';
import { realTimers, type GateTimers } from './write-gate.js';
import { LOCAL_REPORTER_SYNC, type ReporterSync } from './reporter-sync.js';
import type { OffloadedWrites, SnapshotStages } from './offloaded-writes.js';

export interface EventReportingOptions {
  readonly store: MetaStore;
  readonly logger: Logger;
  readonly nowMs: () => number;
  /** Timings of one event-report storage (per-storage overrides applied, §8). */
  readonly timingsFor?: (storageName: string) => EventReportTimings;
  /** Every configured event-report storage's timings, for the checker interval and the orphan delay. */
  readonly allTimings?: readonly EventReportTimings[];
  readonly maxEventsPerRequest?: number;
  readonly metrics?: MetaMetrics;
  readonly timers?: GateTimers;
  /** Shares the registry with other replicas (§9.4); default: this process only. */
  readonly sync?: (registry: ReporterRegistry) => ReporterSync;
  /** The report worker's writes for big requests (issue 28); absent: every request is written here. */
  readonly offload?: OffloadedWrites;
  /** The shared store's snapshot stages (Redis, §9.4), landed by the roll-forward. */
  readonly stages?: SnapshotStages;
}

export interface EventReporting {
  readonly registry: ReporterRegistry;
  readonly sync: ReporterSync;
  readonly visibility: EventReportVisibility;
  readonly executor: ReportEventExecutor;
  readonly cleanup: ReportCleanup;
  readonly lifecycle: ReportLifecycle;
  /** §9.3 drain: wake gate waiters with SNAPSHOT_REQUIRED. */
  drain(): void;
  /** Stop the checker and let the running cleanup batch finish (before the store closes). */
  close(): Promise<void>;
}

export function createEventReporting(opts: EventReportingOptions): EventReporting {
  const timingsFor = opts.timingsFor ?? (() => DEFAULT_EVENT_REPORT_TIMINGS);
  const all = opts.allTimings && opts.allTimings.length > 0 ? opts.allTimings : [DEFAULT_EVENT_REPORT_TIMINGS];
  const registry = new ReporterRegistry(timingsFor, opts.timers ?? realTimers);
  const metrics = opts.metrics;
  const sync = opts.sync?.(registry) ?? LOCAL_REPORTER_SYNC;
  const cleanup = new ReportCleanup({
    store: opts.store,
    registry,
    logger: opts.logger,
    refresh: opts.sync ? () => sync.catchUp() : undefined,
    onDeleted: metrics ? (reason, n) => metrics.cleanupDeletedLocationsTotal.inc({ reason }, n) : undefined,
  });
  const executor = new ReportEventExecutor({
    store: opts.store,
    registry,
    cleanup,
    nowMs: opts.nowMs,
    maxEventsPerRequest: opts.maxEventsPerRequest ?? 100000,
    logger: opts.logger,
    sync,
    onSnapshot: metrics ? (result) => metrics.snapshotTotal.inc({ result }) : undefined,
    offload: opts.offload,
    stages: opts.stages,
  });
  let maintaining = false;
  const maintainStages = (): void => {
    if (maintaining) return;
    maintaining = true;
    executor
      .maintainStages()
      .catch((err: unknown) => opts.logger.warn({ err }, 'snapshot stage maintenance failed; retried on the next check'))
      .finally(() => (maintaining = false));
  };
  const lifecycle = new ReportLifecycle({
    registry,
    cleanup,
    nowMs: opts.nowMs,
    // §9.4: expiry and orphan cleanup run on the replica holding the background lease only.
    isBackgroundHolder: sync.backgroundHolder,
    refresh: opts.sync ? () => sync.catchUp() : undefined,
    onHolderTick: opts.stages ? maintainStages : undefined,
    checkIntervalMs: Math.min(...all.map((t) => t.livenessCheckIntervalMs)),
    orphanAfterMs: Math.max(...all.map((t) => t.heartbeatTimeoutMs + t.cleanupGraceMs)),
    onCounts: metrics
      ? (counts) => {
          for (const [k, n] of counts) {
            const [type, state] = k.split('|') as [string, string];
            metrics.eventReporters.set({ storage_type: enumName(StorageType, Number(type)), state }, n);
          }
        }
      : undefined,
  });
  lifecycle.start();
  return {
    registry,
    sync,
    visibility: new ReporterVisibility(registry),
    executor,
    cleanup,
    lifecycle,
    drain: () => {
      registry.wakeAllForShutdown();
      sync.drain();
    },
    close: async () => {
      lifecycle.stop();
      await cleanup.stop();
    },
  };
}
