/**
 * The ORACLE's reading of a request's cache identity (cache-identity §2, §6), from the engine's
 * own truth: the engine's served-model registry decides whether it may answer the request at all
 * (a model it does not serve is vLLM's 404, so it is no candidate) and, if it may, under which
 * keys its pool holds the prompt (LoRA name on every block when the model is one of its adapters,
 * the salt on block 0) — the rule `tools/engine-sim/openai-server.ts` applies to each request.
 * Pure: no I/O, no engine state beyond the registry.
 */
import type { AdmitOptions } from '../../tools/engine-sim/block-pool.js';
import type { ServedModelRegistry } from '../../tools/engine-sim/served-model-registry.js';

/** What a request says about its identity: its body's `model` and `cache_salt`. */
export interface RequestIdentity {
  /** `model`; null when the body names none (every engine resolves it to its base model). */
  readonly model: string | null;
  /** `cache_salt`; null when unsalted. */
  readonly cacheSalt: string | null;
}

/** A request naming no model and no salt: what the single-model workloads send. */
export const PLAIN_IDENTITY: RequestIdentity = { model: null, cacheSalt: null };

/** The keys the engine serving `models` would admit the request under, or null when it would refuse it (404). */
export function admissionOn(models: ServedModelRegistry, identity: RequestIdentity): AdmitOptions | null {
  const resolved = models.resolve(identity.model);
  if (resolved.kind === 'not_found') return null;
  return { loraName: resolved.kind === 'lora' ? resolved.adapter.name : null, cacheSalt: identity.cacheSalt };
}
