/**
 * Each engine's prefill throughput θ (tokens per ms), learned online for the TTFT policy from the
 * first-token times the proxy observes, starting from a configured prior.
 *
 * One observation is (work, ttft): the prefill tokens the policy predicted ahead of and for the
 * request when it chose the engine (queued_tokens + own_tokens, ttft-cost.ts), and the time from
 * the decision to the first token. Per engine, with d = 1 − 1/window:
 *
 *   W ← d·W + work,  T ← d·T + ttft,  n ← d·n + 1,  p ← d·p   (p starts at --ttft_prior_samples)
 *   θ = (p · θ₀ + n · W/T) / (p + n)                              (θ₀ before any observation)
 *
 * A ratio of sums, not a mean of ratios: a request that waited long says more about the engine's
 * speed than one served at once, whose time is mostly fixed overhead. The prior weighs as p
 * observations and fades as they come. Because the work is the policy's own estimate, θ also
 * absorbs its systematic errors (overheads, requests other routers sent): what it learns is the
 * factor that turns the policy's token counts into the times the clients see.
 *
 * Pure: durations come in as arguments, no clock. O(1) per observation and per read.
 */

export interface PrefillThroughputOptions {
  /** θ₀ in tokens per second (`--ttft_prefill_tokens_per_s`), > 0. */
  readonly priorTokensPerS: number;
  /** How many observations the prior weighs as (`--ttft_prior_samples`), ≥ 0. */
  readonly priorSamples: number;
  /** Observations the estimate averages over (`--ttft_throughput_window`), ≥ 1. */
  readonly window: number;
}

interface EngineEstimate {
  work: number;
  timeMs: number;
  samples: number;
  prior: number;
}

/** One engine's estimate as the route answer and the metrics show it. */
export interface ThroughputEstimate {
  readonly instance: string;
  readonly tokensPerS: number;
  /** Observations behind it (decayed: at most `window`). */
  readonly samples: number;
}

export class PrefillThroughput {
  private readonly priorPerMs: number;
  private readonly priorSamples: number;
  private readonly decay: number;
  private readonly engines = new Map<string, EngineEstimate>();

  constructor(opts: PrefillThroughputOptions) {
    if (!(opts.priorTokensPerS > 0 && Number.isFinite(opts.priorTokensPerS))) throw new RangeError(`priorTokensPerS must be a finite number > 0, got ${opts.priorTokensPerS}`);
    if (!(opts.priorSamples >= 0 && Number.isFinite(opts.priorSamples))) throw new RangeError(`priorSamples must be a finite number ≥ 0, got ${opts.priorSamples}`);
    if (!(opts.window >= 1 && Number.isFinite(opts.window))) throw new RangeError(`window must be a finite number ≥ 1, got ${opts.window}`);
    this.priorPerMs = opts.priorTokensPerS / 1000;
    this.priorSamples = opts.priorSamples;
    this.decay = 1 - 1 / opts.window;
  }

  /** θ of `instance` in tokens per ms (the prior for an engine never observed). */
  tokensPerMs(instance: string): number {
    const e = this.engines.get(instance);
    if (e === undefined || e.samples === 0 || !(e.timeMs > 0)) return this.priorPerMs;
    return (e.prior * this.priorPerMs + e.samples * (e.work / e.timeMs)) / (e.prior + e.samples);
  }

  /**
   * One first-token observation: `workTokens` predicted when the request was routed to
   * `instance`, answered after `ttftMs`. False (and nothing learned) when it carries no
   * information: no work (a fully cached prompt on an idle engine: its time is all overhead), or
   * a time or work that is not a finite positive number.
   */
  observe(instance: string, workTokens: number, ttftMs: number): boolean {
    if (!(workTokens >= 1 && Number.isFinite(workTokens)) || !(ttftMs > 0 && Number.isFinite(ttftMs))) return false;
    let e = this.engines.get(instance);
    if (e === undefined) this.engines.set(instance, (e = { work: 0, timeMs: 0, samples: 0, prior: this.priorSamples }));
    const d = this.decay;
    e.work = d * e.work + workTokens;
    e.timeMs = d * e.timeMs + ttftMs;
    e.samples = d * e.samples + 1;
    e.prior *= d;
    return true;
  }

  /** Observations behind `instance`'s estimate (decayed, at most `window`; 0: the prior alone). */
  samples(instance: string): number {
    return this.engines.get(instance)?.samples ?? 0;
  }

  /** Every observed engine's estimate, sorted by name. */
  estimates(): ThroughputEstimate[] {
    return [...this.engines.keys()].sort().map((instance) => ({ instance, tokensPerS: this.tokensPerMs(instance) * 1000, samples: this.engines.get(instance)!.samples }));
  }

  /** Drops the engines not in `names` (called when the candidates change, so the map follows the fleet). */
  retainOnly(names: ReadonlySet<string>): void {
    for (const name of this.engines.keys()) if (!names.has(name)) this.engines.delete(name);
  }
}
