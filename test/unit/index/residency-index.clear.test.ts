// ResidencyIndex.clearStream (a stream reset or removal, kv-events §7 / architecture.md "The view
// stream"): the cost follows the group's holder sets, not its keys, and the keys a clear leaves
// with no holder stop counting at once and are deleted by the incremental sweep as updates come.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { MAX_SLOTS } from '../../../shared/index/holder-sets.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';

const BS = 4;

describe('ResidencyIndex.clearStream (stream reset and removal)', () => {
  let hasher: ContentKeyHasher;
  const tokens = (doc: number, blocks: number): number[] => Array.from({ length: blocks * BS }, (_, i) => doc * 100_000 + i);
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(7);
  });

  /** 128 streams: a shared prefix doc 0 (64 blocks) on all, plus 512 own blocks each. */
  function fullGroup(): { index: ResidencyIndex; shared: Uint8Array; own: Uint8Array[] } {
    const index = new ResidencyIndex(BS, hasher);
    const shared = hasher.chain(tokens(0, 64), BS);
    const own: Uint8Array[] = [];
    for (let s = 0; s < MAX_SLOTS; s++) {
      expect(index.addStream()).to.equal(s);
      index.setTiers(s, shared, new Uint8Array(64).fill(1));
      const mine = hasher.chain([...tokens(0, 64), ...tokens(s + 1, 512)], BS).subarray(64 * 16);
      index.setTiers(s, mine, new Uint8Array(512).fill(s % 2 === 0 ? 1 : 3));
      own.push(mine);
    }
    return { index, shared, own };
  }

  it('visits holder sets, not keys: the cost does not grow with the keys of the group', () => {
    const { index } = fullGroup();
    expect(index.keyCount).to.equal(64 + MAX_SLOTS * 512);
    index.clearStream(5);
    // A few hundred sets (the shared one, one per stream and tier mix) for 65,600 keys.
    expect(index.lastClearWork).to.be.greaterThan(0).and.below(4 * MAX_SLOTS);
    expect(index.keyCount, 'the cleared stream’s own keys stop counting at once').to.equal(64 + (MAX_SLOTS - 1) * 512);
    expect([index.deviceBlocks(5), index.hostBlocks(5)]).to.deep.equal([0, 0]);
  });

  it('only the cleared stream loses its prefix; the others keep theirs, shared blocks included', () => {
    const { index } = fullGroup();
    index.clearStream(5);
    for (const doc of [6, 7]) {
      index.clearCandidates();
      for (let s = 0; s < MAX_SLOTS; s++) index.addCandidate(s);
      const prompt = [...tokens(0, 64), ...tokens(doc, 512)];
      // Both forms: lazy hashing, and the precomputed chain (lookups in windows, many windows here).
      for (const form of ['lazy', 'chain']) {
        if (form === 'lazy') index.match(prompt);
        else index.matchChain(hasher.chain(prompt, BS), 576);
        for (let s = 0; s < MAX_SLOTS; s++) {
          const want = s === 5 ? 0 : s === doc - 1 ? 576 : 64;
          expect(index.deviceHitBlocks(s) + index.hostOnlyHitBlocks(s), `slot ${s} on doc ${doc}, ${form}`).to.equal(want);
        }
      }
    }
    expect(index.deviceBlocks(6)).to.equal(576);
  });

  it('a reset that loads the same keys again re-uses them; keys left with no holder are swept by later updates', () => {
    const { index, shared, own } = fullGroup();
    const keysBefore = index.keyCount;
    index.clearStream(9);
    index.setTiers(9, shared, new Uint8Array(64).fill(1));
    index.setTiers(9, own[9]!, new Uint8Array(512).fill(2));
    expect(index.keyCount).to.equal(keysBefore);
    expect([index.deviceBlocks(9), index.hostBlocks(9)]).to.deep.equal([64, 512]);
    expect(index.tiersOf(9, own[9]!, 0)).to.equal(2);
    // Removal: the stream's own keys are orphaned, then deleted as other streams update.
    index.removeStream(9);
    expect(index.keyCount).to.equal(keysBefore - 512);
    expect(index.unsweptKeys).to.equal(512);
    const churn = hasher.chain(tokens(999, 64), BS);
    for (let round = 0; round < 100_000 && index.unsweptKeys > 0; round++) index.setTiers(20 + (round % 100), churn.subarray((round % 64) * 16, (round % 64) * 16 + 16), Uint8Array.of(round % 2));
    expect(index.unsweptKeys).to.equal(0);
    expect(index.tiersOf(10, own[9]!, 0)).to.equal(0);
  });

  it('clearing every stream leaves no key and no holder set', () => {
    const { index } = fullGroup();
    for (let s = 0; s < MAX_SLOTS; s++) index.clearStream(s);
    expect([index.keyCount, index.holderSetCount]).to.deep.equal([0, 0]);
    index.sweepOrphans(1 << 20);
    expect(index.unsweptKeys).to.equal(0);
  });
});
