/**
 * kvcm-meta §8 `event_report` timings: the config reads them (per storage after overrides) and
 * the reporter registry runs on them, so the shape and its defaults are declared once here.
 */

/** §8 `event_report` timings, resolved for one event-report storage (per-storage overrides applied). */
export interface EventReportTimings {
  readonly heartbeatTimeoutMs: number;
  readonly cleanupGraceMs: number;
  readonly livenessCheckIntervalMs: number;
  readonly snapshotMinIntervalMs: number;
  readonly snapshotDeltaDrainTimeoutMs: number;
}

/** §8 defaults (an `event_report` left out of the config). */
export const DEFAULT_EVENT_REPORT_TIMINGS: EventReportTimings = Object.freeze({
  heartbeatTimeoutMs: 30000,
  cleanupGraceMs: 300000,
  livenessCheckIntervalMs: 5000,
  snapshotMinIntervalMs: 30000,
  snapshotDeltaDrainTimeoutMs: 10000,
});
