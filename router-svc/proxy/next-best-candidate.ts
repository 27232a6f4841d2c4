/**
 * Where a request goes when the engine it was sent to vanished before answering (a pod that just
 * died, before its health probe fails): the decision's next-best prefill candidate. Pure: it reads
 * only the decision the policy already explained, so no second scoring and no view read.
 *
 * Next-best is the smallest score among the other P candidates (every policy explains its P
 * candidates with a score, smallest wins: CAR's score_P, SLO_AWARE's prediction, RR's 0). Among
 * exactly equal scores the first name after the failed one wins, wrapping, as the tie rotation and
 * RR's turn would have continued (routing.md "Ties", "RR").
 */
import type { RouteDecision } from '../policy/policy-types.js';

/** The name of the best P candidate other than `failed`; null when there is none. */
export function nextBestPrefill(decision: RouteDecision, failed: string): string | null {
  let best: string | null = null;
  let bestScore = Number.POSITIVE_INFINITY;
  let bestAfter = false;
  for (const c of decision.candidates) {
    if (c.role !== 'prefill' || c.instance_name === failed) continue;
    const name = c.instance_name;
    const after = name > failed;
    // NaN never wins; +∞ (no prediction) only when nothing else is left.
    const score = Number.isNaN(c.score) ? Number.POSITIVE_INFINITY : c.score;
    if (best === null || score < bestScore || (score === bestScore && precedes(name, after, best, bestAfter))) {
      best = name;
      bestScore = score;
      bestAfter = after;
    }
  }
  return best;
}

/** Tie order: names after the failed one first (ascending), then the ones before it (wrapped). */
function precedes(name: string, after: boolean, other: string, otherAfter: boolean): boolean {
  if (after !== otherAfter) return after;
  return name < other;
}
