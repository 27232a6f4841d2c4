/**
 * What the simulated engine serves (cache-identity §1, §6): one base model and the LoRA adapters
 * loaded on it, as vLLM's `OpenAIServingModels` keeps them. Pure state, no HTTP: `models-route.ts`
 * answers `/v1/models` and the load/unload routes from it, the OpenAI endpoint resolves each
 * request's `model` through it.
 *
 * Adapters get vLLM's per-process ids (`lora_int_id`: 1, 2, ... in load order, never reused; an
 * in-place reload keeps its id), which the events publish as the deprecated `lora_id`.
 *
 * Strict (`--served_models` given): a request naming neither the base model nor a loaded adapter
 * is vLLM's 404. Lenient (the default, no list given): such a request is served by the base model,
 * as the simulator always did, so fleets whose clients name any model keep working; `/v1/models`
 * still lists the base model and the adapters.
 */
import type { ServedModel } from '../../shared/view/served-models.js';

/** The simulator's base model when no list is given (also the `model_name` label of /metrics). */
export const DEFAULT_BASE_MODEL = 'sim';

export interface ServedModelRegistryOptions {
  /** First entry = base model, the rest adapters of it (cache-identity §1 order). */
  readonly names: readonly string[];
  /** 404 for a model not served (true with an explicit `--served_models`). */
  readonly strict: boolean;
  /** `owned_by` of every card: the engine kind (`vllm`, `sglang`, `xllm`). Default `vllm`. */
  readonly ownedBy?: string;
  /** The base card's `max_model_len`; null when unknown. */
  readonly maxModelLen?: number | null;
}

export interface LoadedAdapter {
  readonly name: string;
  readonly path: string;
  /** vLLM `lora_int_id`. */
  readonly id: number;
}

/** How a request's `model` resolves. */
export type ModelResolution =
  | { readonly kind: 'base'; readonly answerModel: string }
  | { readonly kind: 'lora'; readonly answerModel: string; readonly adapter: LoadedAdapter }
  | { readonly kind: 'not_found'; readonly model: string };

/** A load or unload refused, with vLLM's error type and status (serving_models.py). */
export interface AdapterRefusal {
  readonly status: 400 | 404;
  readonly type: 'InvalidUserInput' | 'NotFoundError';
  readonly message: string;
}

export class ServedModelRegistry {
  readonly baseModel: string;
  readonly strict: boolean;
  readonly ownedBy: string;
  readonly maxModelLen: number | null;
  /** Insertion order = load order, as vLLM lists them. */
  private readonly adapters = new Map<string, LoadedAdapter>();
  private lastLoraId = 0;
  private readonly changeListeners: (() => void)[] = [];

  constructor(opts: ServedModelRegistryOptions) {
    const [base, ...adapters] = opts.names;
    if (base === undefined || base === '') throw new RangeError('a served model list needs a non-empty base model name');
    this.baseModel = base;
    this.strict = opts.strict;
    this.ownedBy = opts.ownedBy ?? 'vllm';
    this.maxModelLen = opts.maxModelLen ?? null;
    // vLLM's static `--lora-modules`: loaded at start-up, in order, by the same path as run time.
    for (const name of adapters) {
      const refusal = this.load(name, name);
      if (refusal !== null) throw new RangeError(refusal.message);
    }
  }

  /** Base model first, then each adapter with `parent` = base (cache-identity §1). */
  list(): ServedModel[] {
    const out: ServedModel[] = [{ name: this.baseModel, parent: null }];
    for (const a of this.adapters.values()) out.push({ name: a.name, parent: this.baseModel });
    return out;
  }

  /**
   * `listener` runs after every run-time load or unload that changed the list (an xLLM engine
   * writes its etcd registration again, cache-identity §1). An in-place reload changes nothing.
   */
  onChange(listener: () => void): void {
    this.changeListeners.push(listener);
  }

  adapter(name: string): LoadedAdapter | null {
    return this.adapters.get(name) ?? null;
  }

  /**
   * vLLM `_check_model`: no model or the base model → base; a loaded adapter → that LoRA;
   * anything else → 404 when strict, the base model otherwise (answered under the asked name).
   */
  resolve(model: string | null): ModelResolution {
    if (model === null || model === '' || model === this.baseModel) return { kind: 'base', answerModel: model === null || model === '' ? this.baseModel : model };
    const adapter = this.adapters.get(model);
    if (adapter !== undefined) return { kind: 'lora', answerModel: adapter.name, adapter };
    return this.strict ? { kind: 'not_found', model } : { kind: 'base', answerModel: model };
  }

  /**
   * vLLM `load_lora_adapter`: both fields non-empty, no adapter of that name unless `inPlace`
   * (which keeps its id). Null on success. The simulator has no weights: any path loads.
   */
  load(name: string, path: string, inPlace = false): AdapterRefusal | null {
    if (name === '' || path === '') return { status: 400, type: 'InvalidUserInput', message: "Both 'lora_name' and 'lora_path' must be provided." };
    const known = this.adapters.get(name);
    if (known !== undefined && !inPlace) {
      return {
        status: 400,
        type: 'InvalidUserInput',
        message: `The lora adapter '${name}' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True.`,
      };
    }
    // Not in vLLM (which would list the name twice and always resolve it to the base model): an
    // adapter under the base model's name would make the served list ambiguous (cache-identity §1).
    if (name === this.baseModel) return { status: 400, type: 'InvalidUserInput', message: `The lora adapter '${name}' cannot take the name of the base model.` };
    this.adapters.set(name, { name, path, id: known?.id ?? ++this.lastLoraId });
    if (known === undefined) this.changed();
    return null;
  }

  /** vLLM `unload_lora_adapter`. Null on success. */
  unload(name: string): AdapterRefusal | null {
    if (name === '') return { status: 400, type: 'InvalidUserInput', message: "'lora_name' needs to be provided to unload a LoRA adapter." };
    if (!this.adapters.delete(name)) return { status: 404, type: 'NotFoundError', message: `The lora adapter '${name}' cannot be found.` };
    this.changed();
    return null;
  }

  private changed(): void {
    for (const listener of this.changeListeners) listener();
  }
}
