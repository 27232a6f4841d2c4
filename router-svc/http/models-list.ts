/**
 * The router's own `GET /v1/models` (cache-identity §2): the union of the routing candidates'
 * served-model lists in OpenAI's list form, so a client that lists models before calling (the
 * official `openai` client's `models.list()`, UIs picking a model) works through the router.
 *
 * Where the spec is silent:
 * - "candidates" are the instances that could take a request now (schedulable, not SUSPECT, with a
 *   load report: routing.md "Candidates"), so a model whose engines all left stops being listed;
 *   instances with an unknown list add nothing (the router cannot say what they serve);
 * - a name listed by several instances appears once, as the first instance (by name) lists it;
 * - order: each base model followed by its adapters, both by name;
 * - `owned_by` is "kv-cache-router": the view does not carry the engines' own (vLLM writes
 *   "vllm"), and the router is the one answering; `created` is the router's start (Unix seconds),
 *   stable across calls, as OpenAI's Model object requires one.
 * Pure: instances in, the list out; one pass over the lists per call (an operator's or a client's
 * occasional call, never on the routing path).
 */
import { isCandidate } from '../policy/candidates.js';
import type { RouterInstance } from '../viewcache/view-update.js';

export const MODELS_PATH = '/v1/models';
export const MODEL_OWNER = 'kv-cache-router';

/** One entry of the list, vLLM's ModelCard fields that apply. */
export interface OpenAiModelCard {
  readonly id: string;
  readonly object: 'model';
  readonly created: number;
  readonly owned_by: string;
  /** The base model of a LoRA adapter; null for a base model. */
  readonly parent: string | null;
}

export interface OpenAiModelList {
  readonly object: 'list';
  readonly data: readonly OpenAiModelCard[];
}

/** The union of `instances`' lists (candidates only), `created` in Unix seconds. */
export function servedModelList(instances: readonly RouterInstance[], createdSeconds: number): OpenAiModelList {
  const byName = new Map<string, string | null>();
  for (const inst of instances) {
    if (inst.models === null || !isCandidate(inst)) continue;
    for (const m of inst.models) if (!byName.has(m.name)) byName.set(m.name, m.parent);
  }
  const data: OpenAiModelCard[] = [];
  for (const [id, parent] of byName) data.push({ id, object: 'model', created: createdSeconds, owned_by: MODEL_OWNER, parent });
  // A base model, then its adapters: sorted by (the base's name, base before adapters, name).
  data.sort((a, b) => compare(a.parent ?? a.id, b.parent ?? b.id) || (a.parent === null ? 0 : 1) - (b.parent === null ? 0 : 1) || compare(a.id, b.id));
  return { object: 'list', data };
}

function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
