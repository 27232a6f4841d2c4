/**
 * SLO_AWARE (routing.md "RR and SLO_AWARE"):
 *   P: predicted_ttft = ttft_profile(input_tokens) · (1 + waiting_requests_num)
 *   D: predicted_tpot = tpot_profile(current batch)
 * smallest prediction wins, candidates under the target first; candidates without profiling
 * data fall back to queue order (waiting requests).
 *
 * Where the spec is silent: the preference is three tiers — profiled and within the target (all
 * profiled ones when no target is set), then unprofiled by waiting requests, then profiled over
 * the target — and the smallest value of the first non-empty tier wins (exact ties rotate). The
 * current decode batch is taken as waiting_requests_num + 1 (the request joins it; the view
 * carries no running-batch count). Candidates serve the request's model (candidates.ts).
 */
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { chosen, loadOnlyExplanation, needsDecode } from './explanation.js';
import { predict, profilesOf, type LinearProfile } from './latency-profile.js';
import { pickMinimumWithRotation, type RotationCursor } from './pick-minimum.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy-types.js';

export interface SloAwarePolicyOptions {
  /** `--target_ttft` in ms; null = no target. */
  readonly targetTtftMs: number | null;
  /** `--target_tpot` in ms; null = no target. */
  readonly targetTpotMs: number | null;
}

const TIER_WITHIN = 0;
const TIER_UNPROFILED = 1;
const TIER_OVER = 2;
const TIER_NOTES = ['within target', 'no profiling data: queue order', 'over target'] as const;

export class SloAwarePolicy implements RoutingPolicy {
  readonly name = 'SLO_AWARE' as const;
  private readonly candidates = new CandidateCache();
  private values = new Float64Array(16);
  private tiers = new Uint8Array(16);

  constructor(private readonly opts: SloAwarePolicyOptions) {}

  decide(req: RouteRequest, view: ViewCache, _nowMs: number): RouteDecision {
    const set = this.candidates.of(view, req.identity);
    const inputTokens = req.tokenIds !== null ? req.tokenIds.length : req.promptTokens;
    const explanations: CandidateExplanation[] = [];
    const pi = this.rank(set.prefill, set.prefillNames, set.prefillQueueCost, 'prefill', this.opts.targetTtftMs, set.prefillCursor, explanations, (inst, profile) =>
      predict(profile, inputTokens) * (1 + inst.load!.waitingRequestsNum),
    );
    const prefill = set.prefill[pi]!;
    let decode: RouteDecision['decode'] = null;
    if (set.decode.length > 0) {
      const di = this.rank(set.decode, set.decodeNames, set.decodeQueueCost, 'decode', this.opts.targetTpotMs, set.decodeCursor, explanations, (inst, profile) =>
        predict(profile, inst.load!.waitingRequestsNum + 1),
      );
      if (needsDecode(prefill, set.decode.length)) decode = chosen(set.decode[di]!);
    }
    return { policy: 'SLO_AWARE', prefill: chosen(prefill), decode, candidates: explanations };
  }

  /** Scores one side, appends its explanations and returns the winner's index. */
  private rank(
    side: readonly RouterInstance[],
    names: readonly string[],
    queueCost: Float64Array,
    role: 'prefill' | 'decode',
    targetMs: number | null,
    cursor: RotationCursor,
    explanations: CandidateExplanation[],
    predictMs: (inst: RouterInstance, profile: LinearProfile) => number,
  ): number {
    const n = side.length;
    if (this.values.length < n) {
      this.values = new Float64Array(n * 2);
      this.tiers = new Uint8Array(n * 2);
    }
    const values = this.values;
    const tiers = this.tiers;
    let best = TIER_OVER;
    for (let i = 0; i < n; i++) {
      const inst = side[i]!;
      const profiles = profilesOf(inst);
      const profile = role === 'prefill' ? profiles.ttft : profiles.tpot;
      let predicted: number | undefined;
      if (profile === null) {
        tiers[i] = TIER_UNPROFILED;
        values[i] = inst.load!.waitingRequestsNum;
      } else {
        predicted = predictMs(inst, profile);
        tiers[i] = targetMs === null || predicted <= targetMs ? TIER_WITHIN : TIER_OVER;
        values[i] = predicted;
      }
      if (tiers[i]! < best) best = tiers[i]!;
      const e = loadOnlyExplanation(inst, role, queueCost[i]!, values[i]!);
      e.note = TIER_NOTES[tiers[i]!]!;
      if (predicted !== undefined) e.predicted_ms = predicted;
      explanations.push(e);
    }
    // Only the best tier competes: the others are pushed out of reach of the minimum.
    for (let i = 0; i < n; i++) if (tiers[i] !== best) values[i] = Number.POSITIVE_INFINITY;
    return pickMinimumWithRotation(values, n, names, cursor);
  }
}
