/**
 * The model half of a request's identity (cache-identity §2) against the instances' served-model
 * lists: which instances a request for `model` may be credited on, whether the model is a LoRA
 * adapter (its name then enters every block's key, §3), and whether the fleet knows it at all.
 * Pure; built once per request from lists the caller already holds (the directory's instance
 * table for its Query). Cost: one pass over the instances and their lists.
 */
import type { ServedModelList } from './served-models.js';

/** An instance as the scope reads it (the directory's InstanceView and the router's RouterInstance both fit). */
export interface ListedInstance {
  readonly name: string;
  readonly models: ServedModelList;
}

export interface ModelScope {
  readonly model: string;
  /** The model's name when some instance lists it as an adapter (cache-identity §2 "LoRA"); null for a base model. */
  readonly loraName: string | null;
  /**
   * Some instance lists the model or has an unknown list. False: no instance the lists know can
   * serve it, and only an instance outside them (unknown, e.g. a static stream's) could.
   */
  readonly listed: boolean;
  /** In scope: the instance serves the model, its list is unknown, or the lists do not know it (unknown). */
  admits(instanceName: string): boolean;
}

/** The scope of `model` (a validated, non-empty name) over `instances`. */
export function modelScope(model: string, instances: Iterable<ListedInstance>): ModelScope {
  const excluded = new Set<string>();
  let listed = false;
  let loraName: string | null = null;
  for (const inst of instances) {
    const list = inst.models;
    if (list === null) {
      listed = true;
      continue;
    }
    let serves = false;
    for (let i = 0; i < list.length; i++) {
      const m = list[i]!;
      if (m.name !== model) continue;
      serves = true;
      // One instance listing it with a parent makes it an adapter (cache-identity §2).
      if (m.parent !== null) loraName = model;
    }
    if (serves) listed = true;
    else excluded.add(inst.name);
  }
  return { model, loraName, listed, admits: (name) => !excluded.has(name) };
}

/** vLLM's message for a model it does not serve (its 404; the directory's NOT_FOUND). */
export function modelNotFoundMessage(model: string): string {
  return `The model \`${model}\` does not exist.`;
}
