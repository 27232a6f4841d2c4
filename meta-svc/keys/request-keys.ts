/**
 * Reads `block_keys` / `token_ids` of a keyed request and resolves them (kvcm-meta §4.3) with
 * the instance's block size and the request limit. Reading happens before any side effect.
 */
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import type { InstanceRecord } from '../store/meta-store.js';
import type { RequestReader } from '../wire/request-reader.js';
import { resolveBlockKeys } from './block-key-resolver.js';

export interface RawKeys {
  readonly blockKeys: bigint[];
  readonly tokenIds: bigint[];
}

export function readRawKeys(req: RequestReader): RawKeys {
  return { blockKeys: req.int64List('block_keys'), tokenIds: req.int64List('token_ids') };
}

export function keysOf(
  requestName: string,
  raw: RawKeys,
  record: InstanceRecord,
  maxKeys: number,
  hasher: ContentKeyHasher,
): bigint[] {
  return resolveBlockKeys(
    { requestName, blockKeys: raw.blockKeys, tokenIds: raw.tokenIds, blockSize: record.blockSize, maxKeys },
    hasher,
  );
}
