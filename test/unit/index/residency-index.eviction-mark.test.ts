// ResidencyIndex.deviceEvictionBlocks: the TTFT policy's estimate of an engine's Device pool
// (ttft-cost.ts survivingHitTokens). An engine evicts only when its pool is full, so the Device
// blocks a stream holds when it loses one are what the pool holds; a stream that never lost one
// gives 0 (unknown), and a reset (AllBlocksCleared, a new registration) forgets the mark.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';

const BS = 4;

describe('ResidencyIndex.deviceEvictionBlocks (the pool size evictions show)', () => {
  let hasher: ContentKeyHasher;
  const chain = (doc: number, blocks: number): Uint8Array => hasher.chain(Array.from({ length: blocks * BS }, (_, i) => doc * 100_000 + i), BS);
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(7);
  });

  it('is 0 while blocks only arrive, then the count held when one left Device', () => {
    const index = new ResidencyIndex(BS, hasher);
    const s = index.addStream();
    const a = chain(1, 10);
    index.setTiers(s, a, new Uint8Array(10).fill(1));
    expect(index.deviceEvictionBlocks(s)).to.equal(0);
    // The oldest block leaves: the pool held 10.
    index.setTiers(s, a.subarray(9 * 16), new Uint8Array([0]));
    expect([index.deviceBlocks(s), index.deviceEvictionBlocks(s)]).to.deep.equal([9, 10]);
    // Fewer blocks at a later eviction keep the high mark; a Device→Host offload counts as leaving Device.
    index.setTiers(s, a.subarray(8 * 16, 9 * 16), new Uint8Array([2]));
    expect(index.deviceEvictionBlocks(s)).to.equal(10);
    // A Host-only block leaving is not a Device eviction.
    index.setTiers(s, a.subarray(8 * 16, 9 * 16), new Uint8Array([0]));
    expect(index.deviceEvictionBlocks(s)).to.equal(10);
  });

  it('each stream keeps its own mark; a clear and a reused slot start unknown again', () => {
    const index = new ResidencyIndex(BS, hasher);
    const s0 = index.addStream();
    const s1 = index.addStream();
    const a = chain(1, 6);
    index.setTiers(s0, a, new Uint8Array(6).fill(1));
    index.setTiers(s1, a, new Uint8Array(6).fill(3));
    index.setTiers(s0, a.subarray(5 * 16), new Uint8Array([0]));
    expect([index.deviceEvictionBlocks(s0), index.deviceEvictionBlocks(s1)]).to.deep.equal([6, 0]);
    index.clearStream(s0);
    expect(index.deviceEvictionBlocks(s0)).to.equal(0);
    index.setTiers(s1, a.subarray(5 * 16), new Uint8Array([2]));
    expect(index.deviceEvictionBlocks(s1)).to.equal(6);
    index.removeStream(s1);
    expect(index.addStream()).to.equal(s1);
    expect(index.deviceEvictionBlocks(s1)).to.equal(0);
  });
});
