/**
 * The spec-list merge of a reportEvent delta (kvcm-meta §7.5 ADD/DELETE), pure: ADD replaces a
 * same-name spec where it stands or appends it, DELETE removes exactly the named specs, other
 * specs are kept in stored order. The SQLite store runs it inside its transaction; the Redis
 * store's apply script implements the same rules in Lua (redis-apply-script.ts), so both stores
 * merge concurrent deltas of one key the same way.
 */
import type { StoredSpec } from './meta-store.js';

export interface SpecMerge {
  readonly specs: StoredSpec[];
  /** The list differs from `current`. */
  readonly changed: boolean;
  /** `remove` names `current` did not hold. */
  readonly missing: number;
}

/** Names looked up by a linear scan up to this many; a Map beyond. */
const LINEAR_NAMES = 8;

/** `put` and `remove` names are disjoint (the caller folded its operations last-wins). */
export function mergeSpecList(current: readonly StoredSpec[], put: readonly StoredSpec[], remove: readonly string[]): SpecMerge {
  if (current.length === 0) return { specs: put.slice(), changed: put.length > 0, missing: remove.length };
  const putAt = indexOfName(put.map((s) => s.name));
  const removeAt = indexOfName(remove);
  const usedPut = new Array<boolean>(put.length).fill(false);
  let removed = 0;
  let changed = false;
  const specs: StoredSpec[] = [];
  for (const spec of current) {
    const r = removeAt(spec.name);
    if (r >= 0) {
      // Names are unique in a stored list (§7.4), so each remove name matches at most once.
      removed++;
      changed = true;
      continue;
    }
    const j = putAt(spec.name);
    if (j < 0) {
      specs.push(spec);
      continue;
    }
    usedPut[j] = true;
    const next = put[j] as StoredSpec;
    if (next.uri !== spec.uri) changed = true;
    specs.push(next);
  }
  for (let j = 0; j < put.length; j++) {
    if (usedPut[j]) continue;
    specs.push(put[j] as StoredSpec);
    changed = true;
  }
  return { specs, changed, missing: remove.length - removed };
}

function indexOfName(names: readonly string[]): (name: string) => number {
  if (names.length > LINEAR_NAMES) {
    const m = new Map<string, number>();
    for (let i = 0; i < names.length; i++) m.set(names[i] as string, i);
    return (name) => m.get(name) ?? -1;
  }
  return (name) => names.indexOf(name);
}
