/**
 * TTFT (`--load_balance_policy=TTFT`, issue 27): each request goes where its first token is
 * predicted soonest. Per P candidate (ttft-cost.ts has the formula and its terms):
 *
 *   predicted_ms = (queued_tokens + own_tokens) / θ
 *
 * - own_tokens: input minus the candidate's prefix credit, a Host-only hit at c of a recompute
 *   (`--ttft_host_token_cost`); the credit is the DP-rank minimum the view gives CAR
 *   (instance-hit.ts, w = 1 − c), or the pending prefix of a request in flight there
 *   (`--car_pending_prefix`) when larger, floored to complete blocks on single-rank instances.
 * - queued_tokens: the engine's reported waiting requests, each worth the mean prefill of what
 *   this router recently sent there (routed-prefill-mean.ts), less what the engine has worked
 *   through since the report; plus the prefill tokens of the decisions in flight there, this
 *   router's and the other replicas' (routing.md "In-flight load", with `--car_inflight_load`).
 * - θ: the engine's prefill throughput, learned from the first-token times the proxy observes
 *   (prefill-throughput.ts; `--ttft_prefill_tokens_per_s` until then).
 *
 * Smallest prediction wins; exact ties follow CAR's rule (fewest Device blocks, then rotation,
 * tie-break.ts). D side: load only, as CAR (decode-side.ts). The answer explains every term per
 * candidate (TtftCandidateExplanation). Learning is fed from outside: the route decider reports
 * counted decisions and first tokens (DecisionObserver), so a dry run teaches nothing.
 *
 * Cost per decision: one DP-minimum walk over the residency index (as CAR's), then O(candidates ×
 * replicas) reads of the in-flight shares; scratch arrays are reused.
 */
import { INFLIGHT_TTL_MS, type InflightLoad } from '../inflight/inflight-load.js';
import { ROUTER_FLAGS, type RouterFlags } from '../../shared/config/router-flags.js';
import { GRANULE_TOKENS } from '../../shared/keys/prompt-fingerprint.js';
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { pickDecode } from './decode-side.js';
import { chosen } from './explanation.js';
import { instanceHit, newInstanceHit, noInstanceHit } from './instance-hit.js';
import { countMinimumTies, newRotationCursor, pickMinimumWithRotation, rotationOffset, type RotationCursor } from './pick-minimum.js';
import { PrefillThroughput, type PrefillThroughputOptions, type ThroughputEstimate } from './prefill-throughput.js';
import { RoutedPrefillMean } from './routed-prefill-mean.js';
import { DeviceUsageKeys, tieBreakExplanation } from './tie-break.js';
import { newTtftPrediction, ownPrefillTokens, predictTtft } from './ttft-cost.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy.js';

export interface TtftPolicyOptions {
  /** `--ttft_host_token_cost` in [0,1]. */
  readonly hostTokenCost: number;
  /** `--ttft_prefill_tokens_per_s`, `--ttft_prior_samples`, `--ttft_throughput_window`. */
  readonly throughput: PrefillThroughputOptions;
  /** In-flight load (`--car_inflight_load`); null or absent = reported waiting only. */
  readonly inflight?: InflightLoad | null;
  /** Where this replica's tie rotations start (rotationOffset); absent = the first name. */
  readonly routerId?: string;
}

/** A P candidate of a TTFT decision: CAR's fields plus every term of the prediction. */
export interface TtftCandidateExplanation extends CandidateExplanation {
  /** Prefill tokens ahead of the request (reported backlog left + in flight). */
  queued_tokens: number;
  /** The request's own prefill on this candidate, recompute-equivalent tokens. */
  own_prefill_tokens: number;
  queue_ms: number;
  own_prefill_ms: number;
  predicted_ms: number;
  /** θ as tokens per second, and how many first-token observations it rests on (0: the prior). */
  prefill_tokens_per_s: number;
  throughput_samples: number;
  /** What one reported waiting request counts for, and how old the report is. */
  tokens_per_waiting: number;
  since_report_ms: number;
  waiting_reported: number;
  waiting_inflight_own: number;
  waiting_inflight_other: number;
  inflight_tokens_own: number;
  inflight_tokens_other: number;
}

/** What the route decider tells a policy that learns (TTFT). */
export interface DecisionObserver {
  /** `decision` was counted (not a dry run): its prefill goes to its instance. */
  counted(decision: RouteDecision): void;
  /** The first token of a counted decision came `ttftMs` after the decision. */
  firstToken(decision: RouteDecision, ttftMs: number): void;
}

export class TtftPolicy implements RoutingPolicy, DecisionObserver {
  readonly name = 'TTFT' as const;
  private readonly hostCost: number;
  private readonly inflight: InflightLoad | null;
  private readonly throughput: PrefillThroughput;
  private readonly routedMean = new RoutedPrefillMean();
  private readonly candidates = new CandidateCache();
  private readonly prefillCursor: RotationCursor;
  private readonly decodeCursor: RotationCursor;
  private readonly deviceUsage = new DeviceUsageKeys();
  private readonly scratchHit = newInstanceHit();
  private readonly prediction = newTtftPrediction();
  private scores = new Float64Array(16);
  /** Each P candidate's own prefill tokens (the first tie key). */
  private ownWork = new Float64Array(16);
  private tieKeys = new Float64Array(16);
  /** The P side the estimators were last pruned to (they follow the fleet). */
  private prunedFor: readonly RouterInstance[] | null = null;

  constructor(opts: TtftPolicyOptions) {
    if (!(opts.hostTokenCost >= 0 && opts.hostTokenCost <= 1)) throw new RangeError(`hostTokenCost must be in [0,1], got ${opts.hostTokenCost}`);
    this.hostCost = opts.hostTokenCost;
    this.throughput = new PrefillThroughput(opts.throughput);
    this.inflight = opts.inflight ?? null;
    const offset = opts.routerId === undefined ? 0 : rotationOffset(opts.routerId);
    this.prefillCursor = newRotationCursor(offset);
    this.decodeCursor = newRotationCursor(offset);
  }

  decide(req: RouteRequest, view: ViewCache, nowMs: number): RouteDecision {
    const set = this.candidates.of(view);
    const p = set.prefill;
    if (p !== this.prunedFor) this.prune(p, view);
    const tokenIds = req.tokenIds;
    const inputTokens = tokenIds !== null ? tokenIds.length : req.promptTokens;
    // The minimum credit over DP ranks with w = 1 − c is the largest prefill over them.
    const hits = tokenIds !== null && tokenIds.length > 0 ? view.matchStreams(tokenIds, nowMs, 1 - this.hostCost) : null;
    const n = Math.max(p.length, set.decode.length);
    if (this.scores.length < n) {
      this.scores = new Float64Array(n * 2);
      this.ownWork = new Float64Array(n * 2);
    }
    const scores = this.scores;
    const inflight = this.inflight;
    const stale = view.isStale(nowMs);
    const mono = inflight === null ? 0 : inflight.now();
    const fingerprints = inflight !== null && hits !== null ? (req.promptFingerprints ?? null) : null;
    const explanations: CandidateExplanation[] = [];
    let maxQueued = 0;
    let cursor = 0;
    for (let i = 0; i < p.length; i++) {
      const inst = p[i]!;
      const h = this.scratchHit;
      if (hits === null) noInstanceHit(h);
      else cursor = instanceHit(inst, hits, cursor, 1 - this.hostCost, h);
      // own() first: it ends the own entries a newer report, the TTL or an answer ended.
      const ownCount = inflight === null ? 0 : inflight.own(inst, mono);
      const otherCount = inflight === null ? 0 : inflight.others(inst, stale);
      let device = h.device;
      let hostOnly = h.hostOnly;
      let pending = 0;
      // Pending prefix credit, as CAR gives it: where the view's credit is trusted, on one rank.
      if (fingerprints !== null && h.blockSize > 0 && inst.dpSize === 1) {
        const granules = inflight!.pendingGranules(inst, fingerprints);
        if (granules > 0) pending = Math.floor(Math.min(granules * GRANULE_TOKENS, inputTokens) / h.blockSize) * h.blockSize;
        // The request in flight computes that prefix first: it is on Device by the time this one runs.
        if (ownPrefillTokens(inputTokens, pending, 0, this.hostCost) < ownPrefillTokens(inputTokens, device, hostOnly, this.hostCost)) {
          device = pending;
          hostOnly = 0;
        }
      }
      const fallback = ownPrefillTokens(inputTokens, device, hostOnly, this.hostCost);
      const perWaiting = this.routedMean.tokensPerRequest(inst.name, fallback);
      const ownTokens = inflight === null ? 0 : inflight.ownPrefillTokens(inst);
      const otherTokens = inflight === null ? 0 : inflight.otherPrefillTokens(inst, stale, perWaiting);
      const sinceReportMs = Math.min(INFLIGHT_TTL_MS, Math.max(0, nowMs - inst.load!.reportedAtMs));
      const tokensPerMs = this.throughput.tokensPerMs(inst.name);
      const waiting = inst.load!.waitingRequestsNum;
      const t = predictTtft(
        {
          inputTokens,
          deviceHitTokens: device,
          hostOnlyHitTokens: hostOnly,
          hostTokenCost: this.hostCost,
          waitingReported: waiting,
          tokensPerWaiting: perWaiting,
          sinceReportMs,
          inflightTokens: ownTokens + otherTokens,
          tokensPerMs,
        },
        this.prediction,
      );
      scores[i] = t.predictedMs;
      this.ownWork[i] = t.ownTokens;
      if (t.queuedTokens > maxQueued) maxQueued = t.queuedTokens;
      const credited = inputTokens - t.ownTokens;
      const e: TtftCandidateExplanation = {
        instance_name: inst.name,
        incarnation_id: inst.incarnationId,
        role: 'prefill',
        hit_tokens: device + hostOnly,
        device_hit_tokens: device,
        host_only_hit_tokens: hostOnly,
        kv_hit_ratio: inputTokens > 0 ? Math.min(1, Math.max(0, credited / inputTokens)) : 0,
        // Filled below: queued tokens over the largest among the P candidates.
        queue_cost: t.queuedTokens,
        score: t.predictedMs,
        queued_tokens: t.queuedTokens,
        own_prefill_tokens: t.ownTokens,
        queue_ms: t.queueMs,
        own_prefill_ms: t.ownMs,
        predicted_ms: t.predictedMs,
        prefill_tokens_per_s: tokensPerMs * 1000,
        throughput_samples: this.throughput.samples(inst.name),
        tokens_per_waiting: perWaiting,
        since_report_ms: sinceReportMs,
        waiting_reported: waiting,
        waiting_inflight_own: ownCount,
        waiting_inflight_other: otherCount,
        inflight_tokens_own: ownTokens,
        inflight_tokens_other: otherTokens,
      };
      if (fingerprints !== null) e.pending_hit_tokens = pending;
      if (h.note !== null) e.note = h.note;
      explanations.push(e);
    }
    for (const e of explanations) e.queue_cost = maxQueued === 0 ? 0 : e.queue_cost / maxQueued;
    // Ties: the least prefill work first (the same wait either way, less for the cluster to
    // compute: a repeat queued behind its prefix beats an idle engine recomputing it), then CAR's
    // rule (tie-break.ts), whose usage key is read only when the smallest score is still shared.
    if (countMinimumTies(scores, p.length) > 1) keepLeastWork(scores, this.ownWork, p.length);
    let tieKeys: Float64Array | null = null;
    if (countMinimumTies(scores, p.length) > 1 && !stale) {
      if (this.tieKeys.length < p.length) this.tieKeys = new Float64Array(p.length * 2);
      this.deviceUsage.fill(view, p, this.tieKeys);
      tieKeys = this.tieKeys;
    }
    const pi = pickMinimumWithRotation(scores, p.length, set.prefillNames, this.prefillCursor, tieKeys);
    const tie = tieBreakExplanation(p, scores, tieKeys, scores[pi]!, this.prefillCursor);
    const prefill = p[pi]!;
    const decode = pickDecode(set, prefill, scores, this.decodeCursor, explanations);
    const decision: RouteDecision = { policy: 'TTFT', prefill: chosen(prefill), decode, candidates: explanations };
    if (tie !== null) decision.tie_break = tie;
    return decision;
  }

  counted(decision: RouteDecision): void {
    const c = chosenTerms(decision);
    if (c !== null) this.routedMean.record(decision.prefill.name, c.own_prefill_tokens);
  }

  firstToken(decision: RouteDecision, ttftMs: number): void {
    const c = chosenTerms(decision);
    if (c !== null) this.throughput.observe(decision.prefill.name, c.queued_tokens + c.own_prefill_tokens, ttftMs);
  }

  /** θ per engine observed so far (metrics, status). */
  throughputEstimates(): ThroughputEstimate[] {
    return this.throughput.estimates();
  }

  /** Forgets engines gone from the view (not those only out of the candidates for a while). */
  private prune(p: readonly RouterInstance[], view: ViewCache): void {
    this.prunedFor = p;
    const names = new Set(view.instances().map((i) => i.name));
    this.throughput.retainOnly(names);
    this.routedMean.retainOnly(names);
  }
}

/**
 * Among the candidates sharing the smallest score, keeps those with the least own work: the others
 * are pushed out of reach of the minimum (their explanations keep their true score).
 */
function keepLeastWork(scores: Float64Array, work: Float64Array, count: number): void {
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) if (scores[i]! < min) min = scores[i]!;
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) if (scores[i] === min && work[i]! < least) least = work[i]!;
  for (let i = 0; i < count; i++) if (scores[i] === min && work[i]! > least) scores[i] = Number.POSITIVE_INFINITY;
}

/** The chosen prefill's TTFT terms in `decision`; null when it is not a TTFT decision. */
export function chosenTerms(decision: RouteDecision): TtftCandidateExplanation | null {
  if (decision.policy !== 'TTFT') return null;
  for (const c of decision.candidates) if (c.role === 'prefill' && c.instance_name === decision.prefill.name) return c as TtftCandidateExplanation;
  return null;
}

/** The TTFT flags, each defaulted from the router's flag table when absent (tests pass a few). */
export function ttftPolicyOptions(
  flags: Partial<Pick<RouterFlags, 'ttftPrefillTokensPerS' | 'ttftPriorSamples' | 'ttftThroughputWindow' | 'ttftHostTokenCost'>>,
  inflight: InflightLoad | null,
  routerId: string | undefined,
): TtftPolicyOptions {
  const d = ROUTER_FLAGS;
  return {
    hostTokenCost: flags.ttftHostTokenCost ?? d.ttft_host_token_cost.default,
    throughput: {
      priorTokensPerS: flags.ttftPrefillTokensPerS ?? d.ttft_prefill_tokens_per_s.default,
      priorSamples: flags.ttftPriorSamples ?? d.ttft_prior_samples.default,
      window: flags.ttftThroughputWindow ?? d.ttft_throughput_window.default,
    },
    inflight,
    ...(routerId === undefined ? {} : { routerId }),
  };
}
