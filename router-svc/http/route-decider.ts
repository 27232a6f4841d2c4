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
}

const NOTHING = (): void => undefined;
import { performance } from 'node:perf_hooks';
import type { RouteDecision, RouteRequest, RoutingPolicy } from '../policy/policy.js';
import { NoCandidateError } from '../policy/no-candidate-error.js';
import type { InflightLoad } from '../inflight/inflight-load.js';
import { promptFingerprints } from '../../shared/keys/prompt-fingerprint.js';
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
  ) {}

  /** The decision, or a `no_candidate` RouterHttpError (503) naming why. */
  decide(input: RouteRequest, nowMs: number): RouteDecision {
    return this.decideCounted(input, nowMs).decision;
  }

  /** `decide` for a request the caller forwards and sees answered (the proxy). */
  decideTracked(input: RouteRequest, nowMs: number): TrackedDecision {
    const { decision, seq } = this.decideCounted(input, nowMs);
    const inflight = this.inflight;
    if (inflight === null || seq < 0) return { decision, answered: NOTHING };
    const name = decision.prefill.name;
    return { decision, answered: () => inflight.complete(name, seq) };
  }

  /** The decision and its in-flight sequence number (−1 when not counted). */
  private decideCounted(input: RouteRequest, nowMs: number): { decision: RouteDecision; seq: number } {
    const t0 = performance.now();
    let decision: RouteDecision;
    // Hashed once: CAR matches them against the requests in flight, the count keeps them for the others.
    const fingerprints = this.pendingPrefix && this.inflight !== null && input.tokenIds !== null ? promptFingerprints(input.tokenIds) : null;
    try {
      decision = this.policy.decide({ tokenIds: input.tokenIds, promptTokens: input.promptTokens, promptFingerprints: fingerprints }, this.view, nowMs);
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
    if (this.inflight !== null && input.dryRun !== true) {
      const inst = this.view.instance(decision.prefill.name);
      if (inst !== null) seq = this.inflight.record(inst, this.inflight.now(), fingerprints);
    }
    this.metrics.decision(this.policyName, 'ok', (performance.now() - t0) / 1000, chosenHitRatio(decision));
    return { decision, seq };
  }
}

/** kv_hit_ratio of the chosen prefill among the candidates (0 when it is not listed). */
function chosenHitRatio(d: RouteDecision): number {
  for (const c of d.candidates) if (c.role === 'prefill' && c.instance_name === d.prefill.name) return c.kv_hit_ratio;
  return 0;
}
