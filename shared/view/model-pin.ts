/**
 * A pinned served-model list (cache-identity §1): the engines file's `models` and xLLM's etcd
 * `models` are both names, first the base model, the rest LoRA adapters of it. One check for both
 * sources, so an operator's list means the same wherever it is written; each caller wraps the
 * problem in its own error (`engines[2].models[1]: ...`, an etcd key's `models[1]: ...`).
 */
import { pinnedModelList, type ServedModel } from './served-models.js';

/** What is wrong with a pinned list: `index` is the offending entry, null for the list itself. */
export interface ModelPinProblem {
  readonly index: number | null;
  readonly reason: string;
}

/**
 * Model names are request `model` strings and log fields: longer than any Hugging Face id or LoRA
 * name in use, short enough that a mistaken paste is refused rather than carried in every view.
 */
export const MAX_MODEL_NAME_LENGTH = 1024;

/** The list as entries, or its first problem. Pure. */
export function readModelPin(v: unknown): readonly ServedModel[] | ModelPinProblem {
  if (!Array.isArray(v)) return { index: null, reason: `expected an array of model names (the base model first, then its adapters), got ${shown(v)}` };
  if (v.length === 0) return { index: null, reason: 'expected at least one model name (the base model), got []' };
  const seen = new Set<string>();
  for (let i = 0; i < v.length; i++) {
    const name: unknown = v[i];
    const problem = modelNameProblem(name);
    if (problem !== null) return { index: i, reason: problem };
    if (seen.has(name as string)) return { index: i, reason: `${JSON.stringify(name)} is listed twice` };
    seen.add(name as string);
  }
  return pinnedModelList(v as string[]);
}

/** True when `readModelPin` answered a problem rather than a list. */
export function isModelPinProblem(r: readonly ServedModel[] | ModelPinProblem): r is ModelPinProblem {
  return !Array.isArray(r);
}

/** Why `name` is not a model name ('' and control characters break requests and log lines); null when it is one. */
export function modelNameProblem(name: unknown): string | null {
  if (typeof name !== 'string' || name === '') return `expected a non-empty string, got ${shown(name)}`;
  if (name.length > MAX_MODEL_NAME_LENGTH) return `expected at most ${MAX_MODEL_NAME_LENGTH} characters, got ${name.length}`;
  if (/[\u0000-\u001f\u007f]/.test(name)) return `expected no control characters, got ${shown(name)}`;
  return null;
}

function shown(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
