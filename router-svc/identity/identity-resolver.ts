/**
 * A request's `model` and `cache_salt` → its RequestIdentity (cache-identity §2), against the
 * router's view:
 * - a model some instance lists: its scope (the instances listing it, plus unknown lists); an
 *   adapter (listed with a parent by one of them) is the request's LoRA name, its parent the
 *   tokenizer's model (§5);
 * - a model no instance lists: 404 (UnknownModelError) when every instance's list is known and
 *   there is at least one instance; with unknown lists, the unlisted scope (only they may serve
 *   it), matched as a base model — nothing says it is an adapter. An empty view is not a 404: the
 *   model may well exist, its engines are just not in the view (the decision's 503 says so);
 * - no model: allowed when the known lists name exactly one base model (the request is that
 *   model's, its adapters aside) or none (any instance); otherwise ModelRequiredError (400).
 * - a salt enters block 0's key (§3) and the fingerprint seed.
 *
 * Identities are cached by (model, salt) until the view's models revision moves (load reports do
 * not move it), so a request costs one map lookup; the cache is bounded (a flood of distinct
 * salts only costs rebuilding identities, never memory).
 */
import { KeyIdentityCache } from '../../shared/keys/cache-identity.js';
import { fingerprintSeed } from '../../shared/keys/prompt-fingerprint.js';
import type { ViewCache } from '../viewcache/view-cache.js';
import { ModelRequiredError, UnknownModelError } from './identity-errors.js';
import { ANY_IDENTITY, ANY_SCOPE, modelScope, UNLISTED_SCOPE, type RequestIdentity } from './request-identity.js';
import { ServedModelIndex, type ExcludedInstance } from './served-model-index.js';

/** Identities kept before the cache is emptied (distinct (model, salt) pairs in one models revision). */
const MAX_CACHED_IDENTITIES = 4096;

export class IdentityResolver {
  private index: ServedModelIndex | null = null;
  private indexRevision = -1;
  private readonly keys = new KeyIdentityCache();
  private readonly cache = new Map<string, RequestIdentity>();

  constructor(private readonly view: ViewCache) {}

  /** The served-model index of the view's current models revision. */
  get models(): ServedModelIndex {
    if (this.index === null || this.indexRevision !== this.view.modelsRevision) {
      this.index = new ServedModelIndex(this.view.instances());
      this.indexRevision = this.view.modelsRevision;
      this.cache.clear();
    }
    return this.index;
  }

  /**
   * The identity of a request naming `model` (null: none) and `salt` (null: unsalted; the caller
   * checked it is a non-empty string). Throws UnknownModelError or ModelRequiredError.
   */
  resolve(model: string | null, salt: string | null): RequestIdentity {
    const index = this.models;
    if (model === null && salt === null) return this.defaultIdentity(index);
    const key = `${model === null ? '\u0001' : `=${model}`}\u0000${salt === null ? '\u0001' : `=${salt}`}`;
    let id = this.cache.get(key);
    if (id === undefined) {
      id = this.build(index, model, salt);
      if (this.cache.size >= MAX_CACHED_IDENTITIES) this.cache.clear();
      this.cache.set(key, id);
    }
    return id;
  }

  /**
   * The identity of a request that may name no model whatever the view serves (the query endpoint:
   * `model` is optional there): every instance, base keys, salted when `salt` is given.
   */
  anyModel(salt: string | null): RequestIdentity {
    if (salt === null) return ANY_IDENTITY;
    const key = `\u0002\u0000=${salt}`;
    let id = this.cache.get(key);
    if (id === undefined) {
      id = this.identity(null, false, ANY_SCOPE, null, salt);
      if (this.cache.size >= MAX_CACHED_IDENTITIES) this.cache.clear();
      this.cache.set(key, id);
    }
    return id;
  }

  /** The instances `identity` leaves out for serving other models (`/v1/route`'s explanation). */
  excluded(identity: RequestIdentity): readonly ExcludedInstance[] {
    return this.models.excluded(identity);
  }

  private defaultIdentity(index: ServedModelIndex): RequestIdentity {
    const key = '\u0001\u0000\u0001';
    let id = this.cache.get(key);
    if (id === undefined) {
      id = this.build(index, null, null);
      this.cache.set(key, id);
    }
    return id;
  }

  private build(index: ServedModelIndex, requested: string | null, salt: string | null): RequestIdentity {
    let model = requested;
    if (model === null) {
      const bases = index.baseModels;
      if (bases.length > 1) throw new ModelRequiredError(bases);
      if (bases.length === 0) return salt === null ? ANY_IDENTITY : this.identity(null, false, ANY_SCOPE, null, salt);
      model = bases[0]!;
    }
    if (index.lists(model)) {
      const parent = index.adapterParent(model);
      return this.identity(model, requested !== null, modelScope(model), parent, salt);
    }
    if (index.unknownLists === 0 && index.instanceCount > 0) throw new UnknownModelError(model);
    return this.identity(model, requested !== null, UNLISTED_SCOPE, null, salt);
  }

  private identity(model: string | null, modelGiven: boolean, scope: string, parent: string | null, salt: string | null): RequestIdentity {
    const loraName = parent === null ? null : model;
    const keys = this.keys.get(loraName, salt);
    return Object.freeze({ model, modelGiven, scope, loraName, parentModel: parent, salted: salt !== null, keys, fingerprintSeed: fingerprintSeed(keys) });
  }
}
