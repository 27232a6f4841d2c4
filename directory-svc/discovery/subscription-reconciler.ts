/**
 * The background task that makes the running subscribers match the plan (discovery.md "From
 * instances to streams"): every `refresh_interval_ms`, off any request path, it diffs the wanted
 * streams against the ones it added and calls the directory. It reads only the in-memory plan,
 * never etcd.
 *
 * A stream whose identity changed (replacement, new address, block size) is removed before its
 * successor is added, so a new engine process starts from an empty, unsynchronized subscriber and
 * gets no cache credit until its own snapshot has been applied.
 */
import type { Logger } from '../../shared/log/logger.js';
import { JoinedRun } from '../../shared/process/joined-run.js';
import { silentLogger } from '../../shared/log/logger.js';
import { byNameThenRank, streamKey } from '../../shared/keys/stream-key.js';
import type { SubscriberStreamConfig } from '../subscription/stream-config.js';
import type { PlanExclusion, PlannedStream, StreamPlan } from './stream-planner.js';

/** The directory's stream surface (`Directory.addStream` / `removeStream`). */
export interface StreamTarget {
  addStream(cfg: SubscriberStreamConfig): Promise<void>;
  removeStream(instanceName: string, dpRank: number): Promise<boolean>;
}

export interface ReconcileResult {
  readonly added: number;
  readonly removed: number;
  readonly failed: number;
}

export interface SubscriptionReconcilerOptions {
  readonly target: StreamTarget;
  /** Builds the current plan from the instance table (pure, cheap). */
  readonly plan: () => StreamPlan;
  /** `discovery.refresh_interval_ms` */
  readonly intervalMs: number;
  readonly logger?: Logger;
  /** Called after each pass (metrics, tests). */
  readonly onPass?: (result: ReconcileResult, plan: StreamPlan) => void;
}

export class SubscriptionReconciler {
  private readonly log: Logger;
  private readonly current = new Map<string, PlannedStream>();
  private timer: NodeJS.Timeout | null = null;
  private readonly passes = new JoinedRun(() => this.pass());
  private closed = false;
  private lastExclusionText = '';
  private lastPlanExclusions: readonly PlanExclusion[] = [];

  constructor(private readonly opts: SubscriptionReconcilerOptions) {
    this.log = opts.logger ?? silentLogger;
  }

  /** Streams this reconciler has added and not removed, in name then rank order. */
  streams(): PlannedStream[] {
    return [...this.current.values()].sort(byNameThenRank);
  }

  /** The exclusions of the latest plan (diagnostics). */
  get exclusions(): readonly PlanExclusion[] {
    return this.lastPlanExclusions;
  }

  /** Runs one pass now and then one every `intervalMs`. */
  start(): void {
    if (this.timer !== null || this.closed) return;
    void this.reconcile();
    this.timer = setInterval(() => void this.reconcile(), this.opts.intervalMs);
  }

  /**
   * One pass; a pass already running is joined rather than overlapped (a slow close or connect
   * must not let two passes add the same stream).
   */
  reconcile(): Promise<ReconcileResult> {
    return this.passes.run();
  }

  /** Stops the timer and waits for a running pass. Streams stay: the directory closes them. */
  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.passes.settled();
  }

  private async pass(): Promise<ReconcileResult> {
    const plan = this.opts.plan();
    this.noteExclusions(plan.exclusions);
    const wanted = new Map<string, PlannedStream>();
    for (const s of plan.streams) wanted.set(streamKey(s.instanceName, s.dpRank), s);
    let added = 0;
    let removed = 0;
    let failed = 0;

    // Removals first: a replaced stream frees its (instance, dp_rank) slot and its max_streams room.
    for (const [key, have] of [...this.current]) {
      if (this.closed) break;
      const want = wanted.get(key);
      if (want !== undefined && want.planKey === have.planKey) continue;
      this.current.delete(key);
      try {
        await this.opts.target.removeStream(have.instanceName, have.dpRank);
        removed++;
        this.log.info(
          { instance: have.instanceName, dp_rank: have.dpRank, reason: want === undefined ? 'no longer wanted' : 'identity changed' },
          'discovery stream removed',
        );
      } catch (e) {
        failed++;
        this.log.error({ instance: have.instanceName, dp_rank: have.dpRank, err: errorText(e) }, 'discovery stream remove failed');
      }
    }
    for (const [key, want] of wanted) {
      if (this.closed) break;
      if (this.current.has(key)) continue;
      try {
        await this.opts.target.addStream(want);
        this.current.set(key, want);
        added++;
        this.log.info({ instance: want.instanceName, dp_rank: want.dpRank, endpoint: want.endpoint, generation: want.generation }, 'discovery stream added');
      } catch (e) {
        // Retried on the next pass; the class (duplicate_stream, max_streams, ...) is in the message.
        failed++;
        this.log.error({ instance: want.instanceName, dp_rank: want.dpRank, err: errorText(e) }, 'discovery stream add failed');
      }
    }
    const result = { added, removed, failed };
    this.opts.onPass?.(result, plan);
    return result;
  }

  /** discovery.md: excluded instances are logged as errors naming them; once per change, not per pass. */
  private noteExclusions(exclusions: readonly PlanExclusion[]): void {
    this.lastPlanExclusions = exclusions;
    const text = exclusions.map((e) => `${e.class}:${e.detail}`).join('\n');
    if (text === this.lastExclusionText) return;
    this.lastExclusionText = text;
    for (const e of exclusions) this.log.error({ class: e.class, instances: e.instances }, e.detail);
  }
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
