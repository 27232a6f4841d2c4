/**
 * §9.1 / §6 step 8: sessions do not survive a restart, so at startup every CLS_WRITING location
 * is deleted, and CLS_DELETING deletion resumes. ≤ 1000 rows per transaction (§9.1 background
 * limit); each delete is conditional on the scanned rev. Blocks left with no location are
 * removed with their properties (their BP#prev_key came from the dead session).
 */
import { CLS_DELETING, CLS_WRITING } from '../store/meta-store.js';
import type { MetaStore, StoreMutation, StoredLocationStatus } from '../store/meta-store.js';

const BATCH = 1000;

/** Returns the number of locations deleted. Runs before the service starts serving. */
export async function deleteUnfinishedLocations(store: MetaStore): Promise<number> {
  let deleted = 0;
  for (const status of [CLS_WRITING, CLS_DELETING] as StoredLocationStatus[]) {
    for (;;) {
      // Always the first page: the previous page's rows are gone, so no cursor is needed.
      const page = await store.scanLocations(null, { status }, null, BATCH);
      if (page.items.length === 0) break;
      const muts: StoreMutation[] = page.items.map((s) => ({
        op: 'deleteLocationIf',
        instanceId: s.instanceId,
        blockKey: s.blockKey,
        locationId: s.location.locationId,
        expectRev: s.location.rev,
      }));
      const res = await store.apply(muts);
      deleted += res.filter((r) => r.applied).length;
      const byInstance = new Map<string, bigint[]>();
      for (const s of page.items) {
        const keys = byInstance.get(s.instanceId) ?? [];
        keys.push(s.blockKey);
        byInstance.set(s.instanceId, keys);
      }
      const empties: StoreMutation[] = [];
      for (const [instanceId, keys] of byInstance) {
        const left = await store.getBlocks(instanceId, keys);
        for (const [key, block] of left) if (block.locations.length === 0) empties.push({ op: 'deleteBlock', instanceId, blockKey: key });
      }
      if (empties.length > 0) await store.apply(empties);
      if (res.every((r) => !r.applied)) break; // nothing moved: avoid spinning on a racing writer
    }
  }
  return deleted;
}
