/**
 * The D side of CAR and TTFT (routing.md "CAR"): load only, no prefix credit, smallest wins.
 *
 *   score_D = gpu_cache_usage_perc + waiting / max(waiting over D)   (second term 0 when max is 0)
 *
 * Exact ties rotate (pickMinimumWithRotation).
 */
import type { RouterInstance } from '../viewcache/view-cache.js';
import type { CandidateSet } from './candidates.js';
import { chosen, loadOnlyExplanation, needsDecode } from './explanation.js';
import { pickMinimumWithRotation, type RotationCursor } from './pick-minimum.js';
import type { CandidateExplanation, RouteDecision } from './policy-types.js';

/**
 * Scores every D candidate into `scores` (scratch, at least set.decode.length long), appends their
 * explanations, and returns the decode instance `prefill` needs (null: none, or a DEFAULT alone).
 */
export function pickDecode(
  set: CandidateSet,
  prefill: RouterInstance,
  scores: Float64Array,
  cursor: RotationCursor,
  explanations: CandidateExplanation[],
): RouteDecision['decode'] {
  const d = set.decode;
  if (d.length === 0) return null;
  for (let i = 0; i < d.length; i++) {
    const inst = d[i]!;
    const queueCost = set.decodeQueueCost[i]!;
    scores[i] = inst.load!.gpuCacheUsagePerc + queueCost;
    explanations.push(loadOnlyExplanation(inst, 'decode', queueCost, scores[i]!));
  }
  return needsDecode(prefill, d.length) ? chosen(d[pickMinimumWithRotation(scores, d.length, set.decodeNames, cursor)]!) : null;
}
