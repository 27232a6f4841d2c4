/**
 * A request's cache identity as routing uses it (cache-identity §2): which instances may take it
 * (its model's), which keys its prompt is matched under (§3: the LoRA adapter on every block, the
 * salt on block 0), which fingerprints its pending prompts carry (never another identity's), and
 * which tokenizer applies (§5: an adapter's parent's). Built by IdentityResolver, once per
 * (model, salt) and served-models revision, and shared by every request with the same pair.
 *
 * Candidate scopes: instances are filtered by the model, and every per-candidate-set state a
 * policy keeps (candidate sets, queue-cost normalisation, tie rotations) is kept per scope, so two
 * models' traffic never rotates one cursor or normalises against the other's queues.
 *   ANY_SCOPE      no model to filter by (none given, and the known lists name no base model):
 *                  every instance.
 *   model scope    a model some instance lists: the instances listing it, plus those whose list
 *                  is unknown (they may serve any model).
 *   UNLISTED_SCOPE a model no instance lists while some lists are unknown: only the instances with
 *                  an unknown list. One scope for every such name, so a client inventing names
 *                  cannot grow the router's state.
 */
import { PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';
import { PLAIN_FINGERPRINT_SEED } from '../../shared/keys/prompt-fingerprint.js';
import { servesModel } from '../../shared/view/served-models.js';
import type { RouterInstance } from '../viewcache/view-update.js';

export const ANY_SCOPE = 'any';
export const UNLISTED_SCOPE = 'unlisted';

/** The scope key of a model some instance lists (prefixed: no model name can equal the two above). */
export function modelScope(model: string): string {
  return `model:${model}`;
}

export interface RequestIdentity {
  /** The model candidates are filtered by; null = any (ANY_SCOPE). */
  readonly model: string | null;
  /** The request named `model` (false: it was the only base model served, or there is none). */
  readonly modelGiven: boolean;
  /** ANY_SCOPE, UNLISTED_SCOPE or modelScope(model): the key of every per-scope state. */
  readonly scope: string;
  /** `model` when it is a LoRA adapter (listed with a parent by a candidate); else null. */
  readonly loraName: string | null;
  /** The adapter's parent (its tokenizer's model, §5); null for a base model or no model. */
  readonly parentModel: string | null;
  /** A `cache_salt` was given (the salt itself stays in `keys` only: never explained, never logged). */
  readonly salted: boolean;
  /** The content-key terms (§3) the prompt is matched under. */
  readonly keys: KeyIdentity;
  /** The prompt fingerprints' chain seed (shared/keys/prompt-fingerprint.ts fingerprintSeed). */
  readonly fingerprintSeed: number;
}

/** No model, base keys, unsalted: what a request without identity fields meets in a fleet of unknown lists. */
export const ANY_IDENTITY: RequestIdentity = Object.freeze({
  model: null,
  modelGiven: false,
  scope: ANY_SCOPE,
  loraName: null,
  parentModel: null,
  salted: false,
  keys: PLAIN_IDENTITY,
  fingerprintSeed: PLAIN_FINGERPRINT_SEED,
});

/** Whether `inst` is in `identity`'s candidate scope (see the file comment). O(models listed). */
export function inScope(inst: RouterInstance, identity: RequestIdentity): boolean {
  if (identity.scope === ANY_SCOPE) return true;
  if (identity.scope === UNLISTED_SCOPE) return inst.models === null;
  return servesModel(inst.models, identity.model!);
}

/** `/v1/route`'s account of the identity it used (cache-identity §2): never the salt itself. */
export interface IdentityExplanation {
  model: string | null;
  model_given: boolean;
  lora_name: string | null;
  salted: boolean;
}

export function explainIdentity(identity: RequestIdentity): IdentityExplanation {
  return { model: identity.model, model_given: identity.modelGiven, lora_name: identity.loraName, salted: identity.salted };
}
