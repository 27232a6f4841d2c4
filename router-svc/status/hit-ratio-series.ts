/**
 * The status page's hit-ratio series: the mean kv_hit_ratio of the chosen prefill per second, over
 * the last couple of minutes.
 *
 * Hot path: `record` runs once per routing decision (RouterMetrics.decision) and costs one typed
 * array write and a counter increment — no clock read, no allocation. Time enters only through a
 * once-a-second tick (an unref'd timer, off the request path) that averages the decisions written
 * since the previous tick into one per-second point. The timer starts with the first decision and
 * stops itself after a window of idle seconds, so an idle router (or a test that never closes its
 * metrics) keeps no timer running.
 *
 * Bounds: the decision ring holds `decisionCapacity` ratios; a second with more decisions than that
 * averages its latest `decisionCapacity` ones (its `count` stays exact).
 */

/** One second of decisions. */
export interface HitRatioPoint {
  /** Wall-clock time of the tick that closed the second (ms since the epoch). */
  readonly tMs: number;
  /** Mean kv_hit_ratio of the second's decisions; 0 when there were none. */
  readonly mean: number;
  /** Highest kv_hit_ratio of the second (0 when none). */
  readonly max: number;
  /** Decisions in the second. */
  readonly count: number;
}

export interface HitRatioSeriesOptions {
  /** Per-second points kept (default 120: two minutes). */
  readonly windowSeconds?: number;
  /** Decisions kept between two ticks, rounded up to a power of two (default 4096). */
  readonly decisionCapacity?: number;
  /** Tick period (default 1000 ms); 0 = no timer, the caller calls `tick` (tests). */
  readonly intervalMs?: number;
  /** Wall clock of the ticks (default Date.now). */
  readonly clock?: () => number;
}

export class HitRatioSeries {
  readonly intervalMs: number;
  private readonly ratios: Float64Array;
  private readonly mask: number;
  /** Decisions recorded since start (a double: exact far beyond any uptime). */
  private written = 0;
  /** `written` at the last tick. */
  private aggregated = 0;
  private readonly clock: () => number;
  // Per-second ring of points.
  private readonly times: Float64Array;
  private readonly means: Float64Array;
  private readonly maxima: Float64Array;
  private readonly counts: Float64Array;
  private points = 0;
  private timer: NodeJS.Timeout | null = null;
  private idleTicks = 0;

  constructor(opts: HitRatioSeriesOptions = {}) {
    const windowSeconds = opts.windowSeconds ?? 120;
    const capacity = opts.decisionCapacity ?? 4096;
    if (!(Number.isInteger(windowSeconds) && windowSeconds > 0)) throw new RangeError(`windowSeconds must be a positive integer, got ${windowSeconds}`);
    if (!(Number.isInteger(capacity) && capacity > 0)) throw new RangeError(`decisionCapacity must be a positive integer, got ${capacity}`);
    let size = 1;
    while (size < capacity) size *= 2;
    this.ratios = new Float64Array(size);
    this.mask = size - 1;
    this.times = new Float64Array(windowSeconds);
    this.means = new Float64Array(windowSeconds);
    this.maxima = new Float64Array(windowSeconds);
    this.counts = new Float64Array(windowSeconds);
    this.intervalMs = opts.intervalMs ?? 1000;
    this.clock = opts.clock ?? Date.now;
  }

  /** Hot path: one decision's kv_hit_ratio (in [0, 1]). */
  record(ratio: number): void {
    this.ratios[this.written & this.mask] = ratio;
    this.written++;
    if (this.timer === null && this.intervalMs > 0) this.startTicking();
  }

  /** Closes the current second: averages the decisions since the previous tick into one point. */
  tick(nowMs: number = this.clock()): void {
    const end = this.written;
    const count = end - this.aggregated;
    const from = Math.max(this.aggregated, end - this.ratios.length);
    let sum = 0;
    let max = 0;
    for (let i = from; i < end; i++) {
      const r = this.ratios[i & this.mask]!;
      sum += r;
      if (r > max) max = r;
    }
    this.aggregated = end;
    const slot = this.points % this.times.length;
    this.times[slot] = nowMs;
    this.means[slot] = end > from ? sum / (end - from) : 0;
    this.maxima[slot] = max;
    this.counts[slot] = count;
    this.points++;
    this.idleTicks = count === 0 ? this.idleTicks + 1 : 0;
    // A full window of idle seconds says all there is to say: stop until the next decision.
    if (this.idleTicks >= this.times.length) this.stopTicking();
  }

  /** The kept points, oldest first. Allocates; for the status endpoint, not the request path. */
  series(): HitRatioPoint[] {
    const n = Math.min(this.points, this.times.length);
    const out: HitRatioPoint[] = new Array<HitRatioPoint>(n);
    for (let k = 0; k < n; k++) {
      const slot = (this.points - n + k) % this.times.length;
      out[k] = { tMs: this.times[slot]!, mean: this.means[slot]!, max: this.maxima[slot]!, count: this.counts[slot]! };
    }
    return out;
  }

  /** Decisions recorded since start. */
  get decisions(): number {
    return this.written;
  }

  /** Stops the tick timer (it also stops by itself when idle). */
  close(): void {
    this.stopTicking();
  }

  private startTicking(): void {
    this.idleTicks = 0;
    this.timer = setInterval(() => this.tick(), this.intervalMs);
    this.timer.unref();
  }

  private stopTicking(): void {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
  }
}
