/**
 * Executes one admitted reportEvent request (kvcm-meta §7.2 steps 3–5, §7.5–§7.8, §7.12) for a
 * reporter whose instance and storage were already resolved, from its plan (report-plan.ts).
 * Reporter state lives in the registry; block metadata goes through the MetaStore, one
 * transaction per ADD/DELETE run and one per snapshot, or, for a big request the report worker
 * parsed, through the worker (offloaded-writes.ts: staged snapshots, committed atomically on
 * SQLite, rolled forward on Redis). Store failures are StoreErrors and map to INTERNAL_ERROR.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { ErrorCodeName } from '../meta-enums.js';
import { StoreError, type MetaStore } from '../store/meta-store.js';
import type { OffloadedWrites, SnapshotStages } from './offloaded-writes.js';
import type { ReportCleanup } from './report-cleanup.js';
import type { ValidBlock } from './report-events.js';
import { deltaMutations, snapshotMutations } from './report-mutations.js';
import type { DeltaWork, ItemIndexes, OffloadedWork, ReportPlan, SnapshotWork } from './report-plan.js';
import { newVersionToken, parseReporterKey, type Reporter, type ReporterIdentity, type ReporterRegistry } from './reporter-registry.js';
import { LOCAL_REPORTER_SYNC, type ReporterSync } from './reporter-sync.js';

export interface ReportEventOutcome {
  readonly code: ErrorCodeName;
  readonly message: string;
  /** [] when every item is OK or for whole-request errors (§7.12). */
  readonly itemResults: readonly ErrorCodeName[];
  readonly committedSnapshotVersion: string;
  readonly retryAfterMs: bigint;
  readonly snapshotRequired: boolean;
}

/** The resolved target of a request (§7.2 step 2 done by the caller). */
export type ReportTarget = ReporterIdentity;

export interface ReportEventExecutorDeps {
  readonly store: MetaStore;
  readonly registry: ReporterRegistry;
  readonly cleanup: ReportCleanup;
  readonly nowMs: () => number;
  readonly maxEventsPerRequest: number;
  readonly logger: Logger;
  /** Reporter state and gate shared with other replicas (§9.4); default: this process only. */
  readonly sync?: ReporterSync;
  /** Snapshot outcomes for kvcm_snapshot_total{result}. */
  readonly onSnapshot?: (result: 'ok' | 'in_progress' | 'rate_limited' | 'failed' | 'snapshot_required' | 'not_registered') => void;
  /** Writes of units whose items the report worker kept (absent: every unit is inline). */
  readonly offload?: OffloadedWrites;
  /** The shared store's durable snapshot stages (Redis, §9.4); absent on SQLite. */
  readonly stages?: SnapshotStages;
}

/** Staged rows landed per atomic step of a roll-forward (each one short Redis script). */
export const STAGE_APPLY_BATCH = 500;
/** Longest pause between two landing steps (the pause matches the step, up to this). */
const STAGE_MAX_PAUSE_MS = 20;
/** Rows per step when landing a dead writer's stage: as fast as Redis allows, since a delta waits. */
const STAGE_RECOVERY_BATCH = 2000;

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

export class ReportEventExecutor {
  /** Per-reporter serialization of delta runs: each run reads, folds and writes its locations. */
  private readonly deltaTails = new WeakMap<Reporter, Promise<void>>();

  private readonly sync: ReporterSync;

  constructor(private readonly deps: ReportEventExecutorDeps) {
    this.sync = deps.sync ?? LOCAL_REPORTER_SYNC;
  }

  /** §8 `limits.max_events_per_request` (the §7.3 shape check of `planReport`). */
  get maxEventsPerRequest(): number {
    return this.deps.maxEventsPerRequest;
  }

  async execute(target: ReportTarget, plan: ReportPlan): Promise<ReportEventOutcome> {
    const { registry, nowMs } = this.deps;
    // §7.2 step 3: shape, whole request, no side effects.
    if (!plan.shapeOk) return wholeRequestError('INVALID_ARGUMENT', 'invalid reportEvent request shape');

    // §7.2 step 4: every item was validated before any executes; invalid ones are skipped.
    const results: ErrorCodeName[] = new Array<ErrorCodeName>(plan.eventCount).fill('OK');
    setAll(results, plan.invalid, 'INVALID_ARGUMENT');
    const units = plan.units;

    // §7.6: a generation that exists at admission and survives the request means no snapshot is required.
    const admitted = registry.get(target.instanceId, target.storageType, target.hostIpPort);
    const hadGeneration = admitted !== undefined && registry.liveness(admitted, nowMs()) !== 'TOMBSTONED' && admitted.generation !== '';
    let committedSnapshot = false;
    let retryAfterMs = 0n;

    for (const unit of units) {
      switch (unit.kind) {
        case 'register':
          await this.sync.transition(target, () => registry.register(target, unit.mediums, nowMs()));
          break;
        case 'heartbeat':
          if ((await this.sync.transition(target, () => registry.heartbeat(target, nowMs()))) === null) setAll(results, unit.indexes, 'NODE_NOT_REGISTERED');
          break;
        case 'host_down':
          await this.sync.transition(target, () => registry.hostDown(target, nowMs()));
          break;
        case 'delta':
          setAll(results, unit.indexes, await this.runDelta(target, unit.work));
          break;
        case 'snapshot': {
          const r = await this.runSnapshot(target, unit.work);
          setAll(results, unit.indexes, r.code);
          if (r.code === 'OK') committedSnapshot = true;
          if (r.retryAfterMs > 0n) retryAfterMs = r.retryAfterMs;
          break;
        }
      }
    }

    const reporter = registry.get(target.instanceId, target.storageType, target.hostIpPort);
    const committedSnapshotVersion = reporter && registry.liveness(reporter, nowMs()) !== 'TOMBSTONED' ? reporter.generation : '';
    const firstFailure = results.find((c) => c !== 'OK');
    return {
      code: firstFailure ?? 'OK',
      message: firstFailure ? 'ReportEvent partially failed' : '',
      itemResults: firstFailure ? results : [],
      committedSnapshotVersion,
      retryAfterMs,
      // §7.6: no generation after processing (HOST_DOWN, NODE_NOT_REGISTERED of a tombstoned
      // reporter included, KVCM parity), or a delta of this request created the first one.
      snapshotRequired: committedSnapshotVersion === '' || (!hadGeneration && !committedSnapshot),
    };
  }

  /** One ADD/DELETE run (§7.5): admission, gate lease, epoch check, one folded transaction. */
  private async runDelta(target: ReportTarget, work: DeltaWork): Promise<ErrorCodeName> {
    const { registry, nowMs } = this.deps;
    // A live reporter is admitted as it stands (state as of this RPC's catch-up): no transition,
    // which on Redis saves four round trips per run; anything else changes state under the lock.
    const known = registry.get(target.instanceId, target.storageType, target.hostIpPort);
    const live = known !== undefined && !known.tombstoned && registry.liveness(known, nowMs()) !== 'TOMBSTONED';
    const reporter = live ? known : await this.sync.transition(target, () => registry.admit(target, nowMs()));
    if (!reporter) return 'NODE_NOT_REGISTERED';
    const epoch = reporter.epoch;
    const drainMs = reporter.timings.snapshotDeltaDrainTimeoutMs;
    const waitStart = Date.now();
    const gate = await reporter.gate.acquireDelta(drainMs);
    if (gate === 'in_progress') return 'SNAPSHOT_IN_PROGRESS';
    if (gate === 'snapshot_required') return 'SNAPSHOT_REQUIRED';
    // §9.4: the same gate across replicas, within what is left of the one bounded wait.
    let cluster;
    try {
      cluster = await this.sync.acquireDelta(target, Math.max(0, drainMs - (Date.now() - waitStart)));
    } catch (err) {
      reporter.gate.releaseDelta();
      throw err;
    }
    if (cluster === 'in_progress' || cluster === 'snapshot_required') {
      reporter.gate.releaseDelta();
      return cluster === 'in_progress' ? 'SNAPSHOT_IN_PROGRESS' : 'SNAPSHOT_REQUIRED';
    }
    const prev = this.deltaTails.get(reporter) ?? Promise.resolve();
    let done!: () => void;
    const tail = new Promise<void>((resolve) => (done = resolve));
    this.deltaTails.set(reporter, tail);
    try {
      await prev;
      if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
      // Fresh state under the lease: another replica's HOST_DOWN or REGISTER shows as a new epoch.
      if (cluster.refreshed !== true) await this.sync.refresh(target);
      if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
      // The generation is created under the lease, even if nothing ends up written (§7.5 DELETE).
      const generation = reporter.generation !== '' ? reporter.generation : await this.sync.transition(target, () => registry.ensureGeneration(reporter));
      if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
      // A snapshot committed by a replica that died before landing it lands first: this delta
      // must overwrite the snapshot's rows, never the other way round (§9.4).
      if (reporter.applying !== '') await this.finishApplying(reporter, reporter, reporter.applying);
      return await this.writeDelta(target, reporter, epoch, generation, work);
    } finally {
      done();
      if (this.deltaTails.get(reporter) === tail) this.deltaTails.delete(reporter);
      reporter.gate.releaseDelta();
      // Not awaited: the answer need not wait for the lease's removal (a snapshot elsewhere
      // polls for it), and a failure to remove it only lets it expire.
      void cluster.release().catch((err: unknown) => this.deps.logger.debug({ err }, 'delta lease release failed'));
    }
  }

  private async writeDelta(target: ReportTarget, reporter: Reporter, epoch: number, generation: string, work: DeltaWork): Promise<ErrorCodeName> {
    const createTimeUs = BigInt(this.deps.nowMs()) * 1000n;
    // No read first: the store merges each location's specs inside its transaction (§9.4).
    const mutations = work.kind === 'inline' ? deltaMutations(target, generation, work.events, createTimeUs) : null;
    // §7.5: a lifecycle change before the write aborts the run.
    if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
    let missing = 0;
    try {
      if (work.kind === 'offloaded') {
        missing = (await this.offload(work).writeDelta(work, target, generation, createTimeUs)).missing;
      } else if (mutations !== null && mutations.length > 0) {
        for (const r of await this.deps.store.apply(mutations)) missing += r.missing ?? 0;
      }
    } catch (err) {
      return this.storeFailure(err, 'delta write');
    }
    if (missing > 0) this.deps.logger.debug({ host: target.hostIpPort, missing }, 'reportEvent DELETE of missing blocks/specs');
    return 'OK';
  }

  /** §7.5 SNAPSHOT: admission → rate limit → gate → in-place replace in one transaction → commit. */
  private async runSnapshot(target: ReportTarget, work: SnapshotWork): Promise<{ code: ErrorCodeName; retryAfterMs: bigint }> {
    const { registry, nowMs, onSnapshot } = this.deps;
    const reporter = await this.sync.transition(target, () => registry.admit(target, nowMs()));
    if (!reporter) {
      onSnapshot?.('not_registered');
      return { code: 'NODE_NOT_REGISTERED', retryAfterMs: 0n };
    }
    const now = nowMs();
    if (now < reporter.rateLimitDeadlineMs) {
      onSnapshot?.('rate_limited');
      return { code: 'SNAPSHOT_RATE_LIMITED', retryAfterMs: BigInt(Math.max(1, reporter.rateLimitDeadlineMs - now)) };
    }
    const epoch = reporter.epoch;
    const drainMs = reporter.timings.snapshotDeltaDrainTimeoutMs;
    const waitStart = Date.now();
    const gate = await reporter.gate.acquireSnapshot(drainMs);
    if (gate !== 'granted') {
      onSnapshot?.(gate);
      return { code: gate === 'in_progress' ? 'SNAPSHOT_IN_PROGRESS' : 'SNAPSHOT_REQUIRED', retryAfterMs: 0n };
    }
    // §9.4: another replica's snapshot refuses this one at once; its deltas drain first.
    let cluster;
    try {
      cluster = await this.sync.acquireSnapshot(target, Math.max(0, drainMs - (Date.now() - waitStart)));
    } catch (err) {
      if (reporter.gate.isSnapshotHeld) reporter.gate.releaseSnapshot();
      throw err;
    }
    if (cluster === 'in_progress' || cluster === 'snapshot_required') {
      if (reporter.gate.isSnapshotHeld) reporter.gate.releaseSnapshot();
      onSnapshot?.(cluster);
      return { code: cluster === 'in_progress' ? 'SNAPSHOT_IN_PROGRESS' : 'SNAPSHOT_REQUIRED', retryAfterMs: 0n };
    }
    const candidate = newVersionToken();
    /** Rows staged under `candidate` that nobody will land: dropped on the way out. */
    let staged = false;
    let committed = false;
    try {
      // Shared before its rows exist: cleanup on another replica must spare them (§7.11).
      const applying = await this.sync.transition(target, () => {
        reporter.candidate = candidate;
        return reporter.applying;
      });
      // A snapshot committed by a replica that died before landing it lands first, so a failure
      // of this one leaves that committed state, never a mix (§9.4).
      if (applying !== '') await this.finishApplying(target, reporter, applying);
      let code: ErrorCodeName;
      let rollForward = false;
      if (work.kind === 'inline') {
        code = await this.writeSnapshot(target, reporter, epoch, candidate, work.blocks);
      } else {
        staged = true;
        const r = await this.writeOffloadedSnapshot(target, reporter, epoch, candidate, work);
        code = r.code;
        rollForward = r.rollForward;
        staged = code !== 'OK' || rollForward;
      }
      if (code === 'OK') {
        // Commit: the candidate becomes generation and fence together (strict mode); on the
        // shared store the stage it still has to land is recorded with it.
        committed = await this.sync.transition(target, () => {
          // HOST_DOWN meanwhile: the landed rows stay for the tombstone cleanup, nothing commits.
          if (reporter.epoch !== epoch) return false;
          reporter.generation = candidate;
          reporter.fence = candidate;
          reporter.rateLimitDeadlineMs = nowMs() + reporter.timings.snapshotMinIntervalMs;
          reporter.candidate = '';
          reporter.applying = rollForward ? candidate : '';
          return true;
        });
        if (!committed) code = 'SNAPSHOT_REQUIRED';
        else if (rollForward) {
          staged = false;
          await this.finishApplying(target, reporter, candidate, true);
        } else this.deps.cleanup.afterSnapshot(reporter);
      } else if (code === 'INTERNAL_ERROR') {
        // Admitted failure: soft mode, generation unchanged (§7.5).
        await this.sync.transition(target, () => (reporter.fence = ''));
      }
      onSnapshot?.(code === 'OK' ? 'ok' : code === 'INTERNAL_ERROR' ? 'failed' : 'snapshot_required');
      return { code, retryAfterMs: 0n };
    } catch (err) {
      // An unexpected failure after the gate closed is an admitted failure too (soft mode), unless
      // the commit was recorded: then the snapshot stands and its stage lands on the next gate.
      if (!committed) reporter.fence = '';
      onSnapshot?.('failed');
      throw err;
    } finally {
      if (staged) await this.deps.offload?.dropStage(candidate).catch((err: unknown) => this.deps.logger.warn({ err }, 'snapshot stage not dropped'));
      if (reporter.candidate !== '') await this.sync.transition(target, () => (reporter.candidate = '')).catch(() => (reporter.candidate = ''));
      // A tombstone may have woken the gate already only while draining; a granted snapshot still holds it.
      if (reporter.gate.isSnapshotHeld) reporter.gate.releaseSnapshot();
      await cluster.release();
    }
  }

  private async writeSnapshot(target: ReportTarget, reporter: Reporter, epoch: number, candidate: string, blocks: readonly ValidBlock[]): Promise<ErrorCodeName> {
    if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
    // In place, create_time kept by the store: no read of the old rows (§7.5).
    const mutations = snapshotMutations(target, candidate, blocks, BigInt(this.deps.nowMs()) * 1000n);
    if (mutations.length > 0) {
      try {
        await this.deps.store.apply(mutations);
      } catch (err) {
        return this.storeFailure(err, 'snapshot write');
      }
    }
    // HOST_DOWN during the write: the rows stay for the tombstone cleanup, nothing is committed.
    if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
    return 'OK';
  }

  /**
   * A snapshot whose blocks the report worker kept: staged under the candidate, then (SQLite)
   * landed in one transaction, or (Redis) left for the roll-forward after the commit.
   */
  private async writeOffloadedSnapshot(
    target: ReportTarget,
    reporter: Reporter,
    epoch: number,
    candidate: string,
    work: OffloadedWork,
  ): Promise<{ code: ErrorCodeName; rollForward: boolean }> {
    const offload = this.offload(work);
    if (reporter.epoch !== epoch) return { code: 'SNAPSHOT_REQUIRED', rollForward: false };
    try {
      await offload.stageSnapshot(work, target, candidate, BigInt(this.deps.nowMs()) * 1000n);
    } catch (err) {
      return { code: this.storeFailure(err, 'snapshot stage'), rollForward: false };
    }
    if (reporter.epoch !== epoch) return { code: 'SNAPSHOT_REQUIRED', rollForward: false };
    if (offload.commitMode === 'roll_forward') return { code: 'OK', rollForward: true };
    try {
      await offload.commitStage(candidate, target.instanceId);
    } catch (err) {
      return { code: this.storeFailure(err, 'snapshot commit'), rollForward: false };
    }
    // HOST_DOWN during the write: the rows stay for the tombstone cleanup, nothing is committed.
    if (reporter.epoch !== epoch) return { code: 'SNAPSHOT_REQUIRED', rollForward: false };
    return { code: 'OK', rollForward: false };
  }

  /**
   * Lands a committed snapshot's stage (roll-forward, offloaded-writes.ts), then clears
   * `applying` and queues the cleanup of what the snapshot left out. Safe to run from several
   * places at once: each batch lands atomically, and only one finisher clears the record. The
   * snapshot's own writer paces itself (`paced`: its rows share Redis with every other request);
   * a finisher after a dead writer does not: a delta of the reporter waits for it.
   */
  private async finishApplying(target: ReportTarget, reporter: Reporter, stageId: string, paced = false): Promise<void> {
    const stages = this.deps.stages;
    if (!stages) return;
    // Each step is one bounded Redis script; other clients' commands run between them, and a
    // paced writer pauses as long as the step took, so the landing takes at most about half of
    // Redis (and of this loop).
    for (;;) {
      const t0 = performance.now();
      if ((await stages.applyStaged(stageId, paced ? STAGE_APPLY_BATCH : STAGE_RECOVERY_BATCH)) === 0) break;
      if (paced) await sleep(Math.min(STAGE_MAX_PAUSE_MS, performance.now() - t0));
    }
    const cleared = await this.sync.transition(target, () => {
      if (reporter.applying !== stageId) return false;
      reporter.applying = '';
      return true;
    });
    if (!cleared) return;
    if (reporter.tombstoned) this.deps.cleanup.afterTombstone(reporter);
    else if (reporter.fence !== '') this.deps.cleanup.afterSnapshot(reporter);
  }

  /**
   * The background-lease holder's pass over the shared store's stages (§9.4): a committed stage
   * whose writer died is landed under the reporter's gate; a stage nobody will commit (its
   * writer died while staging) is dropped.
   */
  async maintainStages(): Promise<void> {
    const stages = this.deps.stages;
    if (!stages) return;
    const listed = await stages.stages();
    if (listed.size === 0) return;
    // Read after listing: a stage's candidate is shared before its first row is staged.
    await this.sync.catchUp();
    for (const [stageId, key] of listed) {
      const id = parseReporterKey(key);
      const reporter = id === null ? undefined : this.deps.registry.get(id.instanceId, id.storageType, id.hostIpPort);
      if (reporter !== undefined && reporter.applying === stageId) await this.resumeApplying(reporter, stageId);
      else if (reporter === undefined || reporter.candidate !== stageId) await stages.dropStage(stageId);
    }
  }

  /** Lands a dead writer's committed stage while holding the reporter's gate (a live writer still holds it: skip). */
  private async resumeApplying(reporter: Reporter, stageId: string): Promise<void> {
    if (reporter.gate.isSnapshotHeld || reporter.gate.activeLeases > 0) return;
    const hold = await this.sync.acquireSnapshot(reporter, 0);
    if (hold === 'in_progress' || hold === 'snapshot_required') return;
    try {
      await this.finishApplying(reporter, reporter, stageId);
    } finally {
      await hold.release();
    }
  }

  private offload(work: OffloadedWork): OffloadedWrites {
    if (this.deps.offload === undefined) throw new Error(`reportEvent unit ${work.job}/${work.unit} was offloaded without a report worker`);
    return this.deps.offload;
  }

  private storeFailure(err: unknown, what: string): ErrorCodeName {
    if (!(err instanceof StoreError)) throw err;
    this.deps.logger.warn({ err, what }, 'reportEvent store failure');
    return 'INTERNAL_ERROR';
  }
}

export function wholeRequestError(code: ErrorCodeName, message: string): ReportEventOutcome {
  return { code, message, itemResults: [], committedSnapshotVersion: '', retryAfterMs: 0n, snapshotRequired: false };
}

function setAll(results: ErrorCodeName[], indexes: ItemIndexes, code: ErrorCodeName): void {
  for (let i = 0; i < indexes.length; i++) results[indexes[i] as number] = code;
}
