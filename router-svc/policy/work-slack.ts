/**
 * TTFT's near-tie rules. `--ttft_work_slack`, `--ttft_slack_growth`: predictions close to the
 * soonest count as equal, and the least prefill work among them wins. `--ttft_tie_tolerance`:
 * what is left within a few percent of its soonest is an exact tie, for the caller's tie rule.
 * Pure: scores and work in, the losers' scores set to +Infinity and the tied ones to their
 * minimum (their explanations keep their true score). O(count), no allocation.
 */

/**
 * The fraction of the soonest prediction (`soonestMs`) within which a candidate whose cached
 * prefix spares `sparedMs` of prefill against the soonest candidate counts as equal to it:
 * `slack · (1 + growth · min(1, sparedMs / soonestMs))`, so up to (1 + growth) times the slack
 * once the spared prefill is as long as the soonest prediction. Why it grows: a recompute costs
 * the cluster its length in prefill time, which every request queued after it on that engine waits
 * for, so sparing one is worth a longer wait at the engine holding the prefix. Why against the
 * soonest prediction and not a token count: what a recompute is worth depends on how long it is
 * beside the wait it would spare, in any model and on any GPU — 1,536 tokens are most of an
 * agent's first step but a sliver of a 20k-token prompt, and one token count cannot say both.
 * `growth` 0 keeps the plain slack.
 */
export function slackFor(slack: number, sparedMs: number, soonestMs: number, growth: number): number {
  if (!(growth > 0) || !(sparedMs > 0) || !(soonestMs > 0)) return slack;
  return slack * (1 + growth * Math.min(1, sparedMs / soonestMs));
}

/**
 * The slack (`slackFor`) of a candidate with `work` prefill tokens against the soonest candidate,
 * predicted `soonestMs` with `soonestWork` tokens at `soonestTokensPerMs`: the tokens it spares are
 * timed as the soonest engine would recompute them. The one place that says so (keepLeastWork,
 * and the note explaining a pick).
 */
export function slackAgainstSoonest(slack: number, growth: number, soonestMs: number, soonestWork: number, soonestTokensPerMs: number, work: number): number {
  return slackFor(slack, (soonestWork - work) / soonestTokensPerMs, soonestMs, growth);
}

/**
 * Among the first `count` candidates, those predicted within their slack (`slackFor`, the work
 * they spare against the soonest candidate's at the soonest engine's throughput `tokensPerMs`) of
 * the soonest prediction count as equal, and only the least `work` (prefill tokens) among them
 * stays: every other score becomes +Infinity, so the minimum left is the pick (exact ties follow
 * the caller's tie rule). Candidates beyond their slack go too: they are later than the soonest,
 * which is within its own slack, and a wider slack for less work must not let a later candidate
 * with more work through. Returns the soonest candidate's index (-1 for none).
 */
export function keepLeastWork(scores: Float64Array, work: Float64Array, tokensPerMs: Float64Array, count: number, slack: number, growth: number): number {
  if (count === 0) return -1;
  let soonest = 0;
  for (let i = 1; i < count; i++) if (scores[i]! < scores[soonest]!) soonest = i;
  const min = scores[soonest]!;
  const soonestWork = work[soonest]!;
  const rate = tokensPerMs[soonest]!;
  let least = Number.POSITIVE_INFINITY;
  for (let i = 0; i < count; i++) if (work[i]! < least && scores[i]! <= min * (1 + slackAgainstSoonest(slack, growth, min, soonestWork, rate, work[i]!))) least = work[i]!;
  for (let i = 0; i < count; i++) {
    if (work[i]! !== least || scores[i]! > min * (1 + slackAgainstSoonest(slack, growth, min, soonestWork, rate, work[i]!))) scores[i] = Number.POSITIVE_INFINITY;
  }
  return soonest;
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
