/**
 * RR (routing.md "RR and SLO_AWARE"): round robin over the P candidates, and over the D
 * candidates when there are any; candidates are schedulable by construction. No prefix credit.
 */
import type { ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { chosen, loadOnlyExplanation, needsDecode } from './explanation.js';
import { newRotationCursor, pickNextInTurn } from './pick-minimum.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy.js';

export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'RR' as const;
  private readonly candidates = new CandidateCache();
  private readonly prefillCursor = newRotationCursor();
  private readonly decodeCursor = newRotationCursor();

  decide(_req: RouteRequest, view: ViewCache, _nowMs: number): RouteDecision {
    const set = this.candidates.of(view);
    const explanations: CandidateExplanation[] = [];
    for (let i = 0; i < set.prefill.length; i++) explanations.push(loadOnlyExplanation(set.prefill[i]!, 'prefill', set.prefillQueueCost[i]!, 0));
    for (let i = 0; i < set.decode.length; i++) explanations.push(loadOnlyExplanation(set.decode[i]!, 'decode', set.decodeQueueCost[i]!, 0));
    const prefill = set.prefill[pickNextInTurn(set.prefill.length, set.prefillNames, this.prefillCursor)]!;
    const decode = needsDecode(prefill, set.decode.length)
      ? chosen(set.decode[pickNextInTurn(set.decode.length, set.decodeNames, this.decodeCursor)]!)
      : null;
    return { policy: 'RR', prefill: chosen(prefill), decode, candidates: explanations };
  }
}
