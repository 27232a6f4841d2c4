/**
 * Write sessions (kvcm-meta §6): in-memory, process-local. startWriteCache decides which keys
 * exist, allocates one CLS_WRITING location per new key on the first available candidate
 * storage (one transaction), and opens a session; finishWriteCache (or expiry) turns the new
 * keys' locations CLS_SERVING or deletes them.
 *
 * Concurrency: the check-then-allocate sequence runs under the group lock, so two concurrent
 * startWriteCache calls on one key give exactly one location (C-04) and the group quota cannot be
 * overrun by interleaved requests. Finishing consumes the session before any await, so a double
 * finish has exactly one winner.
 */
import type { Logger } from '../../shared/log/logger.js';
import { MetaError } from '../meta-errors.js';
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { CLS_SERVING, CLS_WRITING, StoreConflictError } from '../store/meta-store.js';
import type { MetaStore, StoreMutation, StoredSpec } from '../store/meta-store.js';
import type { BlockMask } from '../keys/block-mask.js';
import { checkBlockMask, isMasked } from '../keys/block-mask.js';
import { newLocationId, newWriteSessionId } from '../keys/random-ids.js';
import { specUri, uriPrefix } from '../keys/location-uri.js';
import type { DataPathInstance, DataPathInstances, WritableStorage } from '../lookup/data-path-instance.js';
import type { GroupLock } from './group-lock.js';
import type { SessionTimers } from './session-timers.js';
import { groupUsageBytes } from './group-quota.js';
import type { SessionBook, SessionRecord } from './session-book.js';

/** §6 step 5: a session without new keys lives 10 s. */
export const EMPTY_SESSION_LIFETIME_MS = 10_000;

export interface WriteSessionMetrics {
  readonly writeSessionsActive: { set(v: number): void };
  readonly writeSessionsExpiredTotal: { inc(): void };
}

export interface WriteSessionsDeps {
  readonly store: MetaStore;
  readonly instances: DataPathInstances;
  readonly lock: GroupLock;
  readonly timers: SessionTimers;
  readonly log: Logger;
  readonly metrics?: WriteSessionMetrics;
  /** Sessions shared with other replicas (§9.4); absent = this process only. */
  readonly book?: SessionBook;
}

export interface StartWriteInput {
  readonly instance: DataPathInstance;
  readonly keys: readonly bigint[];
  /** Per key (same length as keys) the spec names to write; already validated. */
  readonly specNamesPerKey: ReadonlyArray<readonly string[]>;
  /** Already ≥ 1 (§6 step 2). */
  readonly minReplicaCount: number;
  /** Already defaulted and clamped (§6 step 6). */
  readonly timeoutMs: number;
  /** µs since epoch for create_time. */
  readonly nowUs: bigint;
}

export interface AllocatedLocation {
  /** The new location's id: printed as the CacheLocation `id` (§6 step 4). */
  readonly locationId: string;
  readonly storageType: number;
  readonly specs: readonly StoredSpec[];
}

export interface StartWriteOutput {
  readonly sessionId: string;
  /** Per request key: true = exists (in the response mask, not to be written). */
  readonly exists: readonly boolean[];
  /** One per new key, in new-key order. */
  readonly locations: readonly AllocatedLocation[];
}

/** Plans per startWriteCache when other replicas keep allocating the same keys first. */
const ALLOCATION_ATTEMPTS = 5;

interface PlannedLocation {
  readonly blockKey: bigint;
  readonly locationId: string;
  readonly storage: WritableStorage;
  readonly specs: StoredSpec[];
}

interface Allocation {
  readonly exists: boolean[];
  readonly planned: PlannedLocation[];
  readonly newKeys: NewKey[];
}

interface NewKey {
  readonly blockKey: bigint;
  readonly locationId: string;
  readonly rev: number;
}

interface WriteSession {
  readonly id: string;
  readonly instanceId: string;
  readonly groupName: string;
  readonly newKeys: readonly NewKey[];
  readonly deadlineMs: number;
  timer: unknown;
}

export class WriteSessions {
  private readonly sessions = new Map<string, WriteSession>();

  constructor(private readonly deps: WriteSessionsDeps) {}

  get activeCount(): number {
    return this.sessions.size;
  }

  async start(input: StartWriteInput): Promise<StartWriteOutput> {
    const { instance } = input;
    const instanceId = instance.record.instanceId;
    const candidates = instance.writableCandidates;
    if (candidates.length === 0) {
      throw new MetaError('UNSUPPORTED', `instance group ${instance.groupName} has no storage_candidates (§4.2)`);
    }
    const allocation = await this.deps.lock.run(instance.groupName, () => this.allocate(input));

    const id = newWriteSessionId();
    const lifetimeMs = allocation.newKeys.length === 0 ? EMPTY_SESSION_LIFETIME_MS : input.timeoutMs;
    const session: WriteSession = {
      id,
      instanceId,
      groupName: instance.groupName,
      newKeys: allocation.newKeys,
      deadlineMs: this.deps.timers.nowMs() + lifetimeMs,
      timer: undefined,
    };
    // Shared before it is answered, so any replica can finish it (§9.4).
    await this.deps.book?.put(recordOf(session));
    session.timer = this.deps.timers.setTimeout(() => void this.expire(id), lifetimeMs);
    this.sessions.set(id, session);
    this.deps.metrics?.writeSessionsActive.set(this.sessions.size);
    return {
      sessionId: id,
      exists: allocation.exists,
      locations: allocation.planned.map((p) => ({ locationId: p.locationId, storageType: p.storage.storageType, specs: p.specs })),
    };
  }

  /**
   * §6 steps 2–4 under the group lock: read the keys, decide which exist, allocate the new ones
   * in one transaction. A key another replica allocated between our read and our write refuses
   * the batch (StoreConflictError); we read again and decide again.
   */
  private async allocate(input: StartWriteInput): Promise<Allocation> {
    for (let attempt = 1; ; attempt++) {
      const plan = await this.plan(input);
      try {
        const results = plan.mutations.length > 0 ? await this.deps.store.apply(plan.mutations) : [];
        const newKeys: NewKey[] = [];
        let r = 0;
        for (let j = 0; j < plan.mutations.length; j++) {
          if ((plan.mutations[j] as StoreMutation).op !== 'createLocationIf') continue;
          const p = plan.planned[r++] as PlannedLocation;
          newKeys.push({ blockKey: p.blockKey, locationId: p.locationId, rev: results[j]?.rev ?? 1 });
        }
        return { exists: plan.exists, planned: plan.planned, newKeys };
      } catch (err) {
        if (!(err instanceof StoreConflictError) || attempt >= ALLOCATION_ATTEMPTS) throw err;
      }
    }
  }

  /** §6 steps 2–4 over the keys as stored now: which exist, and the mutations allocating the rest. */
  private async plan(input: StartWriteInput): Promise<{ exists: boolean[]; planned: PlannedLocation[]; mutations: StoreMutation[] }> {
    const { instance } = input;
    const instanceId = instance.record.instanceId;
    const candidates = instance.writableCandidates;
    const blocks = await this.deps.store.getBlocks(instanceId, input.keys);
    const exists = new Array<boolean>(input.keys.length).fill(false);
    const seen = new Set<bigint>();
    const mutations: StoreMutation[] = [];
    const planned: PlannedLocation[] = [];
    let newBytes = 0n;
    const sizeOf = specSizes(instance);
    for (let i = 0; i < input.keys.length; i++) {
      const key = input.keys[i] as bigint;
      if (seen.has(key)) {
        exists[i] = true;
        continue;
      }
      seen.add(key);
      const block = blocks.get(key);
      // §6 step 2: only writable-storage locations in WRITING or SERVING count.
      const holding = new Set<string>();
      let replicas = 0;
      for (const loc of block?.locations ?? []) {
        if (isEventReportLocation(loc)) continue;
        if (loc.status !== CLS_WRITING && loc.status !== CLS_SERVING) continue;
        replicas++;
        holding.add(loc.storageName);
      }
      const everyCandidateHolds = candidates.every((c) => holding.has(c.name));
      if (replicas >= input.minReplicaCount || everyCandidateHolds) {
        exists[i] = true;
        continue;
      }
      const storage = candidates.find((c) => c.available && !holding.has(c.name));
      if (storage === undefined) {
        throw new MetaError('UNSUPPORTED', `no available candidate storage for block ${key} in group ${instance.groupName}`);
      }
      const prefix = uriPrefix(storage.uri, instanceId);
      const specNames = input.specNamesPerKey[i] as readonly string[];
      const specs: StoredSpec[] = specNames.map((s) => {
        const size = sizeOf.get(s) ?? 0n;
        newBytes += size;
        return { name: s, uri: specUri(prefix, key, s, size) };
      });
      // Unique per key: collisions with existing ids of this block are redrawn.
      let locationId = newLocationId();
      while (block?.locations.some((l) => l.locationId === locationId)) locationId = newLocationId();
      planned.push({ blockKey: key, locationId, storage, specs });
      // Inserted only if the key is still free when the batch commits: another replica may be
      // allocating it right now (C-04 across replicas, §9.4).
      mutations.push({
        op: 'createLocationIf',
        instanceId,
        blockKey: key,
        location: { locationId, storageName: storage.name, type: storage.storageType, status: CLS_WRITING, createTimeUs: input.nowUs, specs },
        maxWritable: input.minReplicaCount,
      });
      if (block === undefined) {
        // §5.4 BP#prev_key: set by the request that created the block.
        const prev = i === 0 ? '' : (input.keys[i - 1] as bigint).toString();
        mutations.push({ op: 'mergeProperties', instanceId, blockKey: key, properties: { 'BP#prev_key': prev } });
      }
    }
    if (planned.length > 0 && instance.quotaBytes > 0n) {
      const used = await groupUsageBytes(this.deps.store, this.deps.instances, instance.groupName);
      if (used + newBytes > instance.quotaBytes) {
        throw new MetaError(
          'REACH_MAX_ENTITY_CAPACITY',
          `group ${instance.groupName} quota ${instance.quotaBytes} bytes cannot hold ${newBytes} more (used ${used})`,
        );
      }
    }
    return { exists, planned, mutations };
  }

  /**
   * §6 step 7. `successBlocks` null = absent (all failed). Returns the session's instance id, so
   * the caller can report a mismatch with the request's instance. Throws INVALID_ARGUMENT for an
   * unknown/expired/finished session or an invalid mask (the session then stays usable).
   */
  async finish(sessionId: string, successBlocks: BlockMask | null): Promise<{ sessionInstanceId: string }> {
    const local = this.sessions.get(sessionId);
    // Opened on another replica: its shared record (§9.4).
    const session = local ?? (await this.shared(sessionId));
    if (session === undefined || this.deps.timers.nowMs() >= session.deadlineMs) {
      // A session past its deadline whose timer has not fired yet expires now, before answering.
      if (session !== undefined) await this.expire(session.id, session);
      throw new MetaError('INVALID_ARGUMENT', 'write session not found or expired');
    }
    const m = session.newKeys.length;
    if (successBlocks !== null) checkBlockMask(successBlocks, m, 'success_blocks', true);
    if (local !== undefined) this.take(local);
    // The cluster-wide claim: a finish or expiry elsewhere may have won meanwhile.
    if (this.deps.book && (await this.deps.book.take(sessionId)) === null) {
      throw new MetaError('INVALID_ARGUMENT', 'write session not found or expired');
    }
    const ok = new Array<boolean>(m);
    for (let i = 0; i < m; i++) ok[i] = successBlocks !== null && isMasked(successBlocks, i);
    await this.complete(session, ok);
    return { sessionInstanceId: session.instanceId };
  }

  /** trimCache (§5.2): open sessions of the instance are cancelled without touching the store. */
  cancelInstance(instanceId: string): number {
    let n = 0;
    for (const s of [...this.sessions.values()]) {
      if (s.instanceId !== instanceId) continue;
      this.take(s);
      n++;
    }
    this.deps.book?.cancelInstance(instanceId).catch((err: unknown) => this.deps.log.warn({ err, instance_id: instanceId }, 'shared write sessions not cancelled'));
    return n;
  }

  /**
   * The background-lease holder's sweep (§9.4): sessions past their deadline whose replica did
   * not expire them (it died) are finished with every block failed, here.
   */
  async sweepExpired(limit = 100): Promise<number> {
    const book = this.deps.book;
    if (!book) return 0;
    const expired = await book.takeExpired(this.deps.timers.nowMs(), limit);
    for (const rec of expired) {
      const local = this.sessions.get(rec.id);
      if (local !== undefined) this.take(local);
      this.deps.metrics?.writeSessionsExpiredTotal.inc();
      await this.complete(rec, new Array<boolean>(rec.newKeys.length).fill(false));
    }
    return expired.length;
  }

  private async shared(id: string): Promise<WriteSession | undefined> {
    const rec = await this.deps.book?.peek(id);
    return rec ? { ...rec, timer: undefined } : undefined;
  }

  /** Stop every timer (shutdown); sessions are process-local and die with the process (§6 step 8). */
  close(): void {
    for (const s of this.sessions.values()) this.deps.timers.clearTimeout(s.timer);
    this.sessions.clear();
    this.deps.metrics?.writeSessionsActive.set(0);
  }

  private take(session: WriteSession): void {
    this.deps.timers.clearTimeout(session.timer);
    this.sessions.delete(session.id);
    this.deps.metrics?.writeSessionsActive.set(this.sessions.size);
  }

  /** §6 step 6: on expiry the session is finished with every block failed (by one replica only, §9.4). */
  private async expire(id: string, shared?: WriteSession): Promise<void> {
    const session = this.sessions.get(id) ?? shared;
    if (session === undefined) return;
    if (this.sessions.get(id) === session) this.take(session);
    try {
      if (this.deps.book && (await this.deps.book.take(id)) === null) return;
      this.deps.metrics?.writeSessionsExpiredTotal.inc();
      await this.complete(session, new Array<boolean>(session.newKeys.length).fill(false));
    } catch (err) {
      this.deps.log.warn({ err, write_session_id: id }, 'expired write session cleanup failed; startup cleanup will retry (§9.1)');
    }
  }

  /**
   * Successful keys: CLS_WRITING → CLS_SERVING if the location still exists (same rev); failed
   * keys: locations deleted, and a block left without any location is removed with its
   * properties (its BP#prev_key was written by this session). One transaction for the session.
   */
  private async complete(session: SessionRecord, ok: readonly boolean[]): Promise<void> {
    if (session.newKeys.length === 0) return;
    const { store } = this.deps;
    await this.deps.lock.run(session.groupName, async () => {
      const mutations: StoreMutation[] = [];
      const failedKeys: bigint[] = [];
      for (let i = 0; i < session.newKeys.length; i++) {
        const k = session.newKeys[i] as NewKey;
        const base = { instanceId: session.instanceId, blockKey: k.blockKey, locationId: k.locationId, expectRev: k.rev };
        if (ok[i]) mutations.push({ op: 'setStatusIf', status: CLS_SERVING, ...base });
        else {
          mutations.push({ op: 'deleteLocationIf', ...base });
          failedKeys.push(k.blockKey);
        }
      }
      await store.apply(mutations);
      if (failedKeys.length === 0) return;
      const left = await store.getBlocks(session.instanceId, failedKeys);
      const empties: StoreMutation[] = [];
      for (const [key, block] of left) {
        if (block.locations.length === 0) empties.push({ op: 'deleteBlock', instanceId: session.instanceId, blockKey: key });
      }
      if (empties.length > 0) await store.apply(empties);
    });
  }
}

function recordOf(s: WriteSession): SessionRecord {
  return { id: s.id, instanceId: s.instanceId, groupName: s.groupName, newKeys: s.newKeys, deadlineMs: s.deadlineMs };
}

function specSizes(instance: DataPathInstance): Map<string, bigint> {
  const m = new Map<string, bigint>();
  for (const s of instance.record.locationSpecInfos) m.set(s.name, s.size);
  return m;
}
