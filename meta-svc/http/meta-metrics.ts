/**
 * Every kvcm-meta §9.3 metric, on one prom-client Registry per MetaService (not the global
 * default, so several services in one test process never collide). Other MetaService parts
 * receive this object through the service deps and increment the metric they own. Beyond §9.3:
 * `kvcm_ready` (meta-http-server.ts, what `/health` answers, for alerts) and, when asked, the
 * process metrics every service exports.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createMetricsRegistry } from '../../shared/metrics/metrics-registry.js';

export interface MetaMetrics {
  readonly registry: Registry;
  /** `api` = RPC name or route; `code` = ErrorCode name for 200s, `http_<status>` otherwise (§1.2). */
  readonly httpRequestsTotal: Counter<'api' | 'code'>;
  readonly httpRequestDurationSeconds: Histogram<'api'>;
  /** `result` = hit | miss | masked. */
  readonly lookupBlocksTotal: Counter<'api' | 'result'>;
  readonly writeSessionsActive: Gauge;
  readonly writeSessionsExpiredTotal: Counter;
  readonly writeSessionInstanceMismatchTotal: Counter;
  readonly reportEventItemsTotal: Counter<'event_type' | 'code'>;
  readonly eventReporters: Gauge<'storage_type' | 'state'>;
  readonly snapshotTotal: Counter<'result'>;
  readonly cleanupDeletedLocationsTotal: Counter<'reason'>;
  readonly storeTxDurationSeconds: Histogram<'op'>;
  /** Stops the event-loop delay sampling behind `kvcm_event_loop_delay_max_seconds` (service close). */
  stopLoopMonitor(): void;
}

/** Event-loop delay sampling period: a stall shows up within this much of its length. */
const LOOP_SAMPLE_MS = 5;

/** `processMetrics`: prom-client's `process_*` / `nodejs_*` (default false, see MetaServiceOptions). */
export function createMetaMetrics(opts: { readonly processMetrics?: boolean } = {}): MetaMetrics {
  const registry = createMetricsRegistry({ processMetrics: opts.processMetrics ?? false });
  const registers = [registry];
  const loop: IntervalHistogram = monitorEventLoopDelay({ resolution: LOOP_SAMPLE_MS });
  loop.enable();
  // Issue 28: how long the event loop was held (a big request must never hold it for long).
  new Gauge({
    name: 'kvcm_event_loop_delay_max_seconds',
    help: 'Longest event-loop delay since the previous scrape (reset by each scrape): how long the MetaService could not answer anything.',
    registers,
    collect() {
      this.set(loop.count > 0 ? loop.max / 1e9 : 0);
      loop.reset();
    },
  });
  return {
    stopLoopMonitor: () => loop.disable(),
    registry,
    httpRequestsTotal: new Counter({
      name: 'kvcm_http_requests_total',
      help: 'MetaService HTTP requests by API and outcome (ErrorCode name, or http_<status>).',
      labelNames: ['api', 'code'],
      registers,
    }),
    httpRequestDurationSeconds: new Histogram({
      name: 'kvcm_http_request_duration_seconds',
      help: 'MetaService HTTP request latency.',
      labelNames: ['api'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    }),
    lookupBlocksTotal: new Counter({
      name: 'kvcm_lookup_blocks_total',
      help: 'Blocks looked up, by API and result (hit, miss, masked).',
      labelNames: ['api', 'result'],
      registers,
    }),
    writeSessionsActive: new Gauge({
      name: 'kvcm_write_sessions_active',
      help: 'Open write sessions.',
      registers,
    }),
    writeSessionsExpiredTotal: new Counter({
      name: 'kvcm_write_sessions_expired_total',
      help: 'Write sessions finished by expiry with every block failed.',
      registers,
    }),
    writeSessionInstanceMismatchTotal: new Counter({
      name: 'kvcm_write_session_instance_mismatch_total',
      help: 'finishWriteCache calls naming another instance than the session (§6 step 7).',
      registers,
    }),
    reportEventItemsTotal: new Counter({
      name: 'kvcm_report_event_items_total',
      help: 'reportEvent items by event type and result code.',
      labelNames: ['event_type', 'code'],
      registers,
    }),
    eventReporters: new Gauge({
      name: 'kvcm_event_reporters',
      help: 'Event reporters by storage type and liveness state.',
      labelNames: ['storage_type', 'state'],
      registers,
    }),
    snapshotTotal: new Counter({
      name: 'kvcm_snapshot_total',
      help: 'Block snapshots by result.',
      labelNames: ['result'],
      registers,
    }),
    cleanupDeletedLocationsTotal: new Counter({
      name: 'kvcm_cleanup_deleted_locations_total',
      help: 'Locations deleted by background cleanup, by reason.',
      labelNames: ['reason'],
      registers,
    }),
    storeTxDurationSeconds: new Histogram({
      name: 'kvcm_store_tx_duration_seconds',
      help: 'MetaStore transaction latency by operation.',
      labelNames: ['op'],
      buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1],
      registers,
    }),
  };
}
