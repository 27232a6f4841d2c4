/**
 * SLO_AWARE latency predictions from registered profiling data (routing.md "RR and SLO_AWARE";
 * discovery.md instance JSON): piecewise-linear interpolation, extrapolating from the last two
 * points beyond the last one.
 *
 * Where the spec is silent: below the first point the first segment is extended the same way;
 * one point is a constant; points sharing an x keep the largest y (the conservative
 * prediction); a prediction is never negative; points with a non-finite or missing coordinate
 * are ignored. TPOT points `[batch_size, total_tokens, tpot_ms]` are interpolated over batch
 * size alone (the view carries no token count of the running batch).
 */
import type { RouterInstance } from '../viewcache/view-cache.js';

/** y over x, sorted by x, distinct x. */
export interface LinearProfile {
  readonly xs: Float64Array;
  readonly ys: Float64Array;
}

/** Builds a profile from (x, y) column indexes of `points`; null when no usable point. */
export function linearProfile(points: readonly (readonly number[])[], xIndex: number, yIndex: number): LinearProfile | null {
  const pairs: [number, number][] = [];
  for (const p of points) {
    const x = p[xIndex];
    const y = p[yIndex];
    if (x === undefined || y === undefined || !Number.isFinite(x) || !Number.isFinite(y)) continue;
    pairs.push([x, y]);
  }
  if (pairs.length === 0) return null;
  pairs.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  const xs: number[] = [];
  const ys: number[] = [];
  for (const [x, y] of pairs) {
    if (xs.length > 0 && xs[xs.length - 1] === x) continue; // sorted by y descending within x: the largest came first
    xs.push(x);
    ys.push(y);
  }
  return { xs: Float64Array.from(xs), ys: Float64Array.from(ys) };
}

/** y at x: interpolation inside, the nearest segment's line outside, floored at 0. */
export function predict(profile: LinearProfile, x: number): number {
  const { xs, ys } = profile;
  const n = xs.length;
  if (n === 1) return Math.max(0, ys[0]!);
  // Segment [i-1, i]: the first with xs[i] >= x, clamped to the first and last segments.
  let i = 1;
  while (i < n - 1 && xs[i]! < x) i++;
  const x0 = xs[i - 1]!;
  const x1 = xs[i]!;
  const y0 = ys[i - 1]!;
  const y1 = ys[i]!;
  return Math.max(0, y0 + ((y1 - y0) * (x - x0)) / (x1 - x0));
}

interface InstanceProfiles {
  ttft: LinearProfile | null;
  tpot: LinearProfile | null;
}

/** Parsed once per instance record (records are replaced, never mutated, by view updates). */
const byInstance = new WeakMap<RouterInstance, InstanceProfiles>();

export function profilesOf(inst: RouterInstance): InstanceProfiles {
  let p = byInstance.get(inst);
  if (p === undefined) {
    p = { ttft: linearProfile(inst.ttftProfile, 0, 1), tpot: linearProfile(inst.tpotProfile, 0, 2) };
    byInstance.set(inst, p);
  }
  return p;
}
