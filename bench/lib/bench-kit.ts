/**
 * Plumbing every benchmark repeats: the `--quick` switch, warm-up rounds dropped before the timed
 * ones, order statistics over latency samples, and one JSON line per result on stdout.
 * Used by the scenario benchmarks in bench/ and the *.bench.ts micro-benchmarks beside the code.
 */

/** True when the benchmark was started with `--quick` (shorter runs, smaller loads). */
export function isQuickRun(): boolean {
  return process.argv.includes('--quick');
}

/**
 * Runs `warmupRounds + timedRounds` rounds in order and returns the results of the timed ones.
 * `round` gets the timed round's index (0-based), or null during warm-up.
 */
export function runRounds<T>(warmupRounds: number, timedRounds: number, round: (timedRound: number | null) => T): T[] {
  const results: T[] = [];
  for (let r = 0; r < warmupRounds + timedRounds; r++) {
    const timedRound = r < warmupRounds ? null : r - warmupRounds;
    const result = round(timedRound);
    if (timedRound !== null) results.push(result);
  }
  return results;
}

/** The `p` quantile (0..1, nearest rank from below) of ascending `sorted`; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
}

/** The median of `xs` (upper middle for an even count); `xs` is left unsorted. */
export function median(xs: readonly number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[sorted.length >> 1]!;
}

/** Writes one result as a JSON line on stdout. */
export function emitResult(line: Record<string, unknown>): void {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const gc = (globalThis as { gc?: () => void }).gc;

/** True when node runs with --expose-gc, so `retainedBytes` excludes uncollected garbage. */
export function hasExposedGc(): boolean {
  return gc !== undefined;
}

/**
 * Heap plus ArrayBuffer bytes still held: after two full GCs when node runs with --expose-gc,
 * otherwise including garbage not yet collected.
 */
export function retainedBytes(): number {
  if (gc) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  return m.heapUsed + m.arrayBuffers;
}
