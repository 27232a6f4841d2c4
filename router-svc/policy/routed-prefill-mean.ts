/**
 * What one request waiting at an engine is worth in prefill tokens, for the TTFT policy's reading
 * of a load report (ttft-cost.ts tokens_per_waiting): an engine reports how many requests wait,
 * not how long they are. The estimate is the mean prefill (own_tokens) of the requests this
 * router recently sent there — an exponential mean over the last ~`window` decisions, per engine
 * — falling back to the same mean over every engine for one it has sent nothing yet, and to the
 * caller's guess before any decision. Behind a load balancer each replica sees a fair sample of
 * the traffic, so replicas agree on it.
 *
 * Pure; O(1) per decision and per read.
 */

export const ROUTED_PREFILL_WINDOW = 16;

export class RoutedPrefillMean {
  private readonly alpha: number;
  private readonly perEngine = new Map<string, number>();
  private overall = -1;

  constructor(window: number = ROUTED_PREFILL_WINDOW) {
    if (!(window >= 1 && Number.isFinite(window))) throw new RangeError(`window must be a finite number ≥ 1, got ${window}`);
    this.alpha = 1 / window;
  }

  /** A decision sent `prefillTokens` (≥ 0) to `instance`. */
  record(instance: string, prefillTokens: number): void {
    if (!(prefillTokens >= 0 && Number.isFinite(prefillTokens))) return;
    const a = this.alpha;
    const overall = this.overall < 0 ? prefillTokens : this.overall;
    // An engine's first decision moves it from the overall mean, not to one sample.
    const m = this.perEngine.get(instance) ?? overall;
    this.perEngine.set(instance, m + a * (prefillTokens - m));
    this.overall = overall + a * (prefillTokens - overall);
  }

  /** Tokens per waiting request at `instance`; `fallback` before this router decided anything. */
  tokensPerRequest(instance: string, fallback: number): number {
    return this.perEngine.get(instance) ?? (this.overall < 0 ? fallback : this.overall);
  }

  /** Drops the engines not in `names`. */
  retainOnly(names: ReadonlySet<string>): void {
    for (const name of this.perEngine.keys()) if (!names.has(name)) this.perEngine.delete(name);
  }
}
