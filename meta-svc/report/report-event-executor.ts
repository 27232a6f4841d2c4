/**
 * Executes one admitted reportEvent request (kvcm-meta §7.2 steps 3–5, §7.5–§7.8, §7.12) for a
 * reporter whose instance and storage were already resolved. Reporter state lives in the
 * registry; block metadata goes through the MetaStore, one transaction per ADD/DELETE run and
 * one per snapshot. Store failures are StoreErrors and map to INTERNAL_ERROR here.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { ErrorCodeName } from '../meta-enums.js';
import { StoreError, type MetaStore } from '../store/meta-store.js';
import type { ReportCleanup } from './report-cleanup.js';
import { isAllowedShape, validateEvent, type DecodedEvent, type ValidBlock, type ValidEvent } from './report-events.js';
import { deltaMutations, snapshotMutations, type DeltaEvent } from './report-mutations.js';
import { newVersionToken, type Reporter, type ReporterIdentity, type ReporterRegistry } from './reporter-registry.js';
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
}

type Unit =
  | { readonly kind: 'register'; readonly indexes: number[]; readonly mediums: Set<string> }
  | { readonly kind: 'delta'; readonly indexes: number[]; readonly events: DeltaEvent[] }
  | { readonly kind: 'heartbeat' | 'host_down'; readonly indexes: number[] }
  | { readonly kind: 'snapshot'; readonly indexes: number[]; readonly blocks: readonly ValidBlock[] };

export class ReportEventExecutor {
  /** Per-reporter serialization of delta runs: each run reads, folds and writes its locations. */
  private readonly deltaTails = new WeakMap<Reporter, Promise<void>>();

  private readonly sync: ReporterSync;

  constructor(private readonly deps: ReportEventExecutorDeps) {
    this.sync = deps.sync ?? LOCAL_REPORTER_SYNC;
  }

  async execute(target: ReportTarget, events: readonly DecodedEvent[]): Promise<ReportEventOutcome> {
    const { registry, nowMs } = this.deps;
    // §7.2 step 3: shape, whole request, no side effects.
    if (!isAllowedShape(events, this.deps.maxEventsPerRequest)) return wholeRequestError('INVALID_ARGUMENT', 'invalid reportEvent request shape');

    // §7.2 step 4: every item validated before any executes.
    const results: ErrorCodeName[] = new Array<ErrorCodeName>(events.length).fill('OK');
    const units = this.plan(events, results);

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
          setAll(results, unit.indexes, await this.runDelta(target, unit.events));
          break;
        case 'snapshot': {
          const r = await this.runSnapshot(target, unit.blocks);
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

  /**
   * §7.2 steps 4–5: validate, then group into execution units. REGISTERs merge into one unit at
   * the first REGISTER's position; each maximal run of consecutive valid ADD/DELETE is one unit.
   * Invalid items are skipped and do not break a run (they execute nothing).
   */
  private plan(events: readonly DecodedEvent[], results: ErrorCodeName[]): Unit[] {
    const units: Unit[] = [];
    let register: Extract<Unit, { kind: 'register' }> | null = null;
    let delta: Extract<Unit, { kind: 'delta' }> | null = null;
    for (let i = 0; i < events.length; i++) {
      const v = validateEvent(events[i] as DecodedEvent);
      if (v === null) {
        results[i] = 'INVALID_ARGUMENT';
        continue;
      }
      if (v.kind === 'add' || v.kind === 'delete') {
        if (!delta) {
          delta = { kind: 'delta', indexes: [], events: [] };
          units.push(delta);
        }
        delta.indexes.push(i);
        delta.events.push(v);
        continue;
      }
      delta = null;
      switch (v.kind) {
        case 'register':
          if (!register) {
            register = { kind: 'register', indexes: [], mediums: new Set() };
            units.push(register);
          }
          register.indexes.push(i);
          for (const m of v.mediums) register.mediums.add(m);
          break;
        case 'snapshot':
          units.push({ kind: 'snapshot', indexes: [i], blocks: v.blocks });
          break;
        case 'heartbeat':
        case 'host_down':
          units.push({ kind: v.kind, indexes: [i] });
          break;
      }
    }
    return units;
  }

  /** One ADD/DELETE run (§7.5): admission, gate lease, epoch check, one folded transaction. */
  private async runDelta(target: ReportTarget, events: readonly DeltaEvent[]): Promise<ErrorCodeName> {
    const { registry, nowMs } = this.deps;
    const reporter = await this.sync.transition(target, () => registry.admit(target, nowMs()));
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
      // The generation is created under the lease, even if nothing ends up written (§7.5 DELETE).
      const generation = await this.sync.transition(target, () => registry.ensureGeneration(reporter));
      if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
      return await this.writeDelta(target, reporter, epoch, generation, events);
    } finally {
      done();
      if (this.deltaTails.get(reporter) === tail) this.deltaTails.delete(reporter);
      reporter.gate.releaseDelta();
      await cluster.release();
    }
  }

  private async writeDelta(target: ReportTarget, reporter: Reporter, epoch: number, generation: string, events: readonly DeltaEvent[]): Promise<ErrorCodeName> {
    // No read first: the store merges each location's specs inside its transaction (§9.4).
    const mutations = deltaMutations(target, generation, events, BigInt(this.deps.nowMs()) * 1000n);
    // §7.5: a lifecycle change before the write aborts the run.
    if (reporter.epoch !== epoch) return 'SNAPSHOT_REQUIRED';
    if (mutations.length === 0) return 'OK';
    let results;
    try {
      results = await this.deps.store.apply(mutations);
    } catch (err) {
      return this.storeFailure(err, 'delta write');
    }
    let missing = 0;
    for (const r of results) missing += r.missing ?? 0;
    if (missing > 0) this.deps.logger.debug({ host: target.hostIpPort, missing }, 'reportEvent DELETE of missing blocks/specs');
    return 'OK';
  }

  /** §7.5 SNAPSHOT: admission → rate limit → gate → in-place replace in one transaction → commit. */
  private async runSnapshot(target: ReportTarget, blocks: readonly ValidBlock[]): Promise<{ code: ErrorCodeName; retryAfterMs: bigint }> {
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
    try {
      // Shared before its rows exist: cleanup on another replica must spare them (§7.11).
      await this.sync.transition(target, () => (reporter.candidate = candidate));
      const code = await this.writeSnapshot(target, reporter, epoch, candidate, blocks);
      if (code === 'OK') {
        // Commit: the candidate becomes generation and fence together (strict mode).
        await this.sync.transition(target, () => {
          reporter.generation = candidate;
          reporter.fence = candidate;
          reporter.rateLimitDeadlineMs = nowMs() + reporter.timings.snapshotMinIntervalMs;
          reporter.candidate = '';
        });
        this.deps.cleanup.afterSnapshot(reporter);
      } else if (code === 'INTERNAL_ERROR') {
        // Admitted failure: soft mode, generation unchanged (§7.5).
        await this.sync.transition(target, () => (reporter.fence = ''));
      }
      onSnapshot?.(code === 'OK' ? 'ok' : code === 'INTERNAL_ERROR' ? 'failed' : 'snapshot_required');
      return { code, retryAfterMs: 0n };
    } catch (err) {
      // An unexpected failure after the gate closed is an admitted failure too: soft mode.
      reporter.fence = '';
      onSnapshot?.('failed');
      throw err;
    } finally {
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

  private storeFailure(err: unknown, what: string): ErrorCodeName {
    if (!(err instanceof StoreError)) throw err;
    this.deps.logger.warn({ err, what }, 'reportEvent store failure');
    return 'INTERNAL_ERROR';
  }
}

export function wholeRequestError(code: ErrorCodeName, message: string): ReportEventOutcome {
  return { code, message, itemResults: [], committedSnapshotVersion: '', retryAfterMs: 0n, snapshotRequired: false };
}

function setAll(results: ErrorCodeName[], indexes: readonly number[], code: ErrorCodeName): void {
  for (const i of indexes) results[i] = code;
}
