/**
 * removeCache and trimCache (kvcm-meta §5.2). Both delete before responding, so the removed data
 * is invisible to every lookup when the OK arrives (W-07). Registration and reporter state are
 * never touched. Each runs under the group lock so a concurrent write session cannot interleave
 * with its read-then-delete (a statistics flush skips blocks without locations by itself).
 */
import { TrimStrategy } from '../meta-enums.js';
import { MetaError, missingFields } from '../meta-errors.js';
import type { RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { isMasked } from '../keys/block-mask.js';
import type { LocationScanFilter, MetaStore, StoreMutation } from '../store/meta-store.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './rpc-registrar.js';
import { readMaskedKeys, resolveMaskedKeys } from './masked-keys.js';

/** §9.1: ≤ 1000 rows per transaction for bulk deletion. */
const TRIM_BATCH = 1000;

export function registerRemoveTrimRpcs(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('removeCache', (req) => removeCache(dp, req));
  server.registerRpc('trimCache', (req) => trimCache(dp, req));
}

async function removeCache(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const read = readMaskedKeys(req);
  const { instanceId, mask } = read;
  const { instance, keys } = await resolveMaskedKeys(dp, 'RemoveCache', read);
  const muts: StoreMutation[] = [];
  for (let i = 0; i < keys.length; i++) {
    if (!isMasked(mask, i)) muts.push({ op: 'deleteBlock', instanceId, blockKey: keys[i] as bigint });
  }
  // One transaction for every unmasked key (§5.2).
  if (muts.length > 0) await dp.lock.run(instance.groupName, () => dp.store.apply(muts));
  return { fields: {} };
}

async function trimCache(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const strategy = req.enumOf('strategy', TrimStrategy);
  const begin = req.int32('begin_timestamp');
  const end = req.int32('end_timestamp');
  if (instanceId === '') throw missingFields('TrimCache', ['instance_id']);

  const instance = await dp.instances.resolve(instanceId);
  if (strategy === TrimStrategy.TS_UNSPECIFIED) throw new MetaError('INVALID_ARGUMENT', 'trimCache strategy TS_UNSPECIFIED');
  if (strategy === TrimStrategy.TS_TIMESTAMP && (begin < 0 || (end !== 0 && end <= begin))) {
    throw new MetaError('INVALID_ARGUMENT', `trimCache window [${begin}, ${end}) is invalid (§5.2)`);
  }
  await dp.lock.run(instance.groupName, async () => {
    if (strategy === TrimStrategy.TS_TIMESTAMP) {
      const filter: LocationScanFilter = {
        createdFromUs: BigInt(begin) * 1_000_000n,
        ...(end !== 0 ? { createdBeforeUs: BigInt(end) * 1_000_000n } : {}),
      };
      await deleteMatching(dp.store, instanceId, filter, false);
    } else {
      // TS_REMOVE_ALL_CACHE / TS_REMOVE_ALL_META: our backends are metadata-only, so the
      // release hook of ALL_CACHE is a no-op and the two differ only in name.
      dp.sessions.cancelInstance(instanceId);
      await deleteMatching(dp.store, instanceId, {}, true);
    }
  });
  return { fields: {} };
}

/**
 * Deletes the instance's locations matching `filter`, ≤ TRIM_BATCH per transaction. With
 * `wholeBlocks`, each touched block goes with its properties; otherwise only the matching
 * locations go and blocks left without locations are removed afterwards.
 */
async function deleteMatching(store: MetaStore, instanceId: string, filter: LocationScanFilter, wholeBlocks: boolean): Promise<void> {
  for (;;) {
    // Always the first page: the previous page's rows are gone.
    const page = await store.scanLocations(instanceId, filter, null, TRIM_BATCH);
    if (page.items.length === 0) return;
    const keys = [...new Set(page.items.map((s) => s.blockKey))];
    if (wholeBlocks) {
      await store.apply(keys.map((k) => ({ op: 'deleteBlock' as const, instanceId, blockKey: k })));
      continue;
    }
    const res = await store.apply(
      page.items.map((s) => ({ op: 'deleteLocationIf' as const, instanceId, blockKey: s.blockKey, locationId: s.location.locationId })),
    );
    const left = await store.getBlocks(instanceId, keys);
    const empties: StoreMutation[] = [];
    for (const [k, b] of left) if (b.locations.length === 0) empties.push({ op: 'deleteBlock', instanceId, blockKey: k });
    if (empties.length > 0) await store.apply(empties);
    if (res.every((r) => !r.applied)) return;
  }
}
