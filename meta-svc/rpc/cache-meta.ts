/**
 * getCacheMeta and getCacheMetaDetail (kvcm-meta §5.2).
 * - getCacheMeta: arrays aligned with the keys; `locations[i]` = the QT_BATCH_GET selection or an
 *   empty CacheLocation; `metas[i]` = compact JSON of the stored block ("" for missing/masked).
 * - getCacheMetaDetail: the raw diagnostic view, one item per unmasked key, every location of
 *   every status, no visibility filtering (§7.10 never applies), no side effect. A store read
 *   failure sets the items' status; all items failed → header INTERNAL_ERROR, items still sent.
 */
import { CacheLocationStatus, StorageType, enumName } from '../meta-enums.js';
import type { RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { isMasked } from '../keys/block-mask.js';
import { cacheLocationDetailOf, emptyCacheLocation, lookupEntryOf, notFoundDetail } from '../lookup/cache-location-wire.js';
import type { WireCacheLocation, WireCacheLocationDetail } from '../lookup/cache-location-wire.js';
import { selectLocation } from '../lookup/location-selection.js';
import { StoreError } from '../store/meta-store.js';
import type { StoredBlock } from '../store/meta-store.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './rpc-registrar.js';
import { countLookup, selectionContext } from './lookup-context.js';
import { readMaskedKeys, resolveMaskedKeys } from './masked-keys.js';

export function registerCacheMetaRpcs(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('getCacheMeta', (req) => getCacheMeta(dp, req));
  server.registerRpc('getCacheMetaDetail', (req) => getCacheMetaDetail(dp, req));
}

async function getCacheMeta(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const read = readMaskedKeys(req);
  const detailLevel = req.int32('detail_level');
  const { instanceId, mask } = read;
  const { instance, keys } = await resolveMaskedKeys(dp, 'GetCacheMeta', read);
  const unmaskedKeys = keys.filter((_k, i) => !isMasked(mask, i));
  const blocks = await dp.store.getBlocks(instanceId, unmaskedKeys);
  const ctx = selectionContext(dp, instance, null);
  const locations: WireCacheLocation[] = [];
  const metas: string[] = [];
  let hit = 0;
  let masked = 0;
  for (let i = 0; i < keys.length; i++) {
    if (isMasked(mask, i)) {
      masked++;
      locations.push(emptyCacheLocation());
      metas.push('');
      continue;
    }
    const key = keys[i] as bigint;
    const block = blocks.get(key);
    const sel = selectLocation(block, ctx);
    if (sel) hit++;
    locations.push(sel ? lookupEntryOf(sel) : emptyCacheLocation());
    metas.push(block === undefined ? '' : metaJson(key, block, detailLevel));
  }
  countLookup(dp, 'getCacheMeta', hit, keys.length - hit - masked, masked);
  return { fields: { locations, metas } };
}

/** §5.2 compact meta JSON; `detail_level ≥ 1` adds every location of every status. */
function metaJson(key: bigint, block: StoredBlock, detailLevel: number): string {
  let s = `{"block_key":"${key}","properties":${JSON.stringify(block.properties)}`;
  if (detailLevel >= 1) {
    const locs = block.locations.map((l) => ({
      location_id: l.locationId,
      status: enumName(CacheLocationStatus, l.status),
      type: enumName(StorageType, l.type),
      create_time: l.createTimeUs.toString(),
      spec_names: l.specs.map((sp) => sp.name),
    }));
    s += `,"locations":${JSON.stringify(locs)}`;
  }
  return `${s}}`;
}

interface DetailItem {
  request_index: number;
  block_key: bigint;
  prev_block_key: string;
  properties: Readonly<Record<string, string>>;
  locations: WireCacheLocationDetail[];
  status: { code: string; message: string };
}

async function getCacheMetaDetail(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const read = readMaskedKeys(req);
  const { instanceId, mask } = read;
  const { instance, keys } = await resolveMaskedKeys(dp, 'GetCacheMetaDetail', read);
  const indexes: number[] = [];
  for (let i = 0; i < keys.length; i++) if (!isMasked(mask, i)) indexes.push(i);

  let blocks: Map<bigint, StoredBlock> | null = null;
  let failure = '';
  try {
    blocks = await dp.store.getBlocks(instanceId, indexes.map((i) => keys[i] as bigint));
  } catch (err) {
    // A read failure is reported per item (§5.2), not as a handler exception.
    if (!(err instanceof StoreError)) throw err;
    failure = err.message;
    dp.log.error({ err, instance_id: instanceId }, 'getCacheMetaDetail store read failed');
  }
  const items: DetailItem[] = [];
  for (const i of indexes) {
    const key = keys[i] as bigint;
    if (blocks === null) {
      items.push({
        request_index: i,
        block_key: key,
        prev_block_key: '',
        properties: {},
        locations: [],
        status: { code: 'INTERNAL_ERROR', message: failure },
      });
      continue;
    }
    const block = blocks.get(key);
    items.push({
      request_index: i,
      block_key: key,
      prev_block_key: block?.properties['BP#prev_key'] ?? '',
      properties: block?.properties ?? {},
      locations: block === undefined ? [notFoundDetail()] : block.locations.map(cacheLocationDetailOf),
      status: { code: 'OK', message: '' },
    });
  }
  if (blocks === null && items.length > 0) {
    return { code: 'INTERNAL_ERROR', message: 'every item failed: store read failed', fields: { items } };
  }
  return { fields: { items } };
}
