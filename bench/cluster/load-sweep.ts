/**
 * The cluster benchmark's load sweep (issue 15): offered load is a session arrival rate. Sessions
 * (a user's conversation, an agent's branch) start as a Poisson process of `rate` per second and
 * then run as closed-loop clients (think/tool time between turns), so the offered request rate is
 * about rate × turns per session. The knee is the rate at which RR's TTFT p90 first exceeds
 * KNEE_FACTOR × its unloaded value, found by stepping the rate up geometrically and interpolating
 * linearly between the last step below and the first step above; the sweep then runs every
 * policy at SWEEP_FRACTIONS of that rate. Pure helpers here; cluster.bench.ts runs them.
 */
import { seededRandom } from '../lib/seeded-random.js';

export const KNEE_FACTOR = 5;
export const SWEEP_FRACTIONS = [0.5, 0.7, 0.9] as const;

/** Start offsets (ms from the run start) of `sessions` sessions arriving at `ratePerS`. */
export function poissonStarts(sessions: number, ratePerS: number, seed: number): number[] {
  if (!(ratePerS > 0)) throw new RangeError(`rate must be positive, got ${ratePerS}`);
  const rand = seededRandom(seed);
  const out: number[] = [];
  let t = 0;
  for (let i = 0; i < sessions; i++) {
    out.push(t);
    t += (-Math.log(1 - rand()) / ratePerS) * 1000;
  }
  return out;
}

export interface KneeStep {
  readonly rate: number;
  readonly ttftP90Ms: number;
}

/**
 * The rate at which the p90 crosses `limitMs`, interpolated between the bracketing steps (sorted
 * by rate); `base` is the unloaded point the first step is bracketed with. null when no step
 * reaches the limit.
 */
export function kneeRate(base: KneeStep, steps: readonly KneeStep[], limitMs: number): number | null {
  let below = base;
  for (const s of steps) {
    if (s.ttftP90Ms >= limitMs) {
      if (s.ttftP90Ms === below.ttftP90Ms) return s.rate;
      const f = Math.min(1, Math.max(0, (limitMs - below.ttftP90Ms) / (s.ttftP90Ms - below.ttftP90Ms)));
      return below.rate + f * (s.rate - below.rate);
    }
    below = s;
  }
  return null;
}

/** Where repetition `rep`'s schedule starts in the population, and what it adds to the arrival seed. */
export interface RepSchedule {
  readonly from: number;
  readonly seedOffset: number;
}

/**
 * Repetition `rep` (of `reps`)'s schedule of `n` sessions out of `population`. Repetition 0 is the
 * sweep's own (the first n, the rate's seed); each later one takes other sessions and other
 * arrival times, so the pooled repetitions sample the workload instead of replaying one schedule:
 * on the engines' virtual clock a replay is nearly deterministic, and one schedule's p90 is a few
 * requests' luck. Generated sessions rotate through the population (wrapping). A trace keeps its
 * own times and order (a request's prefix is an earlier one's), so each repetition is a stretch of
 * n consecutive requests, their starts spread evenly over the trace (overlapping when it holds
 * fewer than `reps` stretches; all the same when it holds one).
 */
export function scheduleOf(population: number, n: number, rep: number, reps: number, trace: boolean): RepSchedule {
  if (!(Number.isInteger(population) && population > 0 && Number.isInteger(n) && n > 0 && n <= population && Number.isInteger(reps) && reps > 0 && Number.isInteger(rep) && rep >= 0 && rep < reps)) {
    throw new RangeError(`scheduleOf: expected integers 0 < n ≤ population and 0 ≤ rep < reps, got n ${n}, population ${population}, rep ${rep}, reps ${reps}`);
  }
  if (!trace) return { from: (rep * n) % population, seedOffset: rep * REP_SEED_STRIDE };
  return { from: reps === 1 ? 0 : Math.round((rep * (population - n)) / (reps - 1)), seedOffset: 0 };
}

/**
 * `n` items of `items[0..population)` from `from` on, wrapping past `population` to its start (a
 * generated repetition's sessions, scheduleOf). A copy; `from` in [0, population), n ≤ population.
 */
export function wrappingSlice<T>(items: readonly T[], population: number, from: number, n: number): T[] {
  if (from + n <= population) return items.slice(from, from + n);
  return [...items.slice(from, population), ...items.slice(0, from + n - population)];
}

/** Far from any two rates' seed difference (SEED + rate × 1000). */
const REP_SEED_STRIDE = 7_919_000;
