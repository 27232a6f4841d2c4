/**
 * The surface every routing policy implements and returns (routing.md), at the bottom of the
 * policy folder: the policies import these types, and only create-policy.ts imports the policies
 * (see README.md here for the layering and what a new policy implements).
 */
import type { LoadBalancePolicy } from '../../shared/config/router-flags.js';
import type { RequestIdentity } from '../identity/request-identity.js';
import type { ViewCache } from '../viewcache/view-cache.js';

/** A policy's name: the `--load_balance_policy` value that selects it, and the route answer's `policy`. */
export type PolicyName = LoadBalancePolicy;

/** What a policy decides on (`POST /v1/route`, or a proxied request's prompt). */
export interface RouteRequest {
  /** Already tokenized prompt (ints in [0, 2^31)); null: no token ids, the policy ranks by load. */
  readonly tokenIds: readonly number[] | null;
  /** Input length for RR/SLO_AWARE when tokenIds is null (ignored when tokenIds is given). */
  readonly promptTokens: number;
  /**
   * cache-identity §2: the request's model scope (candidates are the instances serving it) and
   * the keys its prompt is matched under (LoRA adapter, salt). Absent = ANY_IDENTITY (any
   * instance, base keys); the HTTP edge always resolves one.
   */
  readonly identity?: RequestIdentity;
  /**
   * `POST /v1/route` `"dry_run": true`: explain without counting the decision as in-flight load
   * (routing.md "In-flight load"). The policies ignore it; the route decider reads it. Absent =
   * false (proxied requests always count).
   */
  readonly dryRun?: boolean;
  /**
   * The prompt's fingerprints (shared/keys/prompt-fingerprint.ts, seeded with the identity) when
   * pending prefix credit is on (`--car_pending_prefix`): CAR credits the prefix they share with
   * requests in flight on an instance. Absent or null = no pending credit. The route decider fills it.
   */
  readonly promptFingerprints?: Uint32Array | null;
}

/** One candidate's terms, as routing.md asks the route answer to explain them. */
export interface CandidateExplanation {
  instance_name: string;
  incarnation_id: string;
  role: 'prefill' | 'decode';
  hit_tokens: number;
  device_hit_tokens: number;
  host_only_hit_tokens: number;
  kv_hit_ratio: number;
  queue_cost: number;
  score: number;
  /**
   * CAR P side: the parts of the `waiting` behind queue_cost (routing.md "In-flight load"): the
   * engine's last load report, this router's decisions it cannot reflect yet, and the other
   * routers' (from the view). Both in-flight parts are 0 with `--car_inflight_load=false`.
   */
  waiting_reported?: number;
  waiting_inflight_own?: number;
  waiting_inflight_other?: number;
  /**
   * CAR P side with pending prefix credit: the prefix, in complete blocks' tokens, the prompt
   * shares with a request routed to the instance and still in flight (own or another router's);
   * hit_tokens is the larger of it and the view's hit.
   */
  pending_hit_tokens?: number;
  predicted_ms?: number;
  note?: string;
}

/**
 * CAR P side, when several candidates shared the smallest score_P (tie-break.ts): whether the
 * fewest Device blocks in the view decided, or the rotation among those still equal on it.
 */
export interface TieBreakExplanation {
  decided_by: 'kv_usage' | 'rotation';
  /** How many tied candidates were still equal on usage (1 when usage decided). */
  rotated_among: number;
  /** The candidates at the smallest score_P and their tie key (absent when the view is stale). */
  tied: { instance_name: string; device_blocks_per_rank?: number }[];
  note?: string;
}

export interface RouteDecision {
  policy: PolicyName;
  prefill: { name: string; incarnation_id: string };
  /** null when there is no D candidate, or the chosen prefill is a DEFAULT serving alone. */
  decode: { name: string; incarnation_id: string } | null;
  candidates: CandidateExplanation[];
  /** CAR only, and only when the P side tied at its smallest score. */
  tie_break?: TieBreakExplanation;
  /** CAR and TTFT, only for a claim ordered against the other replicas' (claim-order.ts). */
  claim_order?: ClaimOrderExplanation;
}

/**
 * A claim's wait (claim-order.ts): the directory's seq of the claim (−1: not back within
 * `--car_claim_wait_ms`, the first decision stands), how long the answer waited (every round),
 * and the instance of the first decision when the request moved elsewhere.
 */
export interface ClaimOrderExplanation {
  claim_seq: number;
  held_ms: number;
  moved_from?: string;
}

/**
 * A routing policy (routing.md): a pure decision over the router's in-process view — no I/O, no
 * clock reads (`nowMs` comes in), no metrics or logs (the route decider records them).
 *
 * What an implementation must do:
 * - take its candidates from a `CandidateCache` (candidates.ts) with `of(view, identity)`: that
 *   is where schedulability, P/D sides and the model filter (cache-identity §2) are applied, and
 *   where the per-scope rotation cursors live — never from `view.instances()` directly;
 * - when it matches the prompt, match under `identity.keys` (`view.matchStreams(..., identity.keys)`);
 * - explain every candidate it scored (`candidates`, built with explanation.ts) and throw
 *   NoCandidateError when no instance can take the request (the 503's reason).
 * Registering one: add its name to LOAD_BALANCE_POLICIES (shared/config/router-flags.ts) and a
 * case to createPolicy (create-policy.ts).
 */
export interface RoutingPolicy {
  readonly name: PolicyName;
  /** Throws NoCandidateError (503) when no instance can take the request. */
  decide(req: RouteRequest, view: ViewCache, nowMs: number): RouteDecision;
}
