/**
 * routing.md "Ties": candidates with exactly equal cost rotate priority, so successive decisions
 * with the same tie pick the tied candidates in turn and equal instances share load.
 *
 * Issue 15 narrows that for CAR's P side: router replicas each rotate on their own, so a prompt
 * no engine holds (equal score on every idle engine) went to a different engine on every
 * replica, often one already holding another prompt's conversations. Among exactly equal costs a
 * caller may therefore pass a tie key every replica reads alike from the shared view (CAR: the
 * Device blocks resident, tie-break.ts); the smallest key wins and only candidates still equal on
 * it rotate.
 */

/** The rotation state of one decision side (P or D) of one policy. */
export interface RotationCursor {
  /** Name picked by the last rotating decision; null before the first. */
  last: string | null;
  /**
   * Of the last pick: how many candidates shared the smallest cost, and how many of those were
   * still equal on the tie key (the ones rotated among; 1 when the key decided or there was no tie).
   */
  tied: number;
  equal: number;
  /**
   * Where the first rotation starts among the equal candidates (modulo their count), so replicas
   * started together do not all begin on the first name; 0 = the first.
   */
  readonly startOffset: number;
}

export function newRotationCursor(startOffset = 0): RotationCursor {
  return { last: null, tied: 1, equal: 1, startOffset };
}

/**
 * A rotation start derived from a router id (FNV-1a, 32 bits): stable for one replica, spread
 * over replicas, no coordination needed.
 */
export function rotationOffset(routerId: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < routerId.length; i++) h = Math.imul(h ^ routerId.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

/** The smallest of scores[0..count) and how many candidates share it (exact float comparison). */
export function countMinimumTies(scores: ArrayLike<number>, count: number): number {
  if (count <= 0) throw new RangeError('countMinimumTies: no candidate');
  let min = scores[0]!;
  let ties = 1;
  for (let i = 1; i < count; i++) {
    const s = scores[i]!;
    if (s < min) {
      min = s;
      ties = 1;
    } else if (s === min) ties++;
  }
  return ties;
}

/**
 * Index of the smallest of scores[0..count) (exact float comparison). Among exact ties the one
 * with the smallest `tieKeys` entry wins when keys are given (read for tied candidates only);
 * among those still equal the first name after `cursor.last` in `names` order (sorted ascending
 * by the caller) wins, wrapping around (before any: the cursor's startOffset-th of them). Only
 * decisions that rotate move the cursor, so a decision settled by cost or key in between does not
 * skip anyone's turn. O(count), no allocation.
 */
export function pickMinimumWithRotation(
  scores: ArrayLike<number>,
  count: number,
  names: readonly string[],
  cursor: RotationCursor,
  tieKeys: ArrayLike<number> | null = null,
): number {
  if (count <= 0) throw new RangeError('pickMinimumWithRotation: no candidate');
  let min = scores[0]!;
  for (let i = 1; i < count; i++) if (scores[i]! < min) min = scores[i]!;
  let ties = 0;
  let minKey = Number.POSITIVE_INFINITY;
  let equal = 0;
  let only = -1;
  for (let i = 0; i < count; i++) {
    if (scores[i] !== min) continue;
    ties++;
    const key = tieKeys === null ? 0 : tieKeys[i]!;
    if (key < minKey) {
      minKey = key;
      equal = 1;
      only = i;
    } else if (key === minKey) equal++;
  }
  cursor.tied = ties;
  cursor.equal = equal;
  if (equal === 1) return only;
  const last = cursor.last;
  // Before the first rotation: the startOffset-th of the equal candidates; then the next name.
  let skip = last === null ? cursor.startOffset % equal : 0;
  let first = -1;
  let after = -1;
  for (let i = 0; i < count; i++) {
    if (scores[i] !== min || (tieKeys !== null && tieKeys[i] !== minKey)) continue;
    if (first < 0) first = i;
    if (last === null ? skip-- === 0 : names[i]! > last) {
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
