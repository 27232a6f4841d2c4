/**
 * §4.2 quota_bytes accounting: summed spec sizes of the group's CLS_WRITING + CLS_SERVING
 * locations on writable storages (event-report locations never count). Computed on demand by
 * paging the store, only when a quota is configured and a write would allocate; cost is linear
 * in the group's locations, acceptable for a cap that is checked per startWriteCache.
 */
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { CLS_SERVING, CLS_WRITING } from '../store/meta-store.js';
import type { MetaStore, StoredLocationStatus } from '../store/meta-store.js';
import type { DataPathInstances } from '../lookup/data-path-instance.js';

const PAGE = 1000;

export async function groupUsageBytes(store: MetaStore, instances: DataPathInstances, groupName: string): Promise<bigint> {
  let used = 0n;
  for (const instanceId of await instances.instanceIdsOfGroup(groupName)) {
    const rec = await store.getInstance(instanceId);
    if (rec === null) continue;
    const sizes = new Map<string, bigint>(rec.locationSpecInfos.map((s) => [s.name, s.size]));
    for (const status of [CLS_WRITING, CLS_SERVING] as StoredLocationStatus[]) {
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<MetaStore['scanLocations']>> = await store.scanLocations(instanceId, { status }, cursor, PAGE);
        for (const item of page.items) {
          if (isEventReportLocation(item.location)) continue;
          for (const spec of item.location.specs) used += sizes.get(spec.name) ?? 0n;
        }
        cursor = page.cursor;
      } while (cursor !== null);
    }
  }
  return used;
}
