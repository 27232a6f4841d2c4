/**
 * The cache identity of a gRPC `Query` (cache-identity §2): `model` and `cache_salt` checked and
 * resolved against the instances' served-model lists into the key identity and the instances in
 * scope. Pure; the handler turns a refusal into its gRPC status.
 *
 *   model ""        → every instance, base-model keys (as before)
 *   model m         → instances serving m (base or adapter) or with an unknown list; LoRA keys
 *                     under m when some instance lists m as an adapter
 *   cache_salt ""   → unsalted; otherwise block 0's key is salted
 */
import type { KeyIdentityCache } from '../../shared/keys/cache-identity.js';
import { modelNameProblem } from '../../shared/view/model-pin.js';
import { modelScope, type ListedInstance, type ModelScope } from '../../shared/view/model-scope.js';
import type { QueryScope } from '../index/stream-query.js';

/**
 * vLLM takes any salt; a bound keeps one request from making block 0's hash cost more than the
 * whole prompt's (a salt is a tenant id or a random token, tens of bytes).
 */
export const MAX_CACHE_SALT_LENGTH = 4096;

export type QueryIdentity =
  | { readonly ok: true; readonly scope: QueryScope; readonly model: ModelScope | null }
  | { readonly ok: false; readonly field: 'model' | 'cache_salt'; readonly reason: string };

/**
 * `model` and `cache_salt` of a QueryRequest ('' or absent = not given). `instances` are the
 * instance table's rows; an instance a stream names but the table lacks (a static stream's) has
 * an unknown list.
 */
export function queryIdentity(model: unknown, cacheSalt: unknown, instances: Iterable<ListedInstance>, identities: KeyIdentityCache): QueryIdentity {
  const m = model ?? '';
  const salt = cacheSalt ?? '';
  if (typeof m !== 'string') return { ok: false, field: 'model', reason: 'expected a string' };
  if (typeof salt !== 'string') return { ok: false, field: 'cache_salt', reason: 'expected a string' };
  if (m !== '') {
    const problem = modelNameProblem(m);
    if (problem !== null) return { ok: false, field: 'model', reason: problem };
  }
  if (salt.length > MAX_CACHE_SALT_LENGTH) return { ok: false, field: 'cache_salt', reason: `expected at most ${MAX_CACHE_SALT_LENGTH} characters, got ${salt.length}` };
  const scope = m === '' ? null : modelScope(m, instances);
  const identity = identities.get(scope?.loraName ?? null, salt === '' ? null : salt);
  return { ok: true, scope: { identity, admits: scope === null ? null : scope.admits }, model: scope };
}
