/**
 * The reporter liveness checker (kvcm-meta §7.9) and the restart-orphan trigger (§7.13, §7.11):
 * every `liveness_check_interval_ms` it tombstones expired reporters (the registry queues their
 * cleanup) and, once `heartbeat_timeout_ms + cleanup_grace_ms` have passed since start, queues
 * one cleanup of the locations whose reporters are still UNKNOWN. `tick()` is public so tests
 * drive it with an injected clock.
 */
import type { ReportCleanup } from './report-cleanup.js';
import type { ReporterLiveness, ReporterRegistry } from './reporter-registry.js';

export interface ReportLifecycleOptions {
  readonly registry: ReporterRegistry;
  readonly cleanup: ReportCleanup;
  readonly nowMs: () => number;
  /** Smallest `liveness_check_interval_ms` over the event-report storages. */
  readonly checkIntervalMs: number;
  /** Largest `heartbeat_timeout_ms + cleanup_grace_ms` over the event-report storages. */
  readonly orphanAfterMs: number;
  /** Per tick: reporter counts by storage type and state (kvcm_event_reporters). */
  readonly onCounts?: (counts: ReadonlyMap<string, number>) => void;
  /** §9.4: false on a replica that does not hold the background lease (its ticks only count). */
  readonly isBackgroundHolder?: () => boolean;
  /** Runs before each timer tick (§9.4: catch up with the other replicas before judging expiry). */
  readonly refresh?: () => Promise<void>;
  /** Background work of the lease holder beyond expiry (§9.4: landing a dead replica's snapshot stage). */
  readonly onHolderTick?: () => void;
}

export class ReportLifecycle {
  private readonly startedAtMs: number;
  private orphansQueued = false;
  private timer: ReturnType<typeof setInterval> | null = null;

  constructor(private readonly opts: ReportLifecycleOptions) {
    this.startedAtMs = opts.nowMs();
  }

  start(): void {
    if (this.timer) return;
    const refresh = this.opts.refresh;
    this.timer = setInterval(() => {
      if (!refresh) return this.tick();
      // A failed catch-up (store unreachable) skips this tick rather than judging stale state.
      refresh().then(
        () => this.tick(),
        () => undefined,
      );
    }, this.opts.checkIntervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  tick(): void {
    const now = this.opts.nowMs();
    const holder = this.opts.isBackgroundHolder?.() ?? true;
    if (holder) this.opts.registry.expire(now);
    this.opts.cleanup.retryFailed();
    if (holder) this.opts.onHolderTick?.();
    if (holder && !this.orphansQueued && now - this.startedAtMs > this.opts.orphanAfterMs) {
      this.orphansQueued = true;
      this.opts.cleanup.orphans();
    }
    if (this.opts.onCounts) {
      // Key `<storage_type>|<state>`; every state printed so a gauge drops to 0.
      const counts = new Map<string, number>();
      for (const type of ['7', '8']) for (const s of STATES) counts.set(`${type}|${s}`, 0);
      for (const r of this.opts.registry.all()) {
        const k = `${r.storageType}|${this.opts.registry.liveness(r, now)}`;
        counts.set(k, (counts.get(k) ?? 0) + 1);
      }
      this.opts.onCounts(counts);
    }
  }
}

const STATES: readonly ReporterLiveness[] = ['AVAILABLE', 'UNAVAILABLE', 'TOMBSTONED'];
