/**
 * Block keys of a keyed request (kvcm-meta §4.3): non-empty `block_keys` win; otherwise keys
 * are derived from `token_ids` with the instance's block size through the chained XXH3-128
 * content key (seed 1024), one key per complete block, trailing tokens ignored.
 * Pure apart from the shared hasher (synchronous once created); errors are MetaErrors.
 */
import { ContentKeyHasher, blockKeyOf } from '../../shared/keys/content-key.js';
import { MetaError, missingFields } from '../meta-errors.js';

/** §4.3 uses seed 1024 for block keys regardless of any kv-events hash seed. */
export const BLOCK_KEY_HASH_SEED = 1024;

const INT32_MIN = -2147483648n;
const INT32_MAX = 2147483647n;

export interface BlockKeyRequest {
  /** Protobuf request name for the §1.4 message, e.g. `GetCacheLocation`. */
  readonly requestName: string;
  readonly blockKeys: readonly bigint[];
  readonly tokenIds: readonly bigint[];
  /** Tokens per block of the instance (> 0). */
  readonly blockSize: number;
  /** `limits.max_keys_per_request`. */
  readonly maxKeys: number;
}

/** Resolves the keys of one request; the hasher comes from `ContentKeyHasher.forSeed(1024)`. */
export function resolveBlockKeys(req: BlockKeyRequest, hasher: ContentKeyHasher): bigint[] {
  if (req.blockKeys.length > 0) {
    if (req.blockKeys.length > req.maxKeys) throw tooManyKeys(req.blockKeys.length, req.maxKeys);
    return req.blockKeys.slice();
  }
  if (req.tokenIds.length === 0) throw missingFields(req.requestName, ['block_keys', 'token_ids']);
  const n = Math.floor(req.tokenIds.length / req.blockSize);
  if (n > req.maxKeys) throw tooManyKeys(n, req.maxKeys);
  if (n === 0) return [];
  const used = n * req.blockSize;
  // Cost: one pass to range-check and narrow, then one XXH3-128 per block.
  const tokens = new Int32Array(used);
  for (let i = 0; i < used; i++) {
    const t = req.tokenIds[i];
    if (t < INT32_MIN || t > INT32_MAX) {
      throw new MetaError('INVALID_ARGUMENT', `token_ids[${i}] = ${t} does not fit int32 (§4.3)`);
    }
    tokens[i] = Number(t);
  }
  const chained = hasher.chain(tokens, req.blockSize);
  const keys = new Array<bigint>(n);
  for (let b = 0; b < n; b++) keys[b] = blockKeyOf(chained, b * 16);
  return keys;
}

function tooManyKeys(n: number, max: number): MetaError {
  return new MetaError('INVALID_ARGUMENT', `${n} keys exceed limits.max_keys_per_request ${max} (§4.3)`);
}
