/**
 * The keyed, masked requests (getCacheMeta, getCacheMetaDetail, removeCache) read and resolve
 * their keys the same way: `instance_id`, the keys and `block_mask` are read before anything
 * happens (a caller reads its own extra fields between the two steps, so the first invalid field
 * named stays the same), then the instance is resolved, its keys computed and the mask checked
 * against them (kvcm-meta §4.3, §5.2).
 */
import { missingFields } from '../meta-errors.js';
import type { RequestReader } from '../wire/request-reader.js';
import { checkBlockMask, readBlockMask, type BlockMask } from '../keys/block-mask.js';
import { keysOf, readRawKeys, type RawKeys } from '../keys/request-keys.js';
import type { DataPathInstance } from '../lookup/data-path-instance.js';
import type { DataPath } from '../write/data-path.js';

export interface MaskedKeysRequest {
  readonly instanceId: string;
  readonly raw: RawKeys;
  readonly mask: BlockMask;
}

export function readMaskedKeys(req: RequestReader): MaskedKeysRequest {
  return { instanceId: req.str('instance_id'), raw: readRawKeys(req), mask: readBlockMask(req.message('block_mask'), 'block_mask') };
}

/** `requestName` as the errors name it (`GetCacheMeta`, `RemoveCache`, …). */
export async function resolveMaskedKeys(dp: DataPath, requestName: string, r: MaskedKeysRequest): Promise<{ instance: DataPathInstance; keys: bigint[] }> {
  if (r.instanceId === '') throw missingFields(requestName, ['instance_id']);
  const instance = await dp.instances.resolve(r.instanceId);
  const keys = keysOf(requestName, r.raw, instance.record, dp.limits.maxKeysPerRequest, dp.hasher);
  checkBlockMask(r.mask, keys.length, 'block_mask');
  return { instance, keys };
}
