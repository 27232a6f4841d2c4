/**
 * TTFT (`--load_balance_policy=TTFT`, issue 27): each request goes where its first token is
 * predicted soonest. Per P candidate (ttft-cost.ts has the formula and its terms):
 *
 *   predicted_ms = (queued_tokens + own_tokens) / θ
 *
 * - own_tokens: input minus the candidate's prefix credit, a Host-only hit at c of a recompute
 *   (`--ttft_host_token_cost`); on an engine whose evictions show its pool full, a Device hit only
 *   as far as it fits beside what the requests queued ahead hold (their prompts' union beyond this
 *   one's prefix, from the ledgers' fingerprints: survivingHitTokens). The credit is the DP-rank
 *   minimum the view gives CAR (instance-hit.ts, w = 1 − c), or the pending prefix of a request queued ahead there
 *   (`--car_pending_prefix`: an in-flight decision of any replica, or one of this router's
 *   requests before its first token) when larger, floored to complete blocks on single-rank
 *   instances.
 * - queued_tokens: the prefill ledgers of every replica — their proxied requests to the engine
 *   still before their first token, with their prefill tokens (InflightLoad.startPrefill; the
 *   other replicas' through the directory) — and the prefill tokens of decisions in flight there
 *   in no ledger (`/v1/route`'s), all with `--car_inflight_load`, less what the engine has already
 *   prefilled of the oldest of them (it has been busy with it since it was sent or since the
 *   engine's last first token: the ledger's times, queue-progress.ts); plus what the engine's last
 *   load report counts beyond the ledgers as they stood when it was made (requests no router
 *   accounts for), each worth the mean prefill this router recently sent there
 *   (routed-prefill-mean.ts), less what the engine has worked through since the report.
 * - θ: the engine's prefill throughput, learned from the first-token times the proxy observes
 *   (prefill-throughput.ts; `--ttft_prefill_tokens_per_s` until then).
 *
 * Candidates are CAR's: the instances serving the request's model, its prompt matched under its
 * cache identity (cache-identity §2, §3; candidates.ts, one set and one cursor pair per scope).
 *
 * Smallest prediction wins, but near it the least prefill work does, and predictions within
 * `--ttft_tie_tolerance` of each other tie (work-slack.ts); ties follow CAR's rule (fewest Device
 * blocks, then rotation, tie-break.ts). D side: load only, as CAR (decode-side.ts). The answer
 * explains every term per candidate (TtftCandidateExplanation). Learning is fed from outside: the
 * route decider reports counted decisions and first tokens (DecisionObserver), so a dry run
 * teaches nothing.
 *
 * Cost per decision: one DP-minimum walk over the residency index (as CAR's), then O(candidates ×
 * replicas) reads of the in-flight shares; scratch arrays are reused.
 */
import { INFLIGHT_TTL_MS, type InflightLoad } from '../inflight/inflight-load.js';
import { ROUTER_FLAGS, type RouterFlags } from '../../shared/config/router-flags.js';
import { GRANULE_TOKENS, type Footprint } from '../../shared/keys/prompt-fingerprint.js';
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { pickDecode } from './decode-side.js';
import { chosen, chosenPrefill } from './explanation.js';
import { instanceHit, newInstanceHit, noInstanceHit } from './instance-hit.js';
import { rotationOffset } from './pick-minimum.js';
import { PrefillThroughput, type PrefillThroughputOptions, type ThroughputEstimate } from './prefill-throughput.js';
import { RoutedPrefillMean } from './routed-prefill-mean.js';
import { PrefillPick } from './tie-break.js';
import { keepLeastWork, slackAgainstSoonest, tieWithin } from './work-slack.js';
import { QueueProgress } from './queue-progress.js';
import { NO_SHARES } from '../viewcache/view-update.js';
import { newTtftPrediction, ownPrefillTokens, predictTtft } from './ttft-cost.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy-types.js';

/**
 * Absent near-tie options are off (0: the pure soonest rule), so the cost's unit tests read one
 * rule at a time; the router's defaults (slack 1, growth 2, tolerance 0.05) come from its
 * flag table through ttftPolicyOptions, the one place that applies them.
 */
export interface TtftPolicyOptions {
  /** `--ttft_host_token_cost` in [0,1]. */
  readonly hostTokenCost: number;
  /** `--ttft_work_slack` in [0,1]: predictions within this fraction of the soonest count as equal, the least work wins. */
  readonly workSlack?: number;
  /** `--ttft_slack_growth` ≥ 0: how much the slack widens for a cached prefix, by the share of the soonest prediction it spares (work-slack.ts); 0 = plain slack. */
  readonly slackGrowth?: number;
  /** `--ttft_tie_tolerance` in [0,1): of what the slack leaves, predictions within this fraction of the soonest tie (work-slack.ts tieWithin); 0 = none. */
  readonly tieTolerance?: number;
  /** `--ttft_prefill_tokens_per_s`, `--ttft_prior_samples`, `--ttft_throughput_window`. */
  readonly throughput: PrefillThroughputOptions;
  /** In-flight load (`--car_inflight_load`); null or absent = reported waiting only. */
  readonly inflight?: InflightLoad | null;
  /** Where this replica's tie rotations start (rotationOffset); absent = the first name. */
  readonly routerId?: string;
}

/** A P candidate of a TTFT decision: CAR's fields plus every term of the prediction. */
export interface TtftCandidateExplanation extends CandidateExplanation {
  /** Prefill tokens ahead of the request (reported backlog left + in flight − worked off). */
  queued_tokens: number;
  /** What the engine has prefilled already of the oldest request ahead (subtracted from the queue). */
  worked_off_tokens: number;
  /** The request's own prefill on this candidate, recompute-equivalent tokens. */
  own_prefill_tokens: number;
  /** The engine's Device pool in tokens as its evictions show it (0: it never evicted, so its hits are kept). */
  device_capacity_tokens: number;
  /** What the prompts queued ahead hold beyond this prompt's prefix (0 where the pool was never seen full, or without fingerprints). */
  ahead_tokens: number;
  /** Of the Device hit, what the requests ahead evict before this one runs (counted in own_prefill_tokens). */
  evicted_hit_tokens: number;
  queue_ms: number;
  own_prefill_ms: number;
  predicted_ms: number;
  /** θ as tokens per second, and how many first-token observations it rests on (0: the prior). */
  prefill_tokens_per_s: number;
  throughput_samples: number;
  /** The engine's last load report, what it counts beyond the ledgers, what one of those is worth, and its age. */
  waiting_reported: number;
  waiting_unknown: number;
  tokens_per_waiting: number;
  since_report_ms: number;
  /** The prefill ledgers: requests before their first token, and their tokens (this router's, the others'). */
  ledger_requests_own: number;
  ledger_requests_other: number;
  ledger_tokens_own: number;
  ledger_tokens_other: number;
  /** Decisions no load report reflects yet (routing.md "In-flight load"), and the tokens of those in no ledger. */
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
  private readonly workSlack: number;
  private readonly slackGrowth: number;
  private readonly tieTolerance: number;
  private readonly inflight: InflightLoad | null;
  private readonly throughput: PrefillThroughput;
  private readonly routedMean = new RoutedPrefillMean();
  private readonly candidates: CandidateCache;
  private readonly prefillPick = new PrefillPick();
  private readonly scratchHit = newInstanceHit();
  private readonly prediction = newTtftPrediction();
  private readonly footprint: Footprint = { all: 0, included: 0 };
  private scores = new Float64Array(16);
  /** Each P candidate's own prefill tokens (the first tie key). */
  private ownWork = new Float64Array(16);
  /** Each P candidate's θ in tokens per ms (what a spared recompute is worth in time). */
  private rate = new Float64Array(16);
  /** Per engine, how far it has got with its queue since its last load report (queue-progress.ts). */
  private readonly progress = new QueueProgress();
  /**
   * The view and models revision the estimators were last pruned to (they follow the fleet). The
   * models revision moves when an instance joins or leaves, not on load reports, which bump the
   * instances revision several times a second in a large fleet.
   */
  private prunedView: ViewCache | null = null;
  private prunedRevision = -1;

  constructor(opts: TtftPolicyOptions) {
    if (!(opts.hostTokenCost >= 0 && opts.hostTokenCost <= 1)) throw new RangeError(`hostTokenCost must be in [0,1], got ${opts.hostTokenCost}`);
    this.hostCost = opts.hostTokenCost;
    const slack = opts.workSlack ?? 0;
    if (!(slack >= 0 && slack <= 1)) throw new RangeError(`workSlack must be in [0,1], got ${slack}`);
    this.workSlack = slack;
    const growth = opts.slackGrowth ?? 0;
    if (!(growth >= 0 && Number.isFinite(growth))) throw new RangeError(`slackGrowth must be a finite number >= 0, got ${growth}`);
    this.slackGrowth = growth;
    const tolerance = opts.tieTolerance ?? 0;
    if (!(tolerance >= 0 && tolerance < 1)) throw new RangeError(`tieTolerance must be in [0,1), got ${tolerance}`);
    this.tieTolerance = tolerance;
    this.throughput = new PrefillThroughput(opts.throughput);
    this.inflight = opts.inflight ?? null;
    this.candidates = new CandidateCache(opts.routerId === undefined ? 0 : rotationOffset(opts.routerId));
  }

  decide(req: RouteRequest, view: ViewCache, nowMs: number): RouteDecision {
    const identity = req.identity;
    const set = this.candidates.of(view, identity);
    const p = set.prefill;
    if (view !== this.prunedView || view.modelsRevision !== this.prunedRevision) this.prune(view);
    const tokenIds = req.tokenIds;
    const inputTokens = tokenIds !== null ? tokenIds.length : req.promptTokens;
    // The minimum credit over DP ranks with w = 1 − c is the largest prefill over them.
    const hits = tokenIds !== null && tokenIds.length > 0 ? view.matchStreams(tokenIds, nowMs, 1 - this.hostCost, identity?.keys) : null;
    const n = Math.max(p.length, set.decode.length);
    if (this.scores.length < n) {
      this.scores = new Float64Array(n * 2);
      this.ownWork = new Float64Array(n * 2);
      this.rate = new Float64Array(n * 2);
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
      const device = h.device;
      const hostOnly = h.hostOnly;
      let pending = 0;
      // Pending prefix credit, as CAR gives it: where the view's credit is trusted, on one rank.
      if (fingerprints !== null && h.blockSize > 0 && inst.dpSize === 1) {
        // In-flight decisions (every replica's, until a load report) and this router's ledger (until the first token).
        const granules = inflight!.ledgerPendingGranules(inst, fingerprints, inflight!.pendingGranules(inst, fingerprints), stale);
        if (granules > 0) pending = Math.floor(Math.min(granules * GRANULE_TOKENS, inputTokens) / h.blockSize) * h.blockSize;
      }
      // Before any decision there, a reported waiting request is worth this one's prefill as the view credits it.
      const fallback = Math.min(ownPrefillTokens(inputTokens, device, hostOnly, this.hostCost), inputTokens - pending);
      const perWaiting = this.routedMean.tokensPerRequest(inst.name, fallback);
      const ownTokens = inflight === null ? 0 : inflight.ownPrefillTokens(inst);
      const otherTokens = inflight === null ? 0 : inflight.otherPrefillTokens(inst, stale, perWaiting);
      const ledgerOwn = inflight === null ? 0 : inflight.ownOutstandingRequests(inst);
      const ledgerOther = inflight === null ? 0 : inflight.otherOutstandingRequests(inst, stale);
      const ledgerTokensOwn = inflight === null ? 0 : inflight.ownOutstandingTokens(inst);
      const ledgerTokensOther = inflight === null ? 0 : inflight.otherOutstandingTokens(inst, stale);
      const sinceReportMs = Math.min(INFLIGHT_TTL_MS, Math.max(0, nowMs - inst.load!.reportedAtMs));
      const tokensPerMs = this.throughput.tokensPerMs(inst.name);
      const waiting = inst.load!.waitingRequestsNum;
      const ledger = inflight === null ? null : inflight.ledgerOf(inst);
      // The other replicas' ledgers (none on a stale view, as their totals above).
      const shares = inflight === null || stale ? NO_SHARES : inst.inflight;
      const me = inflight === null ? '' : inflight.routerId;
      const progress = this.progress.see(inst.name, mono, ledger, shares, me, ledgerOther, inst.load!.reportedAtMs, mono - sinceReportMs);
      // The report counts the ledgers' requests at the engine when it was made: only the rest is unknown.
      const waitingUnknown = Math.max(0, waiting - progress.ledgerAtReport);
      const workedOff = progress.workedOff(ledger, shares, me, mono, tokensPerMs);
      // Only where the pool has shown itself full does what the queue ahead holds matter.
      // A DP instance's queue is shared by its ranks: each rank's pool against its share.
      const capacityTokens = h.deviceEvictionTokens * inst.dpSize;
      const full = fingerprints !== null && capacityTokens > 0;
      const footprint = full ? inflight!.ledgerFootprint(inst, fingerprints, stale, Math.ceil(pending / GRANULE_TOKENS), this.footprint) : null;
      const aheadTokens = footprint === null ? 0 : footprint.all * GRANULE_TOKENS;
      const afterPendingTokens = footprint === null ? 0 : footprint.included * GRANULE_TOKENS;
      const t = predictTtft(
        {
          inputTokens,
          deviceHitTokens: device,
          hostOnlyHitTokens: hostOnly,
          pendingHitTokens: pending,
          hostTokenCost: this.hostCost,
          waitingUnknown,
          tokensPerWaiting: perWaiting,
          sinceReportMs,
          knownTokens: ledgerTokensOwn + ledgerTokensOther + ownTokens + otherTokens,
          workedOffTokens: workedOff,
          tokensPerMs,
          deviceCapacityTokens: capacityTokens,
          aheadTokens,
          afterPendingTokens,
        },
        this.prediction,
      );
      scores[i] = t.predictedMs;
      this.ownWork[i] = t.ownTokens;
      this.rate[i] = tokensPerMs;
      if (t.queuedTokens > maxQueued) maxQueued = t.queuedTokens;
      const credited = inputTokens - t.ownTokens;
      const e: TtftCandidateExplanation = {
        instance_name: inst.name,
        incarnation_id: inst.incarnationId,
        role: 'prefill',
        hit_tokens: t.deviceCreditTokens + t.hostOnlyCreditTokens,
        device_hit_tokens: t.deviceCreditTokens,
        host_only_hit_tokens: t.hostOnlyCreditTokens,
        kv_hit_ratio: inputTokens > 0 ? Math.min(1, Math.max(0, credited / inputTokens)) : 0,
        // Filled below: queued tokens over the largest among the P candidates.
        queue_cost: t.queuedTokens,
        score: t.predictedMs,
        queued_tokens: t.queuedTokens,
        worked_off_tokens: workedOff,
        own_prefill_tokens: t.ownTokens,
        device_capacity_tokens: capacityTokens,
        evicted_hit_tokens: t.evictedHitTokens,
        ahead_tokens: aheadTokens,
        queue_ms: t.queueMs,
        own_prefill_ms: t.ownMs,
        predicted_ms: t.predictedMs,
        prefill_tokens_per_s: tokensPerMs * 1000,
        throughput_samples: this.throughput.samples(inst.name),
        waiting_reported: waiting,
        waiting_unknown: waitingUnknown,
        tokens_per_waiting: perWaiting,
        since_report_ms: sinceReportMs,
        ledger_requests_own: ledgerOwn,
        ledger_requests_other: ledgerOther,
        ledger_tokens_own: ledgerTokensOwn,
        ledger_tokens_other: ledgerTokensOther,
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
    // Near ties (within --ttft_work_slack of the soonest, wider for a spared recompute long beside it): the
    // least prefill work wins — about the same wait, less for the cluster to compute (a cached
    // prefix over a recompute, a repeat queued behind its prefix over an idle engine), which
    // shortens the queues of the requests after it. Of those left, predictions within
    // --ttft_tie_tolerance of the soonest tie, and ties follow CAR's rule (tie-break.ts).
    const soonestAt = keepLeastWork(scores, this.ownWork, this.rate, p.length, this.workSlack, this.slackGrowth);
    tieWithin(scores, p.length, this.tieTolerance);
    const pi = this.prefillPick.pick(scores, p, set.prefillNames, set.prefillCursor, view, stale);
    const tie = this.prefillPick.tie;
    const prefill = p[pi]!;
    if (pi !== soonestAt) {
      const soonest = explanations[soonestAt] as TtftCandidateExplanation;
      const picked = explanations[pi] as TtftCandidateExplanation;
      const saved = soonest.own_prefill_tokens - picked.own_prefill_tokens;
      if (picked.predicted_ms > soonest.predicted_ms) {
        const within = saved > 0 ? slackAgainstSoonest(this.workSlack, this.slackGrowth, soonest.predicted_ms, soonest.own_prefill_tokens, this.rate[soonestAt]!, picked.own_prefill_tokens) : this.tieTolerance;
        const why = saved > 0 ? `with less prefill work (${saved} tokens fewer)` : 'with as much prefill work: a tie';
        picked.note = `within ${round3(within)} of the soonest prediction (${round3(soonest.predicted_ms)} ms) ${why}`;
      }
    }
    const decode = pickDecode(set, prefill, scores, set.decodeCursor, explanations);
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
  private prune(view: ViewCache): void {
    this.prunedView = view;
    this.prunedRevision = view.modelsRevision;
    const names = new Set(view.instances().map((i) => i.name));
    this.throughput.retainOnly(names);
    this.routedMean.retainOnly(names);
    this.progress.retainOnly(names);
  }
}

function round3(x: number): number {
  return Math.round(x * 1000) / 1000;
}

/** The chosen prefill's TTFT terms in `decision`; null when it is not a TTFT decision. */
export function chosenTerms(decision: RouteDecision): TtftCandidateExplanation | null {
  return decision.policy === 'TTFT' ? (chosenPrefill(decision) as TtftCandidateExplanation | null) : null;
}

/** The router flags the TTFT policy reads; each may be absent (tests pass a few). */
export type TtftFlags = Partial<Pick<RouterFlags, 'ttftPrefillTokensPerS' | 'ttftPriorSamples' | 'ttftThroughputWindow' | 'ttftHostTokenCost' | 'ttftWorkSlack' | 'ttftSlackGrowth' | 'ttftTieTolerance'>>;

/** The TTFT flags, each defaulted from the router's flag table when absent. */
export function ttftPolicyOptions(
  flags: TtftFlags,
  inflight: InflightLoad | null,
  routerId: string | undefined,
): TtftPolicyOptions {
  const d = ROUTER_FLAGS;
  return {
    hostTokenCost: flags.ttftHostTokenCost ?? d.ttft_host_token_cost.default,
    workSlack: flags.ttftWorkSlack ?? d.ttft_work_slack.default,
    slackGrowth: flags.ttftSlackGrowth ?? d.ttft_slack_growth.default,
    tieTolerance: flags.ttftTieTolerance ?? d.ttft_tie_tolerance.default,
    throughput: {
      priorTokensPerS: flags.ttftPrefillTokensPerS ?? d.ttft_prefill_tokens_per_s.default,
      priorSamples: flags.ttftPriorSamples ?? d.ttft_prior_samples.default,
      window: flags.ttftThroughputWindow ?? d.ttft_throughput_window.default,
    },
    inflight,
    ...(routerId === undefined ? {} : { routerId }),
  };
}
