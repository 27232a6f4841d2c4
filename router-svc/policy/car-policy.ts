/**
 * CAR, cache-aware routing (routing.md "CAR"). For each P candidate:
 *
 *   hit          = min over its DP ranks r of (device_hit_tokens_r + w · host_only_hit_tokens_r)
 *   kv_hit_ratio = clamp(hit / input_tokens, 0, 1)          (0 when input_tokens = 0)
 *   queue_cost   = waiting / max(waiting over P)            (0 when that max is 0)
 *   score_P      = λ · (1 − kv_hit_ratio) + (1 − λ) · queue_cost      smallest wins
 *
 * A missing or unsynchronized rank, a stale view, or a stream of another incarnation makes the
 * instance's hit 0 (it stays a candidate by queue cost). D side, load only:
 *
 *   score_D = gpu_cache_usage_perc + waiting / max(waiting over D)   smallest wins
 *
 * With in-flight load (routing.md "In-flight load", `--car_inflight_load`) `waiting` is the
 * reported waiting plus the in-flight decisions no load report reflects yet (InflightLoad); the
 * formula is unchanged and the explanation shows both parts. With pending prefix credit
 * (`--car_pending_prefix`) an instance's hit is the larger of the view's and the prefix the prompt
 * shares with a request routed there and still in flight (its KV events not in the view yet),
 * floored to complete blocks, on single-rank instances whose view credit is trusted.
 *
 * Candidates serve the request's model and its prompt is matched under its cache identity
 * (cache-identity §2, §3: LoRA adapter, salt); queue costs, pending credit and tie rotations are
 * those of the model's candidates only (candidates.ts keeps one set and one cursor pair per scope).
 *
 * Exact P ties go to the fewest Device blocks in the view, then rotate (tie-break.ts; issue 15:
 * every replica reads the same key); D ties rotate (pickMinimumWithRotation). Cost per decision:
 * one walk per (block_size, seed) group over the shared residency index, hashing a block only
 * while some stream still matches (shared/index/residency-index.ts); scratch arrays are reused.
 */
import type { InflightLoad } from '../inflight/inflight-load.js';
import { GRANULE_TOKENS } from '../../shared/keys/prompt-fingerprint.js';
import type { RouterInstance, ViewCache } from '../viewcache/view-cache.js';
import { CandidateCache } from './candidates.js';
import { chosen } from './explanation.js';
import { pickDecode } from './decode-side.js';
import { rotationOffset } from './pick-minimum.js';
import { instanceHit, newInstanceHit, noInstanceHit } from './instance-hit.js';
import { PrefillPick } from './tie-break.js';
import type { CandidateExplanation, RouteDecision, RouteRequest, RoutingPolicy } from './policy-types.js';

export interface CarPolicyOptions {
  /** `--car_prefill_lambda` in [0,1]: 1 compares only cache misses, 0 only queues. */
  readonly prefillLambda: number;
  /** `--car_host_hit_weight` in [0,1]: credit of a host-only hit token against a device one. */
  readonly hostHitWeight: number;
  /** In-flight load (`--car_inflight_load`); null or absent = reported waiting only. */
  readonly inflight?: InflightLoad | null;
  /** This replica's id: where its tie rotations start (rotationOffset); absent = the first name. */
  readonly routerId?: string;
}

export class CarPolicy implements RoutingPolicy {
  readonly name = 'CAR' as const;
  private readonly lambda: number;
  private readonly hostWeight: number;
  private readonly candidates: CandidateCache;
  private readonly inflight: InflightLoad | null;
  private scores = new Float64Array(16);
  // Per-decision queue inputs with in-flight load, reused between decisions.
  private ownInflight = new Float64Array(16);
  private otherInflight = new Float64Array(16);
  private queueCosts = new Float64Array(16);
  private readonly prefillPick = new PrefillPick();
  private readonly scratchHit = newInstanceHit();

  constructor(opts: CarPolicyOptions) {
    if (!(opts.prefillLambda >= 0 && opts.prefillLambda <= 1)) throw new RangeError(`prefillLambda must be in [0,1], got ${opts.prefillLambda}`);
    if (!(opts.hostHitWeight >= 0 && opts.hostHitWeight <= 1)) throw new RangeError(`hostHitWeight must be in [0,1], got ${opts.hostHitWeight}`);
    this.lambda = opts.prefillLambda;
    this.hostWeight = opts.hostHitWeight;
    this.inflight = opts.inflight ?? null;
    this.candidates = new CandidateCache(opts.routerId === undefined ? 0 : rotationOffset(opts.routerId));
  }

  /**
   * queue_cost of every P candidate with waiting = reported + own + other routers' in-flight,
   * into this.queueCosts (and the two in-flight parts into their arrays).
   */
  private inflightQueueCosts(p: readonly RouterInstance[], inflight: InflightLoad, view: ViewCache, nowMs: number): Float64Array {
    if (this.queueCosts.length < p.length) {
      const n = p.length * 2;
      this.queueCosts = new Float64Array(n);
      this.ownInflight = new Float64Array(n);
      this.otherInflight = new Float64Array(n);
    }
    const costs = this.queueCosts;
    const stale = view.isStale(nowMs);
    const mono = inflight.now();
    let max = 0;
    for (let i = 0; i < p.length; i++) {
      const inst = p[i]!;
      const own = inflight.own(inst, mono);
      const other = inflight.others(inst, stale);
      this.ownInflight[i] = own;
      this.otherInflight[i] = other;
      const w = inst.load!.waitingRequestsNum + own + other;
      costs[i] = w;
      if (w > max) max = w;
    }
    for (let i = 0; i < p.length; i++) costs[i] = max === 0 ? 0 : costs[i]! / max;
    return costs;
  }

  decide(req: RouteRequest, view: ViewCache, nowMs: number): RouteDecision {
    const identity = req.identity;
    const set = this.candidates.of(view, identity);
    const p = set.prefill;
    const tokenIds = req.tokenIds;
    const inputTokens = tokenIds !== null ? tokenIds.length : req.promptTokens;
    // Without token ids there is nothing to match: hit ratios are 0, queue cost decides.
    // Only each instance's DP minimum is read, so ranks above it may stop walking early.
    const hits = tokenIds !== null && tokenIds.length > 0 ? view.matchStreams(tokenIds, nowMs, this.hostWeight, identity?.keys) : null;
    const explanations: CandidateExplanation[] = [];
    if (this.scores.length < Math.max(p.length, set.decode.length)) this.scores = new Float64Array(Math.max(p.length, set.decode.length) * 2);
    const scores = this.scores;
    const lambda = this.lambda;
    const inflight = this.inflight;
    const queueCosts = inflight === null ? set.prefillQueueCost : this.inflightQueueCosts(p, inflight, view, nowMs);
    // Pending prefix credit (after inflightQueueCosts, which ended the own entries that are over).
    const fingerprints = inflight !== null && hits !== null ? (req.promptFingerprints ?? null) : null;
    let cursor = 0;
    for (let i = 0; i < p.length; i++) {
      const inst = p[i]!;
      const h = this.scratchHit;
      if (hits === null) noInstanceHit(h);
      else cursor = instanceHit(inst, hits, cursor, this.hostWeight, h);
      let pending = 0;
      // Only where the view's own credit is trusted (so never on a stale view), and on one DP rank
      // (which rank a request lands on is the engine's choice).
      if (fingerprints !== null && h.blockSize > 0 && inst.dpSize === 1) {
        const granules = inflight!.pendingGranules(inst, fingerprints);
        if (granules > 0) pending = Math.floor(Math.min(granules * GRANULE_TOKENS, inputTokens) / h.blockSize) * h.blockSize;
      }
      const hit = pending > h.hit ? pending : h.hit;
      const ratio = inputTokens > 0 ? Math.min(1, Math.max(0, hit / inputTokens)) : 0;
      const queueCost = queueCosts[i]!;
      const score = lambda * (1 - ratio) + (1 - lambda) * queueCost;
      scores[i] = score;
      const e: CandidateExplanation = {
        instance_name: inst.name,
        incarnation_id: inst.incarnationId,
        role: 'prefill',
        hit_tokens: hit,
        device_hit_tokens: h.device,
        host_only_hit_tokens: h.hostOnly,
        kv_hit_ratio: ratio,
        queue_cost: queueCost,
        score,
        waiting_reported: inst.load!.waitingRequestsNum,
        waiting_inflight_own: inflight === null ? 0 : this.ownInflight[i]!,
        waiting_inflight_other: inflight === null ? 0 : this.otherInflight[i]!,
      };
      if (fingerprints !== null) e.pending_hit_tokens = pending;
      if (h.note !== null) e.note = h.note;
      explanations.push(e);
    }
    // Tie rule (tie-break.ts): the usage key is read only when the smallest score is shared.
    const pi = this.prefillPick.pick(scores, p, set.prefillNames, set.prefillCursor, view, view.isStale(nowMs));
    const tie = this.prefillPick.tie;
    const prefill = p[pi]!;
    const decode = pickDecode(set, prefill, scores, set.decodeCursor, explanations);
    const decision: RouteDecision = { policy: 'CAR', prefill: chosen(prefill), decode, candidates: explanations };
    if (tie !== null) decision.tie_break = tie;
    return decision;
  }
}
