/**
 * CAR's P-side tie rule (issue 15, which wins over routing.md "Ties" where they differ): among
 * candidates with exactly equal score_P, the one with the fewest Device blocks resident in the
 * view wins; only those still equal rotate. score_P itself is unchanged.
 *
 * Why residency and not the load report's gpu_cache_usage_perc:
 * - agreement and freshness: residency comes with the KV events, in the ordered view deltas every
 *   replica applies alike (tens of ms behind the engine), where a load report is up to a
 *   heartbeat (500 ms) or a scrape old — longer than the burst of cold prompts the rule is for;
 * - meaning: vLLM's usage is 1 − free / total blocks, and cached blocks no running request holds
 *   sit in the free queue, so an idle engine holding another prompt's conversations reports
 *   about 0. Resident blocks are what a new prompt would evict.
 * The count is per DP rank (the instance's synchronized streams of its current registration,
 * summed, over dp_size), so instances of different DP sizes compare by what one rank holds. A
 * stale view gives no key (its residency is as old as its hit credit, which it no longer gives):
 * rotation.
 */
import type { RouterInstance, RouterStream, ViewCache } from '../viewcache/view-cache.js';
import { streamMatchesInstance } from './stream-identity.js';
import { countMinimumTies, pickMinimumWithRotation, type RotationCursor } from './pick-minimum.js';
import type { TieBreakExplanation } from './policy-types.js';

/**
 * The tie key of every candidate of one side: the Device blocks one DP rank holds, as the view's
 * residency says (the instance's counted streams summed, over dp_size), with the streams
 * each candidate counts (synchronized, a rank it has, its current registration) kept until the
 * view's stream or instance revision changes: a tie then costs one read per counted stream, not
 * a stream lookup and an identity check each (a sixth of a tied CAR decision's time before).
 * Residency changes do not change which streams count, only their counts, which are read anew.
 */
export class DeviceUsageKeys {
  /**
   * Per candidate side (one per model scope: candidates.ts keeps each scope's side array until its
   * next rebuild), the streams each candidate counts, for the revisions they were read at.
   */
  private readonly counted = new WeakMap<readonly RouterInstance[], CountedStreams>();

  /** Fills keys[0..side.length) with each candidate's Device blocks per rank (the tie key). */
  fill(view: ViewCache, side: readonly RouterInstance[], keys: Float64Array): void {
    let c = this.counted.get(side);
    if (c === undefined || c.view !== view || c.instancesRevision !== view.instancesRevision || c.streamsRevision !== view.streamsRevision) {
      c = {
        view,
        instancesRevision: view.instancesRevision,
        streamsRevision: view.streamsRevision,
        streams: side.map((inst) => view.streamsOf(inst.name).filter((s) => s.synchronized && s.dpRank < inst.dpSize && streamMatchesInstance(s, inst))),
      };
      this.counted.set(side, c);
    }
    for (let i = 0; i < side.length; i++) {
      const streams = c.streams[i]!;
      let blocks = 0;
      for (let j = 0; j < streams.length; j++) blocks += streams[j]!.deviceBlocks;
      keys[i] = blocks / side[i]!.dpSize;
    }
  }
}

interface CountedStreams {
  readonly view: ViewCache;
  readonly instancesRevision: number;
  readonly streamsRevision: number;
  readonly streams: RouterStream[][];
}

/**
 * The route answer's account of a tie at the smallest score_P, null when there was none: who
 * tied, what the tie key read for each (absent on a stale view), and whether the key decided or
 * the rotation did. Allocates only on ties.
 */
export function tieBreakExplanation(
  side: readonly RouterInstance[],
  scores: ArrayLike<number>,
  keys: ArrayLike<number> | null,
  pickedScore: number,
  cursor: RotationCursor,
): TieBreakExplanation | null {
  if (cursor.tied < 2) return null;
  const tied: TieBreakExplanation['tied'] = [];
  for (let i = 0; i < side.length; i++) {
    if (scores[i] !== pickedScore) continue;
    tied.push(keys === null ? { instance_name: side[i]!.name } : { instance_name: side[i]!.name, device_blocks_per_rank: keys[i]! });
  }
  return {
    decided_by: cursor.equal === 1 ? 'kv_usage' : 'rotation',
    rotated_among: cursor.equal,
    tied,
    ...(keys === null ? { note: 'directory view stale: no usage key' } : {}),
  };
}

/**
 * The P side's pick under this rule: the smallest score; exact ties to the fewest Device blocks
 * per rank (read only when the smallest score is shared and the view is fresh), then rotation.
 * Keeps its scratch between decisions; allocates only the explanation of a tie.
 */
export class PrefillPick {
  private readonly deviceUsage = new DeviceUsageKeys();
  private tieKeys = new Float64Array(16);
  /** The last pick's account of a tie at its smallest score; null when there was none. */
  tie: TieBreakExplanation | null = null;

  /** Index into `side` of the winner of scores[0..side.length). */
  pick(scores: Float64Array, side: readonly RouterInstance[], names: readonly string[], cursor: RotationCursor, view: ViewCache, stale: boolean): number {
    let keys: Float64Array | null = null;
    if (countMinimumTies(scores, side.length) > 1 && !stale) {
      if (this.tieKeys.length < side.length) this.tieKeys = new Float64Array(side.length * 2);
      this.deviceUsage.fill(view, side, this.tieKeys);
      keys = this.tieKeys;
    }
    const i = pickMinimumWithRotation(scores, side.length, names, cursor, keys);
    this.tie = tieBreakExplanation(side, scores, keys, scores[i]!, cursor);
    return i;
  }
}
