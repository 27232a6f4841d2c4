/**
 * getCacheLocation and getCacheLocationLen (kvcm-meta §5.2, §5.3), and the registration of every
 * read-side RPC of the data path. Both RPCs run the same per-key selection and the same
 * query-shape functions, so the length always equals what getCacheLocation returns.
 * Read-only apart from hit statistics (§5.4), which only getCacheLocation records.
 */
import { QueryType } from '../meta-enums.js';
import { missingFields } from '../meta-errors.js';
import type { RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { checkBlockMask, isMasked, readBlockMask } from '../keys/block-mask.js';
import { keysOf, readRawKeys } from '../keys/request-keys.js';
import { emptyCacheLocation, lookupEntryOf, missEntry } from '../lookup/cache-location-wire.js';
import type { WireCacheLocation } from '../lookup/cache-location-wire.js';
import { selectLocation } from '../lookup/location-selection.js';
import type { SelectedLocation, SelectionContext } from '../lookup/location-selection.js';
import { checkSwSize, effectiveQueryType, reverseRollWindowEnd } from '../lookup/query-lookup.js';
import type { DataPath } from '../write/data-path.js';
import { registerCacheMetaRpcs } from './cache-meta.js';
import { registerHostCacheStateRpc } from './host-cache-state.js';
import { registerLocationsByBackendRpc } from './locations-by-backend.js';
import { countLookup, selectionContext } from './lookup-context.js';
import type { RpcRegistrar } from './rpc-registrar.js';

/** Keys fetched per store round trip while prefix matching, so a long miss-free tail is cheap. */
const PREFIX_CHUNK = 512;

/**
 * Registers getCacheLocation, getCacheLocationsByBackend, getCacheLocationLen, getCacheMeta,
 * getCacheMetaDetail, getHostCacheState.
 */
export function registerLookupRpcs(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('getCacheLocation', (req) => getCacheLocation(dp, req));
  registerLocationsByBackendRpc(server, dp);
  server.registerRpc('getCacheLocationLen', (req) => getCacheLocationLen(dp, req));
  registerCacheMetaRpcs(server, dp);
  registerHostCacheStateRpc(server, dp);
}

/** Selections of `keys[indexes[j]]`, one store read. */
async function selectAt(
  dp: DataPath,
  ctx: SelectionContext,
  keys: readonly bigint[],
  indexes: readonly number[],
): Promise<(SelectedLocation | null)[]> {
  const wanted = indexes.map((i) => keys[i] as bigint);
  const blocks = await dp.store.getBlocks(ctx.instance.record.instanceId, wanted);
  return wanted.map((k) => selectLocation(blocks.get(k), ctx));
}

/**
 * Prefix match over `indexes` (in order): selections up to the first miss, fetched in chunks so
 * the store is not read past the first miss.
 */
async function prefixHits(
  dp: DataPath,
  ctx: SelectionContext,
  keys: readonly bigint[],
  indexes: readonly number[],
): Promise<{ index: number; sel: SelectedLocation }[]> {
  const out: { index: number; sel: SelectedLocation }[] = [];
  for (let start = 0; start < indexes.length; start += PREFIX_CHUNK) {
    const chunk = indexes.slice(start, start + PREFIX_CHUNK);
    const sels = await selectAt(dp, ctx, keys, chunk);
    for (let j = 0; j < sels.length; j++) {
      const sel = sels[j];
      if (sel === null || sel === undefined) return out;
      out.push({ index: chunk[j] as number, sel });
    }
  }
  return out;
}

function allIndexes(n: number): number[] {
  const a = new Array<number>(n);
  for (let i = 0; i < n; i++) a[i] = i;
  return a;
}

async function getCacheLocation(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const requested = req.enumOf('query_type', QueryType);
  const raw = readRawKeys(req);
  const mask = readBlockMask(req.message('block_mask'), 'block_mask');
  const swSize = req.int32('sw_size');
  const specNames = req.strList('location_spec_names');
  if (instanceId === '') throw missingFields('GetCacheLocation', ['instance_id']);

  const instance = await dp.instances.resolve(instanceId);
  const q = effectiveQueryType(requested, instance.record.defaultQueryType);
  const keys = keysOf('GetCacheLocation', raw, instance.record, dp.limits.maxKeysPerRequest, dp.hasher);
  const n = keys.length;
  if (q === QueryType.QT_REVERSE_ROLL_SW_MATCH) checkSwSize(swSize, n);
  else checkBlockMask(mask, n, 'block_mask');

  const filter = specNames.length === 0 ? null : new Set(specNames);
  const ctx = selectionContext(dp, instance, filter);
  const missSpecNames = instance.record.locationSpecInfos.map((s) => s.name).filter((s) => filter === null || filter.has(s));
  const api = 'getCacheLocation';
  const nowUs = BigInt(ctx.nowMs) * 1000n;
  const locations: WireCacheLocation[] = [];
  let hitCount = 0;
  let maskedCount = 0;
  const recordHit = (i: number): void => {
    hitCount++;
    dp.hits.record(instanceId, keys[i] as bigint, nowUs);
  };

  if (q === QueryType.QT_PREFIX_MATCH) {
    const unmasked: number[] = [];
    for (let i = 0; i < n; i++) {
      if (isMasked(mask, i)) maskedCount++;
      else unmasked.push(i);
    }
    for (const h of await prefixHits(dp, ctx, keys, unmasked)) {
      locations.push(lookupEntryOf(h.sel));
      recordHit(h.index);
    }
  } else if (q === QueryType.QT_BATCH_GET) {
    const unmasked: number[] = [];
    for (let i = 0; i < n; i++) if (!isMasked(mask, i)) unmasked.push(i);
    const sels = await selectAt(dp, ctx, keys, unmasked);
    let j = 0;
    for (let i = 0; i < n; i++) {
      if (j < unmasked.length && unmasked[j] === i) {
        const sel = sels[j++];
        if (sel) {
          locations.push(lookupEntryOf(sel));
          recordHit(i);
        } else locations.push(missEntry(missSpecNames));
      } else {
        maskedCount++;
        locations.push(emptyCacheLocation());
      }
    }
  } else {
    // §4.4: the mask is ignored by REVERSE_ROLL_SW_MATCH.
    const sels = await selectAt(dp, ctx, keys, allIndexes(n));
    const e = reverseRollWindowEnd(
      sels.map((s) => s !== null),
      swSize,
    );
    for (let i = 0; i < n; i++) {
      const sel = sels[i];
      if (e > 0 && i >= e - swSize && i < e && sel) {
        locations.push(lookupEntryOf(sel));
        recordHit(i);
      } else locations.push(missEntry(missSpecNames));
    }
  }
  countLookup(dp, api, hitCount, n - hitCount - maskedCount, maskedCount);
  return { fields: { locations } };
}

async function getCacheLocationLen(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const requested = req.enumOf('query_type', QueryType);
  const raw = readRawKeys(req);
  const swSize = req.int32('sw_size');
  if (instanceId === '') throw missingFields('GetCacheLocationLen', ['instance_id']);

  const instance = await dp.instances.resolve(instanceId);
  const q = effectiveQueryType(requested, instance.record.defaultQueryType);
  const keys = keysOf('GetCacheLocationLen', raw, instance.record, dp.limits.maxKeysPerRequest, dp.hasher);
  const n = keys.length;
  if (q === QueryType.QT_REVERSE_ROLL_SW_MATCH) checkSwSize(swSize, n);
  const ctx = selectionContext(dp, instance, null);
  let len: number;
  if (q === QueryType.QT_PREFIX_MATCH) {
    len = (await prefixHits(dp, ctx, keys, allIndexes(n))).length;
  } else {
    const hit = (await selectAt(dp, ctx, keys, allIndexes(n))).map((s) => s !== null);
    len = q === QueryType.QT_BATCH_GET ? hit.filter(Boolean).length : reverseRollWindowEnd(hit, swSize);
  }
  return { fields: { cache_location_len: BigInt(len) } };
}
