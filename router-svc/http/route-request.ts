/**
 * Request bodies of the router's own endpoints, checked into domain values (routing.md "HTTP API").
 * Pure: JSON value in, typed request out, or a 400 RouterHttpError whose reason names the field.
 */
import { firstInvalidTokenId } from '../../shared/keys/token-ids.js';
import type { RouteRequest } from '../policy/policy-types.js';
import { badRequest } from './router-http-errors.js';

/** `POST /v1/internal/kv-cache/query`. */
export interface KvQueryRequest {
  /** Empty: synchronization and residency of every stream with zero hits (routing.md). */
  readonly tokenIds: readonly number[];
}

export function parseKvQueryRequest(body: unknown): KvQueryRequest {
  const o = jsonObject(body);
  if (!('token_ids' in o)) throw badRequest('token_ids is required: an array of integers in [0, 2^31)', 'token_ids');
  return { tokenIds: parseTokenIds(o['token_ids'], 'token_ids') };
}

/**
 * `{"token_ids":[...]}` or `{"prompt_tokens": n}`, optionally `"dry_run": true`. With both, token_ids drive CAR and
 * prompt_tokens is taken as given (the caller may count a chat template the ids leave out).
 */
export function parseRouteRequest(body: unknown): RouteRequest {
  const o = jsonObject(body);
  const hasIds = 'token_ids' in o && o['token_ids'] !== null;
  const hasCount = 'prompt_tokens' in o && o['prompt_tokens'] !== null;
  if (!hasIds && !hasCount) throw badRequest('token_ids, prompt, messages or prompt_tokens is required', 'token_ids');
  const tokenIds = hasIds ? parseTokenIds(o['token_ids'], 'token_ids') : null;
  let promptTokens = tokenIds?.length ?? 0;
  if (hasCount) {
    const n = o['prompt_tokens'];
    if (typeof n !== 'number' || !Number.isSafeInteger(n) || n < 0) throw badRequest('prompt_tokens must be a non-negative integer', 'prompt_tokens');
    promptTokens = n;
  }
  return { tokenIds, promptTokens, dryRun: parseDryRun(o) };
}

/** `/v1/route`'s `"dry_run"` whatever the prompt's form (token ids, text or messages); absent = false. */
export function parseDryRun(o: Readonly<Record<string, unknown>>): boolean {
  const dryRun = o['dry_run'] ?? false;
  if (typeof dryRun !== 'boolean') throw badRequest('dry_run must be a boolean', 'dry_run');
  return dryRun;
}

/**
 * An array of integers in [0, 2^31), or a 400 naming the field and, for a bad element, its index.
 * Hot path (8k-token prompts): one indexed loop, no intermediate arrays.
 */
export function parseTokenIds(value: unknown, field: string): readonly number[] {
  if (!Array.isArray(value)) throw badRequest(`${field} must be an array of integers in [0, 2^31)`, field);
  const i = firstInvalidTokenId(value);
  if (i >= 0) throw badRequest(`${field}[${i}] must be an integer in [0, 2^31)`, field);
  return value as number[];
}

export function jsonObject(body: unknown): Record<string, unknown> {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badRequest('body must be a JSON object');
  return body as Record<string, unknown>;
}
