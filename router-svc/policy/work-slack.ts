/**
 * TTFT's near-tie rules. `--ttft_work_slack`, `--ttft_long_hit_tokens`: predictions close to the
 * soonest count as equal, and the least prefill work among them wins. `--ttft_tie_tolerance`:
 * what is left within a few percent of its soonest is an exact tie, for the caller's tie rule.
 * Pure: scores and work in, the losers' scores set to +Infinity and the tied ones to their
 * minimum (their explanations keep their true score). O(count), no allocation.
 */

/** How much wider the slack grows, at most, for a candidate that saves a long recompute (× the slack). */
export const LONG_HIT_SLACK_GROWTH = 2;

/**
 * The fraction of the soonest prediction within which a candidate saving `savedTokens` of prefill
 * against the soonest counts as equal to it: `slack · (1 + 2 · min(1, saved / longHitTokens))`,
 * so up to three times the slack once a cached prefix spares `longHitTokens` of recompute. Why it
 * grows: a recompute costs the cluster its length in prefill time, which every request queued
 * after it on that engine waits for, so a long one is worth a longer wait at the engine holding the
 * prefix; a short one is not (the slack alone decides). `longHitTokens` 0 keeps the plain slack.
 */
export function slackFor(slack: number, savedTokens: number, longHitTokens: number): number {
  if (longHitTokens <= 0 || savedTokens <= 0) return slack;
  return slack * (1 + LONG_HIT_SLACK_GROWTH * Math.min(1, savedTokens / longHitTokens));
}

/**
 * Among the first `count` candidates, those predicted within their slack (`slackFor`, saved work
 * counted against the soonest candidate's) of the soonest prediction count as equal, and only the
 * least `work` among them stays: every other score becomes +Infinity, so the minimum left is the
 * pick (exact ties follow the caller's tie rule). Candidates beyond their slack go too: they are
 * later than the soonest, which is within its own slack, and a wider slack for less work must not
 * let a later candidate with more work through. Returns the soonest candidate's index (-1 for none).
 */
export function keepLeastWork(scores: Float64Array, work: Float64Array, count: number, slack: number, longHitTokens: number): number {
  if (count === 0) return -1;
  let soonest = 0;
  for (let i = 1; i < count; i++) if (scores[i]! < scores[soonest]!) soonest = i;
  const min = scores[soonest]!;
  const soonestWork = work[soonest]!;
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) if (work[i]! < least && withinSlack(scores[i]!, min, slack, soonestWork - work[i]!, longHitTokens)) least = work[i]!;
  for (let i = 0; i < count; i++) {
    if (work[i]! !== least || !withinSlack(scores[i]!, min, slack, soonestWork - work[i]!, longHitTokens)) scores[i] = Number.POSITIVE_INFINITY;
  }
  return soonest;
}

function withinSlack(score: number, soonestMs: number, slack: number, savedTokens: number, longHitTokens: number): boolean {
  return score <= soonestMs * (1 + slackFor(slack, savedTokens, longHitTokens));
}

/**
 * Among the first `count` scores (what keepLeastWork left: +Infinity for the dropped), those
 * within `tolerance` of the smallest become equal to it, so the caller's exact-tie rule picks
 * among them (CAR's: fewest Device blocks, then rotation); returns how many that is (0 when the
 * tolerance is 0 or every score is +Infinity). Why: what keepLeastWork leaves has equal prefill
 * work, so the predictions differ by the engines' queues and learned throughputs, and two idle
 * engines of one kind differ only by the throughput estimates' noise (a few percent, which the
 * estimate's errors, not the engines, make). Left to decide, that noise sent new shared prefixes to
 * an engine already holding another (2026-12-06, multi_turn with four routers: one engine serving
 * two system prompts' users in three schedules of ten), where the tie rule places them on the
 * engine holding least, as CAR does.
 */
export function tieWithin(scores: Float64Array, count: number, tolerance: number): number {
  if (!(tolerance > 0)) return 0;
  let min = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) if (scores[i]! < min) min = scores[i]!;
  if (min === Number.POSITIVE_INFINITY) return 0;
  const bound = min * (1 + tolerance);
  let tied = 0;
  for (let i = 0; i < count; i++) {
    if (scores[i]! > bound) continue;
    scores[i] = min;
    tied++;
  }
  return tied;
}
