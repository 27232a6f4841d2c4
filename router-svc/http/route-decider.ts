/**
 * One routing decision as the HTTP edge makes it, for `POST /v1/route` and the OpenAI proxy alike:
 * the policy reads the in-process view (routing.md: nothing on the request path touches the
 * network), and the outcome, latency and chosen hit ratio are recorded here, outside the policy.
 * NoCandidateError becomes the 503 the client sees, with the policy's reason.
 *
 * In-flight load (routing.md): every decision that is not a dry run is counted at once against
 * the chosen prefill instance (InflightLoad); the reporter sends it to the directory later, off
 * the request path. The proxy, which sees the answer, also ends its own count then (`decideTracked`).
 */

/** A counted decision and how to end its in-flight count once the engine answered. */
export interface TrackedDecision {
  readonly decision: RouteDecision;
  /** Idempotent; a no-op when in-flight load is off. */
  readonly answered: () => void;
  /**
   * The engine's first token reached the proxy (a first-token-visible request: first-token.ts):
   * its time since the decision is measured and learned from (DecisionObserver). Only the first call counts.
   */
  readonly firstToken: () => void;
  /** The prompt's fingerprints it was counted with (pending prefix credit); null when none. */
  readonly prompt: Uint32Array | null;
  /** performance.now() when it was decided (a retargeted request's first token is timed from it too). */
  readonly decidedAt: number;
  /** The request's input tokens (a retargeted request's prefill is read from the decision with them). */
  readonly inputTokens: number;
}

const NOTHING = (): void => undefined;
import { performance } from 'node:perf_hooks';
import type { ClaimOrderExplanation, RouteDecision, RouteRequest, RoutingPolicy } from '../policy/policy-types.js';
import { NoCandidateError } from '../policy/no-candidate-error.js';
import { chosenPrefill } from '../policy/explanation.js';
import type { InflightLoad } from '../inflight/inflight-load.js';
import type { ClaimOrder } from '../inflight/claim-order.js';
import type { DecisionObserver } from '../policy/ttft-policy.js';
import { MAX_PROMPT_GRANULES, promptFingerprints } from '../../shared/keys/prompt-fingerprint.js';
import type { RequestIdentity } from '../identity/request-identity.js';
import type { ViewCache } from '../viewcache/view-cache.js';
import { RouterHttpError } from './router-http-errors.js';
import type { RouterMetrics } from './router-metrics.js';

export class RouteDecider {
  constructor(
    private readonly policy: RoutingPolicy,
    private readonly view: ViewCache,
    private readonly metrics: RouterMetrics,
    /** `--load_balance_policy`, the metrics label (and the status page's). */
    readonly policyName: string,
    /** `--car_inflight_load`: where decisions are counted; null = not counted. */
    private readonly inflight: InflightLoad | null = null,
    /** `--car_pending_prefix` (with in-flight load): decisions carry their prompt's fingerprints. */
    private readonly pendingPrefix = false,
    /** `--car_claim_wait_ms` > 0 (with pending prefix credit): claims are ordered (claim-order.ts). */
    private readonly claims: ClaimOrder | null = null,
    /** A policy that learns from counted decisions and first tokens (TTFT); null for the others. */
    private readonly observer: DecisionObserver | null = null,
  ) {}

  /** The decision at once (no claim order), or a `no_candidate` RouterHttpError (503) naming why. */
  decide(input: RouteRequest, nowMs: number): RouteDecision {
    return this.decideCounted(input, nowMs).decision;
  }

  /** `decide`, a claim ordered against the other replicas' first (`/v1/route`). */
  async decideOrdered(input: RouteRequest, nowMs: number): Promise<RouteDecision> {
    return (await this.ordered(this.decideCounted(input, nowMs), nowMs)).decision;
  }

  /**
   * `decideOrdered` for a request the caller forwards and sees answered (the proxy). Its prefill
   * enters the prefill ledger (InflightLoad.startPrefill) until its first token or its answer.
   */
  async decideTracked(input: RouteRequest, nowMs: number): Promise<TrackedDecision> {
    const { decision, seq, decidedAt, prefillId, prompt, inputTokens } = await this.ordered(this.decideCounted(input, nowMs, true), nowMs);
    return this.tracked(decision, decision.prefill.name, seq, prefillId, { prompt, decidedAt, inputTokens }, true);
  }

  /**
   * The proxy sends `tracked`'s request to `name` instead, its first instance having vanished
   * before answering (openai-proxy.ts): counted against `name` now, in flight and in the prefill
   * ledger with `name`'s own prefill from the decision, as the decision was against the first
   * (whose counts the caller has ended). Not a new decision: no decision metrics, and its first
   * token (timed from the decision, failed attempt included) is not learned from: the prediction
   * was for the first instance.
   */
  retarget(tracked: TrackedDecision, name: string): TrackedDecision {
    const inflight = this.inflight;
    const inst = inflight === null ? null : this.view.instance(name);
    if (inflight === null || inst === null) return this.tracked(tracked.decision, name, -1, -1, tracked, false);
    const tokens = prefillTokensOn(tracked.decision, name, tracked.inputTokens);
    const prefillId = inflight.startPrefill(inst, tokens, tracked.prompt);
    const seq = inflight.record(inst, inflight.now(), tracked.prompt, 0);
    return this.tracked(tracked.decision, name, seq, prefillId, tracked, false);
  }

  /**
   * How a forwarded request's counts on `name` end: its in-flight entry `seq` at its answer, its
   * ledger entry `prefillId` at its first token or its answer (−1: none); `learn` = its first
   * token teaches the policy (DecisionObserver).
   */
  private tracked(
    decision: RouteDecision,
    name: string,
    seq: number,
    prefillId: number,
    request: Pick<TrackedDecision, 'prompt' | 'decidedAt' | 'inputTokens'>,
    learn: boolean,
  ): TrackedDecision {
    const inflight = this.inflight;
    const endPrefill = inflight === null || prefillId < 0 ? NOTHING : (): void => inflight.endPrefill(name, prefillId);
    const firstToken = this.firstTokenOf(decision, request.decidedAt, endPrefill, learn);
    const answered =
      inflight === null || seq < 0
        ? endPrefill
        : (): void => {
            inflight.complete(name, seq);
            endPrefill();
          };
    return { decision, answered, firstToken, prompt: request.prompt, decidedAt: request.decidedAt, inputTokens: request.inputTokens };
  }

  /** The time from the decision to its first token, into the metrics (and the learning policy when `learn`), once. */
  private firstTokenOf(decision: RouteDecision, decidedAt: number, endPrefill: () => void, learn: boolean): () => void {
    let seen = false;
    return () => {
      if (seen) return;
      seen = true;
      endPrefill();
      const ms = performance.now() - decidedAt;
      this.metrics.firstToken(this.policyName, ms, learn ? predictedMsOf(decision) : null);
      if (learn) this.observer?.firstToken(decision, ms);
    };
  }

  /**
   * A claim, once the view carries it back and every claim ordered before it has settled: decided
   * again on what was ordered before it, as one router deciding in arrival order would have, and
   * moved when the policy prefers another instance outright — an earlier claim of the same prefix,
   * or an instance where no earlier claim queued ahead of it (claim-order.ts). Either way it then
   * settles, and the claims ordered after it go on. A move keeps the claim's place in the order.
   * Anything else is returned as it is.
   */
  private async ordered(counted: CountedDecision, nowMs: number): Promise<CountedDecision> {
    const claims = this.claims;
    const inflight = this.inflight;
    if (claims === null || inflight === null || counted.seq < 0 || !claims.isClaim(counted.decision, counted.prompt, nowMs, counted.prefillTokens)) return counted;
    const from = counted.decision.prefill.name;
    // Before the reporter's microtask: the directory hears of it as an open claim.
    inflight.openClaim(from, counted.seq);
    const t0 = performance.now();
    const waitMs = claims.waitFor(counted.decision);
    const claimSeq = await claims.claimSeq(from, counted.prompt!, waitMs);
    let current = counted;
    if (claimSeq >= 0) {
      await claims.earlierSettled(claimSeq, counted.atMs, waitMs);
      current = this.moved(counted, inflight, claimSeq, nowMs + (performance.now() - t0)) ?? counted;
    }
    // A move settles by its withdrawal; a claim that stays settles where it is.
    if (current === counted && inflight.settle(from, counted.seq, claimSeq)) claims.settleWhenSeen(from, counted.prompt!);
    claims.settled();
    const heldMs = performance.now() - t0;
    const movedTo = current.decision.prefill.name === from ? null : current.decision.prefill.name;
    this.metrics.claim(claimSeq < 0 ? 'not_back' : movedTo === null ? 'stayed' : 'moved', heldMs);
    const note: ClaimOrderExplanation = { claim_seq: claimSeq, held_ms: Math.round(heldMs * 1000) / 1000, ...(movedTo === null ? {} : { moved_from: from }) };
    return { ...current, decision: { ...current.decision, claim_order: note } };
  }

  /**
   * A claim back in order as `claimSeq`, decided again on what was ordered before it: moved to
   * the instance the policy now prefers outright, its counts with it; null when it stays.
   */
  private moved(counted: CountedDecision, inflight: InflightLoad, claimSeq: number, nowMs: number): CountedDecision | null {
    const from = counted.decision.prefill.name;
    const prompt = counted.prompt;
    const request: RouteRequest = { tokenIds: counted.tokenIds, promptTokens: 0, promptFingerprints: prompt, identity: counted.identity };
    let again: RouteDecision;
    try {
      again = inflight.orderedBefore(claimSeq, counted.atMs, () => this.policy.decide(request, this.view, nowMs));
    } catch {
      // No candidate any more: the first decision stands (its instance may be gone too; the
      // caller finds out as it would have without the wait).
      return null;
    }
    // Only an instance the policy prefers outright moves it: a tie is what the first decision
    // already broke. Not the lower score: TTFT picks within its near-tie slack by the work, so an
    // earlier claim of the same prefix one router would have followed is often predicted later.
    if (!prefersOutright(again, from)) return null;
    const inst = this.view.instance(again.prefill.name);
    if (inst === null) return null;
    inflight.withdraw(from, counted.seq, claimSeq);
    const tokens = decisionPrefillTokens(again, counted.inputTokens);
    let prefillId = -1;
    if (counted.prefillId >= 0) {
      inflight.endPrefill(from, counted.prefillId);
      prefillId = inflight.startPrefill(inst, tokens, prompt, counted.atMs);
    }
    // It keeps its place in the order (the directory's claimSeq, its first decision's time): the
    // claims ordered after it see it where it went.
    const seq = inflight.recordMove(inst, inflight.now(), counted.atMs, prompt!, prefillId >= 0 ? 0 : tokens, claimSeq);
    return { ...counted, seq, prefillId, prefillTokens: tokens, decision: again };
  }

  /**
   * The decision and its in-flight sequence number (−1 when not counted); a `tracked` one (the
   * proxy's: it sees the first token and the answer) also enters the prefill ledger.
   */
  private decideCounted(input: RouteRequest, nowMs: number, tracked = false): CountedDecision {
    const t0 = performance.now();
    const inputTokens = input.tokenIds !== null ? input.tokenIds.length : input.promptTokens;
    let decision: RouteDecision;
    // Hashed once: CAR matches them against the requests in flight, the count keeps them for the
    // others. Seeded with the identity: another identity's pending prompts never match them.
    const fingerprints =
      this.pendingPrefix && this.inflight !== null && input.tokenIds !== null ? promptFingerprints(input.tokenIds, MAX_PROMPT_GRANULES, input.identity?.fingerprintSeed) : null;
    try {
      decision = this.policy.decide({ tokenIds: input.tokenIds, promptTokens: input.promptTokens, promptFingerprints: fingerprints, identity: input.identity }, this.view, nowMs);
    } catch (e) {
      const seconds = (performance.now() - t0) / 1000;
      if (e instanceof NoCandidateError) {
        this.metrics.decision(this.policyName, 'no_candidate', seconds, null);
        throw new RouterHttpError('no_candidate', 503, e.reason);
      }
      this.metrics.decision(this.policyName, 'error', seconds, null);
      throw e;
    }
    let seq = -1;
    let atMs = 0;
    let prefillId = -1;
    let tokens = 0;
    if (this.inflight !== null && input.dryRun !== true) {
      const inst = this.view.instance(decision.prefill.name);
      atMs = this.inflight.now();
      if (inst !== null) {
        tokens = decisionPrefillTokens(decision, inputTokens);
        // A tracked request's prefill is the ledger's until its first token: its in-flight entry
        // carries 0 tokens, so no replica counts the work twice.
        if (tracked) prefillId = this.inflight.startPrefill(inst, tokens, fingerprints);
        seq = this.inflight.record(inst, atMs, fingerprints, tracked ? 0 : tokens);
      }
    }
    if (input.dryRun !== true) this.observer?.counted(decision);
    this.metrics.decision(this.policyName, 'ok', (performance.now() - t0) / 1000, chosenHitRatio(decision));
    return { decision, seq, atMs, prompt: fingerprints, tokenIds: input.tokenIds, identity: input.identity, decidedAt: t0, inputTokens, prefillId, prefillTokens: tokens };
  }
}

interface CountedDecision {
  readonly decision: RouteDecision;
  /** In-flight sequence number; −1 when not counted. */
  readonly seq: number;
  /** When it was counted (InflightLoad's monotonic clock). */
  readonly atMs: number;
  readonly prompt: Uint32Array | null;
  readonly tokenIds: readonly number[] | null;
  /** The request's identity: a claim is decided again among the same model's candidates. */
  readonly identity: RequestIdentity | undefined;
  /** performance.now() when the decision started (its first token is timed from it). */
  readonly decidedAt: number;
  readonly inputTokens: number;
  /** Its prefill ledger entry (InflightLoad.startPrefill); −1 when it has none. */
  readonly prefillId: number;
  /** Its own prefill on its instance as counted (decisionPrefillTokens); 0 when not counted. */
  readonly prefillTokens: number;
}

/**
 * Whether decision `d` picked another prefill than `name` over it outright: `name` did not tie
 * with the pick (CAR: an equal smallest score; TTFT: within its tie tolerance after the work
 * slack), or is gone from the candidates.
 */
function prefersOutright(d: RouteDecision, name: string): boolean {
  if (d.prefill.name === name) return false;
  const tie = d.tie_break;
  return tie === undefined || !tie.tied.some((t) => t.instance_name === name);
}

/**
 * The prefill tokens a decision sends its instance (what the TTFT policy queues behind it): TTFT's
 * own_prefill_tokens; for the other policies the input less the chosen candidate's credited hit.
 */
function decisionPrefillTokens(d: RouteDecision, inputTokens: number): number {
  return prefillTokensOn(d, d.prefill.name, inputTokens);
}

/** The prefill tokens `d` predicts on P candidate `name` (the input when it is not listed). */
function prefillTokensOn(d: RouteDecision, name: string, inputTokens: number): number {
  for (const c of d.candidates) {
    if (c.role !== 'prefill' || c.instance_name !== name) continue;
    const own = (c as { own_prefill_tokens?: number }).own_prefill_tokens;
    return own ?? Math.max(0, inputTokens - c.hit_tokens);
  }
  return inputTokens;
}

/** The chosen prefill's predicted TTFT (TTFT policy), null when the policy predicts none. */
function predictedMsOf(d: RouteDecision): number | null {
  return d.policy === 'TTFT' ? (chosenPrefill(d)?.predicted_ms ?? null) : null;
}

/** kv_hit_ratio of the chosen prefill among the candidates (0 when it is not listed). */
function chosenHitRatio(d: RouteDecision): number {
  return chosenPrefill(d)?.kv_hit_ratio ?? 0;
}
