/**
 * The TTFT policy's cost (issue 27): when would this request's first token come out of a
 * candidate? Prefill work is counted in tokens, the engine's speed in tokens per ms:
 *
 *   queued_tokens = max(0, known_tokens − worked_off)
 *                   + max(0, waiting_unknown · tokens_per_waiting − θ · since_report_ms)    tokens
 *   device_kept   = min(device_hit, max(0, K − max(queued_tokens, ahead_tokens)))
 *                                                     (device_hit when K unknown)          tokens
 *   pending_kept  = min(pending_hit, max(0, K − after_pending_tokens))                      tokens
 *   own_tokens    = min(input − device_kept − host_only_hit + c · host_only_hit,
 *                       input − pending_kept)                                              tokens
 *   predicted_ms  = (queued_tokens + own_tokens) / θ                                       ms
 *
 * - own_tokens: this request's prefill; a Device hit is free, a Host-only hit costs c (the reload
 *   cost, `--ttft_host_token_cost`) of a recomputed token; or, when less, what is left beside the
 *   pending prefix (a request queued ahead computes it, so it is on Device when this one runs,
 *   unless what runs after that request evicts it: pending_kept, as device_kept with
 *   after_pending_tokens).
 * - known_tokens: prefill known request by request — every router's requests to the engine still
 *   before their first token (the prefill ledger), and the decisions no load report reflects yet
 *   that are in no ledger (routing.md "In-flight load").
 * - worked_off: what the engine has already prefilled of the oldest of them, the one it works on:
 *   min(head_tokens, θ · busy_ms), busy_ms the time since that request was sent or since the
 *   engine's last first token, whichever is later (workedOffTokens).
 * - waiting_unknown: what the engine's last load report counts beyond those (requests no router
 *   accounts for), each worth tokens_per_waiting (the mean prefill of what was recently routed
 *   there); the engine has worked through θ · since_report_ms of that since the report.
 * - θ: the engine's prefill throughput, learned from first-token times (prefill-throughput.ts).
 * - K: the engine's Device pool in tokens, known once it has evicted (the most Device blocks its
 *   stream held when one left, × block size). The requests queued ahead touch their whole
 *   prompts before this one runs — their cached prefixes and their new blocks — so a full LRU
 *   pool keeps those and evicts this request's hit first: only what still fits beside them is
 *   kept (survivingHitTokens). ahead_tokens: what the queued prompts hold beyond this prompt's
 *   prefix, their union as a prefix tree (footprints over the ledgers' prompt
 *   fingerprints); queued_tokens stands in for requests without fingerprints. The rest of the
 *   hit is recomputed: a hit the requests ahead will evict is not a hit. Without it, two
 *   contexts alternating on an engine too small for both were each predicted with the hit the
 *   other was about to take away (docs/design/decisions.md, TTFT policy).
 *
 * Pure; writes into a caller's scratch object.
 */

export interface TtftTerms {
  /** Tokens of the request (its token ids, or prompt_tokens without them). */
  readonly inputTokens: number;
  /** Prefix credit on the candidate (Device; a block on both tiers counts as Device). */
  readonly deviceHitTokens: number;
  readonly hostOnlyHitTokens: number;
  /** Prefix a request queued ahead computes first (pending credit): exposed only to what runs after that request. */
  readonly pendingHitTokens: number;
  /** c in [0, 1]: a Host-only hit token's reload cost relative to a recomputed one. */
  readonly hostTokenCost: number;
  /** Requests the engine's last load report counts that no router's ledger accounts for. */
  readonly waitingUnknown: number;
  /** Prefill tokens one of them is worth (≥ 0). */
  readonly tokensPerWaiting: number;
  /** Time since that report (≥ 0, the caller bounds it). */
  readonly sinceReportMs: number;
  /** Prefill tokens known request by request (ledgers and in-flight decisions, every replica's). */
  readonly knownTokens: number;
  /** Of those, what the engine has prefilled already (workedOffTokens; ≥ 0). */
  readonly workedOffTokens: number;
  /** θ > 0: prefill throughput in tokens per ms. */
  readonly tokensPerMs: number;
  /** K: the engine's Device pool in tokens as its evictions show it; 0 = unknown (it never evicted). */
  readonly deviceCapacityTokens: number;
  /** What the prompts queued ahead hold beyond this prompt's prefix, in tokens (≥ 0; 0 without fingerprints). */
  readonly aheadTokens: number;
  /** The same of the prompts queued after the pending prefix's producer (≤ aheadTokens). */
  readonly afterPendingTokens: number;
}

export interface TtftPrediction {
  ownTokens: number;
  /** The credit own_tokens counts: the view's Device and Host-only hit (Device as kept), or the pending prefix alone. */
  deviceCreditTokens: number;
  hostOnlyCreditTokens: number;
  /** Hit tokens the requests ahead evict first (the credited hit less what is kept of it). */
  evictedHitTokens: number;
  queuedTokens: number;
  queueMs: number;
  ownMs: number;
  predictedMs: number;
}

export function newTtftPrediction(): TtftPrediction {
  return { ownTokens: 0, deviceCreditTokens: 0, hostOnlyCreditTokens: 0, evictedHitTokens: 0, queuedTokens: 0, queueMs: 0, ownMs: 0, predictedMs: 0 };
}

/** This request's prefill on a candidate, in recompute-equivalent tokens (never below 0). */
export function ownPrefillTokens(inputTokens: number, deviceHitTokens: number, hostOnlyHitTokens: number, hostTokenCost: number): number {
  const device = Math.min(Math.max(0, deviceHitTokens), inputTokens);
  const host = Math.min(Math.max(0, hostOnlyHitTokens), inputTokens - device);
  return inputTokens - device - host + hostTokenCost * host;
}

/** The prediction for one candidate, into `out` (returned). */
export function predictTtft(t: TtftTerms, out: TtftPrediction): TtftPrediction {
  if (!(t.tokensPerMs > 0)) throw new RangeError(`tokensPerMs must be > 0, got ${t.tokensPerMs}`);
  const unknown = Math.max(0, t.waitingUnknown * t.tokensPerWaiting - t.tokensPerMs * Math.max(0, t.sinceReportMs));
  const queued = Math.max(0, t.knownTokens - Math.max(0, t.workedOffTokens)) + unknown;
  const device = Math.max(0, t.deviceHitTokens);
  const kept = survivingHitTokens(device, Math.max(queued, t.aheadTokens), t.deviceCapacityTokens);
  const pending = Math.max(0, t.pendingHitTokens);
  const pendingKept = survivingHitTokens(pending, t.afterPendingTokens, t.deviceCapacityTokens);
  const viewOwn = ownPrefillTokens(t.inputTokens, kept, t.hostOnlyHitTokens, t.hostTokenCost);
  const pendingOwn = ownPrefillTokens(t.inputTokens, pendingKept, 0, t.hostTokenCost);
  const byPending = pendingOwn < viewOwn;
  out.ownTokens = byPending ? pendingOwn : viewOwn;
  out.deviceCreditTokens = byPending ? pendingKept : kept;
  out.hostOnlyCreditTokens = byPending ? 0 : t.hostOnlyHitTokens;
  out.evictedHitTokens = byPending ? pending - pendingKept : device - kept;
  out.queuedTokens = queued;
  out.queueMs = queued / t.tokensPerMs;
  out.ownMs = out.ownTokens / t.tokensPerMs;
  out.predictedMs = out.queueMs + out.ownMs;
  return out;
}

/**
 * Of a Device hit of `hitTokens`, what is still on Device when the request runs after requests
 * that touch `aheadTokens` of other content, on an engine whose Device pool holds
 * `capacityTokens` (0 = unknown: the engine never evicted, so nothing says its pool is full): a
 * full LRU pool makes room by evicting its least recently used blocks, the hit among them, so the
 * hit keeps what fits beside that content. Pure.
 */
export function survivingHitTokens(hitTokens: number, aheadTokens: number, capacityTokens: number): number {
  if (!(capacityTokens > 0)) return hitTokens;
  return Math.min(hitTokens, Math.max(0, capacityTokens - aheadTokens));
}

/**
 * What an engine has prefilled of the request at the head of its queue: it has been busy with it
 * for `busyMs` (since the head was sent or since the engine's last first token, whichever is
 * later) at `tokensPerMs`, and cannot have done more than the head's `headTokens` without its
 * first token coming back. An engine prefills its queue in arrival order (one at a time, or a
 * batch whose budget the head fills first), so the rest of the queue still waits in full.
 */
export function workedOffTokens(headTokens: number, busyMs: number, tokensPerMs: number): number {
  if (!(headTokens > 0) || !(busyMs > 0) || !(tokensPerMs > 0)) return 0;
  return Math.min(headTokens, tokensPerMs * busyMs);
}
