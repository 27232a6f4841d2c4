/**
 * RR (routing.md "RR and SLO_AWARE"): round robin over the P candidates, and over the D
 * candidates when there are any; candidates are schedulable by construction and serve the
 * request's model, and each model scope takes its own turns (candidates.ts). No prefix credit.
 */
import type { ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { chosen, loadOnlyExplanation, needsDecode } from './explanation.js';
import { pickNextInTurn } from './pick-minimum.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy-types.js';

export class RoundRobinPolicy implements RoutingPolicy {
  readonly name = 'RR' as const;
  private readonly candidates = new CandidateCache();

  decide(req: RouteRequest, view: ViewCache, _nowMs: number): RouteDecision {
    const set = this.candidates.of(view, req.identity);
    const explanations: CandidateExplanation[] = [];
    for (let i = 0; i < set.prefill.length; i++) explanations.push(loadOnlyExplanation(set.prefill[i]!, 'prefill', set.prefillQueueCost[i]!, 0));
    for (let i = 0; i < set.decode.length; i++) explanations.push(loadOnlyExplanation(set.decode[i]!, 'decode', set.decodeQueueCost[i]!, 0));
    const prefill = set.prefill[pickNextInTurn(set.prefill.length, set.prefillNames, set.prefillCursor)]!;
    const decode = needsDecode(prefill, set.decode.length)
      ? chosen(set.decode[pickNextInTurn(set.decode.length, set.decodeNames, set.decodeCursor)]!)
      : null;
    return { policy: 'RR', prefill: chosen(prefill), decode, candidates: explanations };
  }
}
