/**
 * One instance's prefix credit from a DP-minimum match (routing.md "CAR"): the minimum over its DP
 * ranks of device + w · host_only hit tokens, and why it is 0 when the instance gets none. CAR
 * reads it with w = --car_host_hit_weight; TTFT with w = 1 − --ttft_host_token_cost, where the
 * minimum credit is the largest prefill cost (the router chooses an instance, not its rank).
 */
import type { RouterInstance, StreamHits } from '../viewcache/view-cache.js';
import { streamMatchesInstance } from './stream-identity.js';

/** Why an instance got no prefix credit (explanation notes). */
const NOTE_STALE = 'directory view stale: no cache credit';
const NOTE_NO_STREAM = 'a DP rank has no stream: no cache credit';
const NOTE_UNSYNCHRONIZED = 'a DP rank is not synchronized: no cache credit';
const NOTE_INCARNATION = 'stream incarnation differs from the registered one: no cache credit';

/** The per-instance result of the DP-rank minimum (a caller's scratch object, reused). */
export interface InstanceHit {
  hit: number;
  device: number;
  hostOnly: number;
  note: string | null;
  /** Block size of the credited stream (0 when none is): pending credit floors to it. */
  blockSize: number;
  /** The credited stream's Device pool as its evictions show it, in tokens (0: it never evicted, or none is credited). */
  deviceEvictionTokens: number;
}

export function newInstanceHit(): InstanceHit {
  return { hit: 0, device: 0, hostOnly: 0, note: null, blockSize: 0, deviceEvictionTokens: 0 };
}

/** `out` as no credit at all (no token ids to match). */
export function noInstanceHit(out: InstanceHit): void {
  out.hit = 0;
  out.device = 0;
  out.hostOnly = 0;
  out.note = null;
  out.blockSize = 0;
  out.deviceEvictionTokens = 0;
}

/**
 * Minimum over the DP ranks of `inst` of device + w · host_only, reading the streams of `hits`
 * (sorted by instance name, then rank, like the candidates) from `from` on; returns where the
 * next (later-named) candidate's streams can start. A missing or unsynchronized rank, a stale
 * view or a stream of another incarnation gives 0 with the reason in `out.note`.
 */
export function instanceHit(inst: RouterInstance, hits: StreamHits, from: number, hostWeight: number, out: InstanceHit): number {
  const streams = hits.streams;
  let j = from;
  while (j < hits.count && streams[j]!.instanceName < inst.name) j++;
  let rank = 0;
  let min = Number.POSITIVE_INFINITY;
  let minDevice = 0;
  let minHostOnly = 0;
  let blockSize = 0;
  let evictionTokens = 0;
  let note: string | null = hits.stale ? NOTE_STALE : null;
  for (; j < hits.count && streams[j]!.instanceName === inst.name; j++) {
    const s = streams[j]!;
    const r = s.dpRank;
    // A rank beyond dp_size or a repeated one is not one of the instance's ranks.
    if (r >= inst.dpSize || r < rank) continue;
    if (r > rank) note ??= NOTE_NO_STREAM;
    rank = r + 1;
    if (note !== null) continue;
    if (hits.credited[j] !== 1) {
      note = NOTE_UNSYNCHRONIZED;
      continue;
    }
    if (!streamMatchesInstance(s, inst)) {
      note = NOTE_INCARNATION;
      continue;
    }
    const device = hits.deviceHitTokens[j]!;
    const hostOnly = hits.hostOnlyHitTokens[j]!;
    const v = device + hostWeight * hostOnly;
    if (v < min) {
      min = v;
      minDevice = device;
      minHostOnly = hostOnly;
      blockSize = s.blockSize;
      evictionTokens = s.deviceEvictionBlocks * s.blockSize;
    }
  }
  if (rank < inst.dpSize) note ??= NOTE_NO_STREAM;
  if (note !== null || min === Number.POSITIVE_INFINITY) {
    out.hit = 0;
    out.device = 0;
    out.hostOnly = 0;
    out.blockSize = 0;
    out.deviceEvictionTokens = 0;
  } else {
    out.hit = min;
    out.device = minDevice;
    out.hostOnly = minHostOnly;
    out.blockSize = blockSize;
    out.deviceEvictionTokens = evictionTokens;
  }
  out.note = note;
  return j;
}
