/**
 * The data path's one registration call in startMetaService (kvcm-meta §5.2–§5.5, §6, §9.1):
 * adapts the instance registry and config to the narrow DataPathInstances view, runs the §9.1
 * startup cleanup (CLS_WRITING locations deleted) before the service reports ready, registers
 * the write and lookup RPCs, and flushes statistics / drops sessions on close (§9.3).
 */
import type { Logger } from '../../shared/log/logger.js';
import type { MetaCluster } from '../cluster/redis-cluster.js';
import type { MetaConfig } from '../config/meta-config.js';
import type { MetaMetrics } from '../http/meta-metrics.js';
import type { InstanceRegistry } from '../instances/instance-registry.js';
import type { MetaStore } from '../store/meta-store.js';
import { STORAGE_KINDS } from '../config/storage-kinds.js';
import { normalizeRootPath } from '../keys/location-uri.js';
import type { DataPathInstance, DataPathInstances, WritableStorage } from '../lookup/data-path-instance.js';
import type { EventReportVisibility } from '../report/event-report-visibility.js';
import type { SessionTimers } from '../write/session-timers.js';
import { systemSessionTimers } from '../write/session-timers.js';
import { createDataPath, startDataPath, stopDataPath } from '../write/data-path.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './rpc-registrar.js';
import { registerLookupRpcs } from './lookup.js';
import { registerWriteRpcs } from './write-cache.js';

/**
 * The part of startMetaService's deps (MetaServiceDeps) the data path uses; declared here so
 * this module does not import meta-service.ts, which imports it.
 */
export interface DataPathServiceDeps {
  readonly config: MetaConfig;
  readonly store: MetaStore;
  readonly logger: Logger;
  readonly metrics: MetaMetrics;
  readonly instances: InstanceRegistry;
  readonly nowMs: () => number;
  /** The Redis store's shared state (§9.4); null/absent on SQLite. */
  readonly cluster?: MetaCluster | null;
  onClose(hook: () => void | Promise<void>): void;
}

/** Builds the data path over the service deps, cleans up (§9.1) and registers its 10 RPCs. */
export async function registerDataPathRpcs(
  server: RpcRegistrar,
  deps: DataPathServiceDeps,
  visibility: EventReportVisibility,
  timers?: SessionTimers,
): Promise<DataPath> {
  const dp = await createDataPath({
    store: deps.store,
    instances: serviceInstances(deps),
    visibility,
    metrics: deps.metrics,
    log: deps.logger.child({ component: 'meta-data-path' }),
    limits: {
      maxKeysPerRequest: deps.config.limits.maxKeysPerRequest,
      defaultWriteTimeoutSeconds: deps.config.write.defaultTimeoutSeconds,
      maxWriteTimeoutSeconds: deps.config.write.maxTimeoutSeconds,
    },
    timers: timers ?? { ...systemSessionTimers, nowMs: deps.nowMs },
    shared: deps.cluster ? { book: deps.cluster.sessionBook, backgroundHolder: () => deps.cluster?.lease.held ?? false } : undefined,
  });
  await startDataPath(dp);
  registerWriteRpcs(server, dp);
  registerLookupRpcs(server, dp);
  deps.onClose(() => stopDataPath(dp));
  return dp;
}

/** DataPathInstances over the InstanceRegistry (registrations) and the config (groups, storages). */
export function serviceInstances(deps: DataPathServiceDeps): DataPathInstances {
  const registry = deps.instances;
  const writable = new Map<string, WritableStorage>();
  for (const s of deps.config.storages) {
    if (s.eventReport) continue;
    writable.set(s.globalUniqueName, {
      name: s.globalUniqueName,
      storageType: s.storageType,
      available: s.available,
      uri: { scheme: STORAGE_KINDS[s.kind].uriScheme, name: s.globalUniqueName, root: normalizeRootPath(s.rootPath) },
    });
  }
  const configured = new Set(deps.config.storages.map((s) => s.globalUniqueName));
  const isConfiguredStorage = (name: string): boolean => configured.has(name);
  return {
    async resolve(instanceId: string): Promise<DataPathInstance> {
      const { record, group } = await registry.resolve(instanceId);
      const writableCandidates: WritableStorage[] = [];
      for (const name of group.storageCandidates) {
        const w = writable.get(name);
        if (w !== undefined) writableCandidates.push(w);
      }
      return { record, groupName: group.name, writableCandidates, quotaBytes: group.quotaBytes, isConfiguredStorage };
    },
    async instanceIdsOfGroup(groupName: string): Promise<readonly string[]> {
      return (await deps.store.listInstances()).filter((r) => r.instanceGroup === groupName).map((r) => r.instanceId);
    },
  };
}
