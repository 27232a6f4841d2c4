/**
 * How the executor writes the units of a big reportEvent request whose items stay in the report
 * worker (issue 28: a request of any size never holds the event loop), and how a snapshot staged
 * in the shared store is landed. The worker client (offload/report-offload.ts) implements
 * `OffloadedWrites`; the Redis store implements `SnapshotStages`.
 *
 * A snapshot's rows are first staged, invisible to every reader, then committed:
 * - `atomic` (SQLite, §7.5 "one transaction"): `commitStage` lands every staged row in one
 *   transaction on the worker's connection; the executor commits the fence after it.
 * - `roll_forward` (Redis, §9.4): the stage is durable in Redis; the executor commits the fence
 *   and records the stage as `applying` in the shared reporter state, then lands the stage in
 *   bounded atomic batches. A replica that dies meanwhile leaves the stage and the record behind:
 *   whoever next holds the reporter's gate (or the background-lease holder) lands the rest before
 *   writing anything of its own, so the reporter ends up with exactly the committed snapshot.
 */
import type { OffloadedWork } from './report-plan.js';
import type { ReporterIdentity } from './reporter-registry.js';

export type StagedCommitMode = 'atomic' | 'roll_forward';

export interface OffloadedWrites {
  readonly commitMode: StagedCommitMode;
  /** One folded ADD/DELETE run (§7.5); throws StoreError. `missing`: DELETE names that were absent. */
  writeDelta(work: OffloadedWork, target: ReporterIdentity, generation: string, createTimeUs: bigint): Promise<{ readonly missing: number }>;
  /** Stages a snapshot's rows under `stageId` (the candidate token), stamped with it; throws StoreError. */
  stageSnapshot(work: OffloadedWork, target: ReporterIdentity, stageId: string, nowUs: bigint): Promise<void>;
  /** `atomic` mode: lands the stage in one transaction; throws StoreError (nothing landed). */
  commitStage(stageId: string, instanceId: string): Promise<void>;
  /** Forgets a stage that will not be committed (best effort). */
  dropStage(stageId: string): Promise<void>;
}

export interface SnapshotStages {
  /** Lands up to `max` staged rows in one atomic step; resolves with how many remain (0: all landed, stage gone). */
  applyStaged(stageId: string, max: number): Promise<number>;
  dropStage(stageId: string): Promise<void>;
  /** Every stage in the store: stage id → key of the reporter that staged it. */
  stages(): Promise<Map<string, string>>;
}
