/**
 * Instances and instance groups at run time (kvcm-meta §4.1, §4.2, §8). Groups come from the
 * config at every start; registrations live in the MetaStore and are cached here (they are only
 * ever written through a registry, and never deleted; on a shared store the cache is dropped
 * whenever another replica may have written one). Every keyed RPC starts with
 * `resolveRequestInstance`: an unknown id, or a persisted instance whose group is no longer
 * configured, answers INSTANCE_NOT_EXIST (§1.4, §8; the data is kept).
 */
import type { Logger } from '../../shared/log/logger.js';
import type { InstanceGroupConfig, MetaConfig, StorageConfig } from '../config/meta-config.js';
import { MetaError, duplicateInstance, missingFields } from '../meta-errors.js';
import type { InstanceRecord, MetaStore } from '../store/meta-store.js';
import type { RequestReader } from '../wire/request-reader.js';
import { identityDifferences, mutableFieldsDiffer, sameIdentity, withMutableFieldsOf } from './instance-identity.js';

export interface ResolvedInstance {
  readonly record: InstanceRecord;
  readonly group: InstanceGroupConfig;
}

/** How a registerInstance ended (§4.1). */
export type RegisterOutcome = 'created' | 'unchanged' | 'updated';

export class InstanceRegistry {
  private readonly groups: ReadonlyMap<string, InstanceGroupConfig>;
  private readonly storages: ReadonlyMap<string, StorageConfig>;
  private readonly cache = new Map<string, InstanceRecord>();
  /** Shared store: the registrations' version the cache was filled under (undefined: not known yet). */
  private sharedVersion: string | null | undefined = undefined;
  /** Registrations run one at a time so capacity checks and identity checks see settled state. */
  private registerChain: Promise<unknown> = Promise.resolve();

  constructor(
    private readonly store: MetaStore,
    config: MetaConfig,
    private readonly log: Logger,
    /**
     * False on a shared store (§9.4): another replica may update a registration at any time, so
     * the cache only serves while the shared version it was filled under stands
     * (`observeSharedVersion`, told at every RPC's catch-up).
     */
    private readonly ownStore = true,
  ) {
    this.groups = new Map(config.instanceGroups.map((g) => [g.name, g]));
    this.storages = new Map(config.storages.map((s) => [s.globalUniqueName, s]));
  }

  /** The configured group, or undefined. */
  group(name: string): InstanceGroupConfig | undefined {
    return this.groups.get(name);
  }

  isConfiguredGroup(name: string): boolean {
    return this.groups.has(name);
  }

  /** A configured storage by `global_unique_name`, or undefined. */
  storage(name: string): StorageConfig | undefined {
    return this.storages.get(name);
  }

  /** The registration and its configured group; MetaError INSTANCE_NOT_EXIST otherwise. */
  async resolve(instanceId: string): Promise<ResolvedInstance> {
    const record = await this.lookup(instanceId);
    const group = record ? this.groups.get(record.instanceGroup) : undefined;
    if (!record || !group) throw new MetaError('INSTANCE_NOT_EXIST', `instance ${JSON.stringify(instanceId)} does not exist`);
    return { record, group };
  }

  /**
   * Reads the request's `instance_id` (required, §1.4: missing → INVALID_ARGUMENT naming it for
   * `requestName`, e.g. `GetCacheLocation`) and resolves it.
   */
  async resolveRequestInstance(req: RequestReader, requestName: string): Promise<ResolvedInstance> {
    const id = req.str('instance_id');
    if (id === '') throw missingFields(requestName, ['instance_id']);
    return this.resolve(id);
  }

  /**
   * §4.1: a new id is stored (REACH_MAX_ENTITY_CAPACITY when its group is full); the same
   * identity is idempotent with the mutable fields replaced; another identity → DUPLICATE_ENTITY,
   * nothing changes. `incoming` has already passed `parseRegistration`.
   */
  register(incoming: InstanceRecord): Promise<{ outcome: RegisterOutcome; record: InstanceRecord }> {
    const run = this.registerChain.then(() => this.registerNow(incoming));
    this.registerChain = run.catch(() => undefined);
    return run;
  }

  private async registerNow(incoming: InstanceRecord): Promise<{ outcome: RegisterOutcome; record: InstanceRecord }> {
    const existing = await this.lookup(incoming.instanceId);
    if (existing) {
      const differing = identityDifferences(existing, incoming);
      if (differing.length > 0) throw duplicateInstance(incoming.instanceId, differing);
      if (!mutableFieldsDiffer(existing, incoming)) return { outcome: 'unchanged', record: existing };
      const updated = withMutableFieldsOf(existing, incoming);
      await this.store.putInstance(updated);
      this.cache.set(updated.instanceId, updated);
      return { outcome: 'updated', record: updated };
    }
    const group = this.groups.get(incoming.instanceGroup);
    if (!group) throw new MetaError('INVALID_ARGUMENT', `instance group ${JSON.stringify(incoming.instanceGroup)} is not configured`);
    if (group.maxInstanceCount > 0 && (await this.store.countInstances(group.name)) >= group.maxInstanceCount) {
      throw new MetaError('REACH_MAX_ENTITY_CAPACITY', `instance group ${JSON.stringify(group.name)} already holds ${group.maxInstanceCount} instances`);
    }
    await this.store.putInstance(incoming);
    this.cache.set(incoming.instanceId, incoming);
    return { outcome: 'created', record: incoming };
  }

  /**
   * Startup (§8): WARN for persisted instances whose group is gone (kept, INSTANCE_NOT_EXIST
   * until it returns); register each bootstrap instance that is absent; a persisted one with
   * another identity is kept as it is, with a WARN (CFG-03).
   */
  async bootstrap(bootstrapInstances: readonly InstanceRecord[]): Promise<void> {
    for (const rec of await this.store.listInstances()) {
      this.cache.set(rec.instanceId, rec);
      if (!this.groups.has(rec.instanceGroup)) {
        this.log.warn(
          { instance_id: rec.instanceId, instance_group: rec.instanceGroup },
          'persisted instance belongs to a group that is no longer configured; it answers INSTANCE_NOT_EXIST until the group returns',
        );
      }
    }
    for (const rec of bootstrapInstances) {
      const existing = this.cache.get(rec.instanceId);
      if (existing) {
        if (!sameIdentity(existing, rec)) {
          this.log.warn({ instance_id: rec.instanceId }, 'bootstrap instance conflicts with the persisted registration; the persisted one is kept');
        }
        continue;
      }
      try {
        await this.register(rec);
        this.log.info({ instance_id: rec.instanceId, instance_group: rec.instanceGroup }, 'bootstrap instance registered');
      } catch (e) {
        if (!(e instanceof MetaError)) throw e;
        this.log.warn({ instance_id: rec.instanceId, code: e.code, reason: e.message }, 'bootstrap instance not registered');
      }
    }
  }

  /**
   * Shared store: the registrations' version as this RPC's catch-up read it. A change (another
   * replica registered, or Redis lost its data) empties the cache; our own writes change it too
   * and cost one re-read.
   */
  observeSharedVersion(version: string | null): void {
    if (version === this.sharedVersion) return;
    this.sharedVersion = version;
    this.cache.clear();
  }

  private async lookup(instanceId: string): Promise<InstanceRecord | null> {
    // On a shared store the cache serves only once a catch-up told which version it holds.
    const cached = this.ownStore || this.sharedVersion !== undefined ? this.cache.get(instanceId) : undefined;
    if (cached) return cached;
    const rec = await this.store.getInstance(instanceId);
    if (rec) this.cache.set(instanceId, rec);
    return rec;
  }
}
