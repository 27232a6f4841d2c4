/**
 * Served models (cache-identity §1): what an instance serves, as the directory learns it (an
 * engines-file `models` pin, the engine's `GET /v1/models`, xLLM's etcd `models`) and the view
 * carries it (ViewInstance.models). One base model and zero or more LoRA adapters of it, or an
 * unknown list (null): an instance that may serve any model.
 */

/** One entry of an instance's list: a base model (parent null) or a LoRA adapter of `parent`. */
export interface ServedModel {
  readonly name: string;
  readonly parent: string | null;
}

/** An instance's list; null = unknown (candidates for every model, cache-identity §2). */
export type ServedModelList = readonly ServedModel[] | null;

/** Whether `list` names `model` (as a base model or an adapter); an unknown list serves anything. */
export function servesModel(list: ServedModelList, model: string): boolean {
  if (list === null) return true;
  for (let i = 0; i < list.length; i++) if (list[i]!.name === model) return true;
  return false;
}

/** `model`'s entry in `list`, or null when the list is unknown or does not name it. */
export function modelEntry(list: ServedModelList, model: string): ServedModel | null {
  if (list === null) return null;
  for (let i = 0; i < list.length; i++) if (list[i]!.name === model) return list[i]!;
  return null;
}

/** Same entries in the same order (a scrape that changed nothing publishes nothing). */
export function sameModelLists(a: ServedModelList, b: ServedModelList): boolean {
  if (a === b) return true;
  if (a === null || b === null || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i]!.name !== b[i]!.name || a[i]!.parent !== b[i]!.parent) return false;
  return true;
}

/**
 * A pinned list (engines-file `models`, etcd `models`: first = base, the rest adapters of it,
 * cache-identity §1) as entries. The caller validated the names (non-empty, distinct strings).
 */
export function pinnedModelList(names: readonly string[]): readonly ServedModel[] {
  const base = names[0];
  return Object.freeze(names.map((name, i) => Object.freeze({ name, parent: i === 0 || base === undefined ? null : base })));
}
