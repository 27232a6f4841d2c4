/**
 * What the view's served-model lists say, indexed for identity resolution (cache-identity §1,
 * §2): which models some instance lists, whether a listed model is a LoRA adapter and of which
 * parent, the base models named, how many instances have an unknown list, and, per candidate
 * scope, the instances left out for serving other models. Pure; built from the instances of one
 * models revision of the view (IdentityResolver rebuilds it when that revision moves), O(total
 * list entries).
 */
import type { RouterInstance } from '../viewcache/view-update.js';
import { inScope, type RequestIdentity } from './request-identity.js';

/** An instance left out of a request's candidates for serving other models (`/v1/route` explains them). */
export interface ExcludedInstance {
  readonly instance_name: string;
  /** Its list: the names it serves (base model first as listed). */
  readonly models: readonly string[];
}

const NONE: readonly ExcludedInstance[] = Object.freeze([]);

export class ServedModelIndex {
  /** Model name → the parent of an adapter listing it (the first in instance-name order), or null when every listing is a base model. */
  private readonly listed = new Map<string, string | null>();
  /** Base models named by the known lists: entries without a parent, and adapters' parents. Sorted. */
  readonly baseModels: readonly string[];
  /** Instances whose list is unknown (they may serve any model). */
  readonly unknownLists: number;
  readonly instanceCount: number;
  private readonly excludedByScope = new Map<string, readonly ExcludedInstance[]>();

  constructor(private readonly instances: readonly RouterInstance[]) {
    let unknown = 0;
    const bases = new Set<string>();
    for (const inst of instances) {
      const list = inst.models;
      if (list === null) {
        unknown++;
        continue;
      }
      for (const m of list) {
        const prior = this.listed.get(m.name);
        // cache-identity §2: an adapter as soon as one candidate lists it with a parent.
        if (prior === undefined || (prior === null && m.parent !== null)) this.listed.set(m.name, m.parent);
        bases.add(m.parent ?? m.name);
      }
    }
    this.unknownLists = unknown;
    this.instanceCount = instances.length;
    this.baseModels = Object.freeze([...bases].sort());
  }

  /** Whether some instance lists `model` (as a base model or an adapter). */
  lists(model: string): boolean {
    return this.listed.has(model);
  }

  /** The parent of `model` when some instance lists it as an adapter; null otherwise. */
  adapterParent(model: string): string | null {
    return this.listed.get(model) ?? null;
  }

  /**
   * The instances with a known list outside `identity`'s scope, in name order: left out for
   * serving other models. Computed once per scope and models revision.
   */
  excluded(identity: RequestIdentity): readonly ExcludedInstance[] {
    let out = this.excludedByScope.get(identity.scope);
    if (out === undefined) {
      const found: ExcludedInstance[] = [];
      for (const inst of this.instances) {
        if (inst.models === null || inScope(inst, identity)) continue;
        found.push(Object.freeze({ instance_name: inst.name, models: Object.freeze(inst.models.map((m) => m.name)) }));
      }
      out = found.length === 0 ? NONE : Object.freeze(found);
      this.excludedByScope.set(identity.scope, out);
    }
    return out;
  }
}
