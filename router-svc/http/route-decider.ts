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
  /** The prompt's fingerprints it was counted with (pending prefix credit); null when none. */
  readonly prompt: Uint32Array | null;
}

const NOTHING = (): void => undefined;
import { performance } from 'node:perf_hooks';
import type { RouteDecision, RouteRequest, RoutingPolicy } from '../policy/policy-types.js';
import { NoCandidateError } from '../policy/no-candidate-error.js';
import type { InflightLoad } from '../inflight/inflight-load.js';
import type { ClaimOrder } from '../inflight/claim-order.js';
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
    /** `--car_claim_wait_ms` > 0 (with pending prefix credit): cold claims are ordered (claim-order.ts). */
    private readonly claims: ClaimOrder | null = null,
  ) {}

  /** The decision at once (no claim order), or a `no_candidate` RouterHttpError (503) naming why. */
  decide(input: RouteRequest, nowMs: number): RouteDecision {
    return this.decideCounted(input, nowMs).decision;
  }

  /** `decide`, a cold claim ordered against the other replicas' first (`/v1/route`). */
  async decideOrdered(input: RouteRequest, nowMs: number): Promise<RouteDecision> {
    return (await this.ordered(this.decideCounted(input, nowMs), nowMs)).decision;
  }

  /** `decideOrdered` for a request the caller forwards and sees answered (the proxy). */
  async decideTracked(input: RouteRequest, nowMs: number): Promise<TrackedDecision> {
    const { decision, seq, prompt } = await this.ordered(this.decideCounted(input, nowMs), nowMs);
    const inflight = this.inflight;
    if (inflight === null || seq < 0) return { decision, answered: NOTHING, prompt };
    const name = decision.prefill.name;
    return { decision, answered: () => inflight.complete(name, seq), prompt };
  }

  /**
   * The proxy sends `tracked`'s request to `name` instead, its first instance having vanished
   * before answering (openai-proxy.ts): counted against `name` now, as the decision was against
   * the first (whose count the caller has ended). Not a new decision: no decision metrics.
   */
  retarget(tracked: TrackedDecision, name: string): TrackedDecision {
    const inflight = this.inflight;
    const inst = inflight === null ? null : this.view.instance(name);
    if (inflight === null || inst === null) return { decision: tracked.decision, answered: NOTHING, prompt: tracked.prompt };
    const seq = inflight.record(inst, inflight.now(), tracked.prompt);
    return { decision: tracked.decision, answered: () => inflight.complete(name, seq), prompt: tracked.prompt };
  }

  /**
   * A cold claim, once the view carries it back: decided again on what was ordered before it, as
   * one router deciding in arrival order would have, and moved when that finds a strictly better
   * instance — an earlier claim of the same prefix, or an instance an earlier claim made busy
   * (claim-order.ts). Anything else is returned as it is.
   */
  private async ordered(counted: CountedDecision, nowMs: number): Promise<CountedDecision> {
    const claims = this.claims;
    const inflight = this.inflight;
    const prompt = counted.prompt;
    if (claims === null || inflight === null || counted.seq < 0 || !claims.isColdClaim(counted.decision, prompt, nowMs)) return counted;
    const from = counted.decision.prefill.name;
    const t0 = performance.now();
    const claimSeq = await claims.claimSeq(from, prompt!);
    const heldMs = performance.now() - t0;
    const note = { claim_seq: claimSeq, held_ms: Math.round(heldMs * 1000) / 1000 };
    if (claimSeq < 0) return { ...counted, decision: { ...counted.decision, claim_order: note } };
    let again: RouteDecision;
    try {
      again = inflight.orderedBefore(claimSeq, counted.atMs, () =>
        this.policy.decide({ tokenIds: counted.tokenIds, promptTokens: 0, promptFingerprints: prompt, identity: counted.identity }, this.view, nowMs + heldMs),
      );
    } catch {
      // No candidate any more: the first decision stands (its instance may be gone too; the
      // caller finds out as it would have without the wait).
      return { ...counted, decision: { ...counted.decision, claim_order: note } };
    }
    // Only a strictly better instance moves it: a tie is what the first decision already broke.
    const to = again.prefill.name;
    const inst = to !== from && prefillScore(again, to) < prefillScore(again, from) ? this.view.instance(to) : null;
    if (inst === null) return { ...counted, decision: { ...counted.decision, claim_order: note } };
    inflight.withdraw(from, counted.seq, claimSeq);
    const seq = inflight.record(inst, inflight.now(), prompt);
    return { ...counted, seq, decision: { ...again, claim_order: { ...note, moved_from: from } } };
  }

  /** The decision and its in-flight sequence number (−1 when not counted). */
  private decideCounted(input: RouteRequest, nowMs: number): CountedDecision {
    const t0 = performance.now();
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
    if (this.inflight !== null && input.dryRun !== true) {
      const inst = this.view.instance(decision.prefill.name);
      atMs = this.inflight.now();
      if (inst !== null) seq = this.inflight.record(inst, atMs, fingerprints);
    }
    this.metrics.decision(this.policyName, 'ok', (performance.now() - t0) / 1000, chosenHitRatio(decision));
    return { decision, seq, atMs, prompt: fingerprints, tokenIds: input.tokenIds, identity: input.identity };
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
  /** The request's identity: a cold claim is decided again among the same model's candidates. */
  readonly identity: RequestIdentity | undefined;
}

/** The score of P candidate `name` (+∞ when it is not listed: gone from the candidates). */
function prefillScore(d: RouteDecision, name: string): number {
  for (const c of d.candidates) if (c.role === 'prefill' && c.instance_name === name) return c.score;
  return Number.POSITIVE_INFINITY;
}

/** kv_hit_ratio of the chosen prefill among the candidates (0 when it is not listed). */
function chosenHitRatio(d: RouteDecision): number {
  for (const c of d.candidates) if (c.role === 'prefill' && c.instance_name === d.prefill.name) return c.kv_hit_ratio;
  return 0;
}
