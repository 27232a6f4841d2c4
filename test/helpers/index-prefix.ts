// kv-events §8 prefix walk over ONE stream index, read literally from its per-key residency
// (residencyOf): from block 0, stop at the first key with no tier; a key on both tiers counts as
// Device. The services match through the shared group index (shared/index); tests of the
// per-stream index's residency use this reference walk.
import { ServedResidency } from '../../directory-svc/index/served-residency.js';
import type { StreamIndex } from '../../directory-svc/index/stream-index.js';
import type { GroupSlot } from '../../shared/index/residency-groups.js';
import { PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';

/** Result of a walk, in blocks; reusable blocks = deviceBlocks + hostOnlyBlocks (§8). */
export interface PrefixHit {
  deviceBlocks: number;
  hostOnlyBlocks: number;
}

export function walkPrefix(index: StreamIndex, keys: Uint8Array, blockCount: number, out: PrefixHit): void {
  let device = 0;
  let hostOnly = 0;
  const blocks = Math.min(blockCount, keys.length >>> 4);
  for (let b = 0; b < blocks; b++) {
    const t = index.residencyOf(keys, b << 4);
    if (t === 0) break;
    if (t & 1) device++;
    else hostOnly++;
  }
  out.deviceBlocks = device;
  out.hostOnlyBlocks = hostOnly;
}

/** §8 hits of `tokens` (keyed under `identity`, cache-identity §3) on one stream's slot of its shared group (the services' match path). */
export function slotHits(r: GroupSlot, tokens: ArrayLike<number>, identity: KeyIdentity = PLAIN_IDENTITY): PrefixHit {
  r.group.clearCandidates();
  r.group.addCandidate(r.slot);
  r.group.match(tokens, identity);
  return { deviceBlocks: r.group.deviceHitBlocks(r.slot), hostOnlyBlocks: r.group.hostOnlyHitBlocks(r.slot) };
}

/** §8 hits of `tokens` on `index` mirrored into a group of its own (ServedResidency.of). */
export function groupHits(index: StreamIndex, tokens: ArrayLike<number>, identity: KeyIdentity = PLAIN_IDENTITY): PrefixHit {
  return slotHits(ServedResidency.of(index), tokens, identity);
}
