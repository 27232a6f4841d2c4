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
  /** The last pick among several still equal on the key went by prefix affinity, not the rotation. */
  byAffinity: boolean;
  /**
   * Where the first rotation starts among the equal candidates (modulo their count), so replicas
   * started together do not all begin on the first name; 0 = the first.
   */
  readonly startOffset: number;
}

export function newRotationCursor(startOffset = 0): RotationCursor {
  return { last: null, tied: 1, equal: 1, byAffinity: false, startOffset };
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
  affinity: PrefixAffinity | null = null,
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
  cursor.byAffinity = false;
  if (equal === 1) return only;
  if (affinity !== null) {
    cursor.byAffinity = true;
    return highestRendezvous(scores, count, min, tieKeys, minKey, affinity);
  }
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
 * Prefix affinity among candidates still equal on cost and key (CAR, tie-break.ts): the prompt's
 * leading fingerprint and each candidate's name hash, rendezvous-hashed. Replicas that cannot
 * see each other's latest decisions yet (the ~ms a decision takes through the directory) still
 * send prompts with the same beginning to the same instance, where each rotating on its own
 * split them; prompts with different beginnings spread as hashes do.
 */
export interface PrefixAffinity {
  /** The prompt's fingerprint at its affinity depth (prompt-fingerprint.ts AFFINITY_GRANULES). */
  readonly key: number;
  /** rotationOffset of each candidate's name, in candidate order. */
  readonly nameHashes: ArrayLike<number>;
}

/** murmur3's 32-bit finalizer: every input bit moves every output bit. */
function mix32(h: number): number {
  h = Math.imul(h ^ (h >>> 16), 0x85ebca6b);
  h = Math.imul(h ^ (h >>> 13), 0xc2b2ae35);
  return (h ^ (h >>> 16)) >>> 0;
}

function highestRendezvous(
  scores: ArrayLike<number>,
  count: number,
  min: number,
  tieKeys: ArrayLike<number> | null,
  minKey: number,
  affinity: PrefixAffinity,
): number {
  let best = -1;
  let bestWeight = -1;
  for (let i = 0; i < count; i++) {
    if (scores[i] !== min || (tieKeys !== null && tieKeys[i] !== minKey)) continue;
    const w = mix32(affinity.key ^ affinity.nameHashes[i]!);
    if (w > bestWeight) {
      bestWeight = w;
      best = i;
    }
  }
  return best;
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
