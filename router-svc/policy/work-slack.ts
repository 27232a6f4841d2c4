/**
 * TTFT's near-tie rule (`--ttft_work_slack`, `--ttft_long_hit_tokens`): predictions close to the
 * soonest count as equal, and the least prefill work among them wins. Pure: scores and work in,
 * the losers' scores set to +Infinity (their explanations keep their true score). O(count), no
 * allocation.
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
