/**
 * routing.md "Ties": candidates with exactly equal cost rotate priority, so successive decisions
 * with the same tie pick the tied candidates in turn and equal instances share load.
 */

/** The rotation state of one decision side (P or D) of one policy. */
export interface RotationCursor {
  /** Name picked by the last tied decision; null before the first. */
  last: string | null;
}

export function newRotationCursor(): RotationCursor {
  return { last: null };
}

/**
 * Index of the smallest of scores[0..count) (exact float comparison). Among exact ties the first
 * name after `cursor.last` in `names` order (sorted ascending by the caller) wins, wrapping
 * around; only tied decisions move the cursor, so a non-tied decision in between does not skip
 * anyone's turn. O(count), no allocation.
 */
export function pickMinimumWithRotation(scores: ArrayLike<number>, count: number, names: readonly string[], cursor: RotationCursor): number {
  if (count <= 0) throw new RangeError('pickMinimumWithRotation: no candidate');
  let min = scores[0]!;
  let ties = 1;
  for (let i = 1; i < count; i++) {
    const s = scores[i]!;
    if (s < min) {
      min = s;
      ties = 1;
    } else if (s === min) ties++;
  }
  if (ties === 1) {
    for (let i = 0; i < count; i++) if (scores[i] === min) return i;
  }
  let first = -1;
  let after = -1;
  const last = cursor.last;
  for (let i = 0; i < count; i++) {
    if (scores[i] !== min) continue;
    if (first < 0) first = i;
    if (last !== null && names[i]! > last) {
      after = i;
      break;
    }
  }
  const picked = after >= 0 ? after : first;
  cursor.last = names[picked]!;
  return picked;
}

/**
 * Round robin by name (routing.md RR): the first candidate named after `cursor.last`, wrapping.
 * Keyed by name rather than position, so candidates joining or leaving do not reset the turn.
 */
export function pickNextInTurn(count: number, names: readonly string[], cursor: RotationCursor): number {
  if (count <= 0) throw new RangeError('pickNextInTurn: no candidate');
  let picked = 0;
  const last = cursor.last;
  if (last !== null) {
    for (let i = 0; i < count; i++) {
      if (names[i]! > last) {
        picked = i;
        break;
      }
    }
  }
  cursor.last = names[picked]!;
  return picked;
}
