/**
 * What the data-path RPCs need to know about one resolved instance: its registration, the
 * group's ordered writable storages (§4.2 `storage_candidates`), the quota and which storages
 * are still configured. Built by the service wiring from the instance registry and the config,
 * so lookup/ and write/ depend on this narrow view, not on the config shapes.
 */
import { StorageType } from '../meta-enums.js';
import type { InstanceRecord } from '../store/meta-store.js';
import type { UriStorage } from '../keys/location-uri.js';

export interface WritableStorage {
  /** `global_unique_name`. */
  readonly name: string;
  /** §4.5 StorageType number (ST_NFS for `file`, …). */
  readonly storageType: number;
  /** Config `available` (and the open check): an unavailable storage gets no new locations. */
  readonly available: boolean;
  readonly uri: UriStorage;
}

export interface DataPathInstance {
  readonly record: InstanceRecord;
  /** The configured group's name. */
  readonly groupName: string;
  /** §4.2 storage_candidates in order (writable storages only). */
  readonly writableCandidates: readonly WritableStorage[];
  /** §4.2 quota_bytes; 0n = unlimited. */
  readonly quotaBytes: bigint;
  /** §5.3 / §8: locations on a storage no longer configured are invisible until trimmed. */
  isConfiguredStorage(storageName: string): boolean;
}

/** Resolves an instance id or throws MetaError INSTANCE_NOT_EXIST (§1.4). */
export interface DataPathInstances {
  resolve(instanceId: string): Promise<DataPathInstance>;
  /** Every instance id of a group (quota accounting, §4.2). */
  instanceIdsOfGroup(groupName: string): Promise<readonly string[]>;
}

/**
 * §5.3 storage rank: `storage_candidates` order, then other still-configured writable storages,
 * then L1P5, then L2. Lower is preferred.
 */
export function storageRank(instance: DataPathInstance, storageName: string, type: number): number {
  const c = instance.writableCandidates;
  for (let i = 0; i < c.length; i++) if ((c[i] as WritableStorage).name === storageName) return i;
  if (type === StorageType.ST_EVENT_REPORT_L1P5) return c.length + 1;
  if (type === StorageType.ST_EVENT_REPORT_L2) return c.length + 2;
  return c.length;
}
