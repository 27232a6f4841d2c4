// Reference model of one kv-events stream that is strict about the publisher obligations
// (§11): replaying a simulator's events through it fails at the first event that breaks one.
import { expect } from 'chai';
import { TIER_DEVICE, TIER_HOST } from '../../../shared/keys/tier-bits.js';
import { hashToU64 } from '../../../tools/engine-sim/wire-encoding.js';
import type { WireEvent, WireHash, WireSnapshotBlock } from '../../../tools/engine-sim/wire-types.js';

export const GPU = TIER_DEVICE;
export const CPU = TIER_HOST;

interface RefBlock {
  parent: bigint | null;
  tokens: number[];
  tiers: number;
}

/**
 * Reference model of a stream, strict about §11: throws on the first event that breaks a
 * publisher obligation, so a test fails at the exact event.
 */
export class ObligationChecker {
  readonly blocks = new Map<bigint, RefBlock>();
  /** Hashes ever stored on Device (§11.6: Host copies only of blocks that were on Device). */
  private readonly everOnDevice = new Set<bigint>();

  /** `hostAfterDevice` off for a full-state batch, which restates Host-only blocks directly. */
  constructor(
    private readonly blockSize: number,
    private readonly hostAfterDevice = true,
  ) {}

  tiers(h: bigint): number {
    return this.blocks.get(h)?.tiers ?? 0;
  }

  apply(events: readonly WireEvent[]): void {
    for (const raw of events) {
      expect(Array.isArray(raw), 'map events only (§11.3)').to.equal(false);
      const e = raw as Record<string, unknown>;
      const tier = e.medium === 'cpu' ? CPU : e.medium === 'gpu' ? GPU : 0;
      if (e.type === 'AllBlocksCleared') {
        if (e.medium === null || e.medium === undefined) this.blocks.clear();
        else this.dropTier(tier);
        continue;
      }
      expect(tier, 'explicit medium').to.not.equal(0);
      const hashes = (e.block_hashes as WireHash[]).map(hashToU64);
      if (e.type === 'BlockRemoved') {
        for (const h of hashes) {
          expect(this.tiers(h) & tier, `§11.7 remove only what is on the tier: ${h}`).to.equal(tier);
          const b = this.blocks.get(h) as RefBlock;
          b.tiers &= ~tier;
          if (b.tiers === 0) this.blocks.delete(h);
        }
        continue;
      }
      expect(e.type).to.equal('BlockStored');
      expect(e.lora_id ?? null).to.equal(null);
      const tokens = e.token_ids as number[];
      let parent = e.parent_block_hash === null ? null : hashToU64(e.parent_block_hash as WireHash);
      expect(parent, '§11.4 nil, never 0, as a first parent').to.not.equal(0n);
      if (tokens.length === 0) {
        for (const h of hashes) {
          expect(this.tiers(h), `§11.6 tokenless only for resident hashes: ${h}`).to.not.equal(0);
          this.store(h, tier);
        }
        continue;
      }
      expect(e.block_size).to.equal(this.blockSize);
      expect(tokens.length, '§11.5 complete blocks only').to.equal(this.blockSize * hashes.length);
      if (parent !== null) expect(this.tiers(parent), `§11.5 parent resident: ${parent}`).to.not.equal(0);
      for (let i = 0; i < hashes.length; i++) {
        const h = hashes[i];
        expect(this.tiers(h), `§11.6 token-bearing only for non-resident hashes: ${h}`).to.equal(0);
        this.blocks.set(h, { parent, tokens: tokens.slice(i * this.blockSize, (i + 1) * this.blockSize), tiers: 0 });
        this.store(h, tier);
        parent = h;
      }
    }
  }

  private store(h: bigint, tier: number): void {
    const b = this.blocks.get(h) as RefBlock;
    expect(b.tiers & tier, `no duplicate store of ${h} on tier ${tier}`).to.equal(0);
    if (tier === CPU && this.hostAfterDevice) expect(this.everOnDevice.has(h), `§11.6 Host copy of ${h} only after it was on Device`).to.equal(true);
    else this.everOnDevice.add(h);
    b.tiers |= tier;
  }

  private dropTier(tier: number): void {
    for (const [h, b] of this.blocks) {
      b.tiers &= ~tier;
      if (b.tiers === 0) this.blocks.delete(h);
    }
  }

  /** §8 walk over the given engine hashes: device hits and host-only hits. */
  prefixHits(hashes: readonly bigint[]): { device: number; hostOnly: number } {
    let device = 0;
    let hostOnly = 0;
    for (const h of hashes) {
      const t = this.tiers(h);
      if (t === 0) break;
      if (t & GPU) device++;
      else hostOnly++;
    }
    return { device, hostOnly };
  }
}

export function mediaTiers(media: readonly string[]): number {
  return (media.includes('gpu') ? GPU : 0) | (media.includes('cpu') ? CPU : 0);
}

/** §6: a snapshot equals the reference state, lists each block once, parent-first. */
export function expectSnapshotMatches(snapshot: readonly WireSnapshotBlock[], ref: ObligationChecker): void {
  const seen = new Set<bigint>();
  for (const b of snapshot) {
    const h = hashToU64(b.block_hash);
    expect(seen.has(h), `block ${h} listed once`).to.equal(false);
    const r = ref.blocks.get(h);
    expect(r, `snapshot block ${h} is resident`).to.not.equal(undefined);
    const parent = b.parent_block_hash === null ? null : hashToU64(b.parent_block_hash);
    expect(parent).to.equal(r?.parent);
    if (parent !== null && ref.tiers(parent) !== 0) expect(seen.has(parent), `parent ${parent} before ${h}`).to.equal(true);
    expect([...b.token_ids]).to.deep.equal(r?.tokens);
    expect(mediaTiers(b.media)).to.equal(r?.tiers);
    seen.add(h);
  }
  expect(seen.size).to.equal(ref.blocks.size);
}
