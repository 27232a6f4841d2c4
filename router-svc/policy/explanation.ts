/**
 * Builders of the route answer's per-candidate explanation (routing.md `POST /v1/route`): one
 * object per candidate per decision, the only allocation scoring does besides the result.
 */
import type { RouterInstance } from '../viewcache/view-cache.js';
import type { CandidateExplanation, RouteDecision } from './policy-types.js';

/** A candidate with no prefix credit (RR, SLO_AWARE, D side): only its queue terms. */
export function loadOnlyExplanation(inst: RouterInstance, role: 'prefill' | 'decode', queueCost: number, score: number): CandidateExplanation {
  return {
    instance_name: inst.name,
    incarnation_id: inst.incarnationId,
    role,
    hit_tokens: 0,
    device_hit_tokens: 0,
    host_only_hit_tokens: 0,
    kv_hit_ratio: 0,
    queue_cost: queueCost,
    score,
  };
}

/** The explanation of `decision`'s chosen prefill among its candidates; null when it is not listed. */
export function chosenPrefill(decision: RouteDecision): CandidateExplanation | null {
  for (const c of decision.candidates) if (c.role === 'prefill' && c.instance_name === decision.prefill.name) return c;
  return null;
}

export function chosen(inst: RouterInstance): RouteDecision['prefill'] {
  return { name: inst.name, incarnation_id: inst.incarnationId };
}

/**
 * Where routing.md is silent: a DEFAULT instance serves a request alone (it is the only type
 * that can), so a decode instance is chosen only for a PREFILL or MIX prefill.
 */
export function needsDecode(prefill: RouterInstance, decodeCount: number): boolean {
  return decodeCount > 0 && prefill.type !== 'DEFAULT';
}
