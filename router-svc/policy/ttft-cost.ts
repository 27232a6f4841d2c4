/**
 * The TTFT policy's cost (issue 27): when would this request's first token come out of a
 * candidate? Prefill work is counted in tokens, the engine's speed in tokens per ms:
 *
 *   own_tokens    = input − device_hit − host_only_hit + c · host_only_hit                 tokens
 *   queued_tokens = max(0, known_tokens − worked_off)
 *                   + max(0, waiting_unknown · tokens_per_waiting − θ · since_report_ms)    tokens
 *   predicted_ms  = (queued_tokens + own_tokens) / θ                                       ms
 *
 * - own_tokens: this request's prefill; a Device hit is free, a Host-only hit costs c (the reload
 *   cost, `--ttft_host_token_cost`) of a recomputed token.
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
 *
 * Pure; writes into a caller's scratch object.
 */

export interface TtftTerms {
  /** Tokens of the request (its token ids, or prompt_tokens without them). */
  readonly inputTokens: number;
  /** Prefix credit on the candidate (Device; a block on both tiers counts as Device). */
  readonly deviceHitTokens: number;
  readonly hostOnlyHitTokens: number;
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
}

export interface TtftPrediction {
  ownTokens: number;
  queuedTokens: number;
  queueMs: number;
  ownMs: number;
  predictedMs: number;
}

export function newTtftPrediction(): TtftPrediction {
  return { ownTokens: 0, queuedTokens: 0, queueMs: 0, ownMs: 0, predictedMs: 0 };
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
  const own = ownPrefillTokens(t.inputTokens, t.deviceHitTokens, t.hostOnlyHitTokens, t.hostTokenCost);
  const unknown = Math.max(0, t.waitingUnknown * t.tokensPerWaiting - t.tokensPerMs * Math.max(0, t.sinceReportMs));
  const queued = Math.max(0, t.knownTokens - Math.max(0, t.workedOffTokens)) + unknown;
  out.ownTokens = own;
  out.queuedTokens = queued;
  out.queueMs = queued / t.tokensPerMs;
  out.ownMs = own / t.tokensPerMs;
  out.predictedMs = out.queueMs + out.ownMs;
  return out;
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
