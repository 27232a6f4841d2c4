/**
 * The identity fields of a request body (cache-identity §2) — `model` and `cache_salt` on
 * `/v1/completions`, `/v1/chat/completions`, `/v1/route` and the query endpoint — checked, then
 * resolved against the view into the 404 and 400s the client sees. The body itself is forwarded
 * unchanged by the proxy, so the engine reads the same fields.
 */
import { ModelRequiredError, UnknownModelError } from '../identity/identity-errors.js';
import type { IdentityResolver } from '../identity/identity-resolver.js';
import type { RequestIdentity } from '../identity/request-identity.js';
import { badRequest, unknownModel } from './router-http-errors.js';

export interface IdentityFields {
  /** null: absent, JSON null or "" (vLLM serves its base model for all three). */
  readonly model: string | null;
  /** null: absent or JSON null; otherwise a non-empty string. */
  readonly salt: string | null;
}

const NO_FIELDS: IdentityFields = Object.freeze({ model: null, salt: null });

/** `model` and `cache_salt` of a JSON body object, or a 400 naming the field. */
export function parseIdentityFields(o: Readonly<Record<string, unknown>>): IdentityFields {
  const model = o['model'];
  const salt = o['cache_salt'];
  if ((model === undefined || model === null) && (salt === undefined || salt === null)) return NO_FIELDS;
  if (model !== undefined && model !== null && typeof model !== 'string') throw badRequest('model must be a string', 'model');
  // vLLM's own check and wording (protocol.py check_cache_salt_support).
  if (salt !== undefined && salt !== null && (typeof salt !== 'string' || salt === '')) {
    throw badRequest("Parameter 'cache_salt' must be a non-empty string if provided.", 'cache_salt');
  }
  return { model: typeof model === 'string' && model !== '' ? model : null, salt: typeof salt === 'string' ? salt : null };
}

/**
 * The identity of `fields` in the view; an unknown model is vLLM's 404, a missing one a 400 naming
 * `model` — unless `modelOptional` (the query endpoint), where no model means every instance.
 */
export function resolveIdentity(resolver: IdentityResolver, fields: IdentityFields, modelOptional = false): RequestIdentity {
  try {
    return modelOptional && fields.model === null ? resolver.anyModel(fields.salt) : resolver.resolve(fields.model, fields.salt);
  } catch (e) {
    if (e instanceof UnknownModelError) throw unknownModel(e.model);
    if (e instanceof ModelRequiredError) throw badRequest(e.detail, 'model');
    throw e;
  }
}
