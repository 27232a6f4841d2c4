// Stable key ids of a residency group (the directory's stream indexes name their content keys by
// them, kv-events §5): an id names the same key across table growth, shrinking and backward-shift
// moves; a pinned key stays with no holder and neither counts nor matches; the last pin of a key
// with no holder deletes it; dropped pins (an index the garbage collector reclaimed) are released
// a few per later update, and a clear or sweep never deletes a key still pinned.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';

const BS = 4;

describe('ResidencyIndex stable key ids and pins', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });
  const chainOf = (doc: number, blocks: number): Uint8Array => hasher.chain(Array.from({ length: blocks * BS }, (_, i) => doc * 10_000 + i), BS);
  const words = (keys: Uint8Array, b: number): Uint32Array => new Uint32Array(keys.slice(b * 16, b * 16 + 16).buffer);

  it('an id names its key through growth, moves and shrinking', () => {
    const g = new ResidencyIndex(BS, hasher);
    const slot = g.addStream();
    const keys = chainOf(1, 3000);
    const ids = Array.from({ length: 3000 }, (_, b) => g.pinKey(words(keys, b), 0));
    expect(new Set(ids).size).to.equal(3000);
    // Resident keys of another doc come and go around them (inserts, deletes, resizes).
    const other = chainOf(2, 5000);
    g.setTiers(slot, other, new Uint8Array(5000).fill(1));
    g.setTiers(slot, other, new Uint8Array(5000));
    for (let b = 0; b < 3000; b += 2) g.unpinKey(ids[b]!);
    for (let b = 1; b < 3000; b += 2) expect(g.keyEquals(ids[b]!, words(keys, b), 0), `block ${b}`).to.equal(true);
    expect(g.keyIdOf(keys, 17 * 16)).to.equal(ids[17]);
    expect(g.keyIdOf(keys, 16 * 16)).to.equal(-1);
  });

  it('a pinned key with no holder neither counts nor matches, and its last pin deletes it', () => {
    const g = new ResidencyIndex(BS, hasher);
    const slot = g.addStream();
    const keys = chainOf(3, 4);
    const id0 = g.pinKey(words(keys, 0), 0);
    expect(g.pinKey(words(keys, 0), 0)).to.equal(id0);
    expect([g.keyCount, g.pinnedOnlyKeys]).to.deep.equal([0, 1]);
    g.setTiers(slot, keys, Uint8Array.of(1, 1, 1, 1));
    expect([g.keyCount, g.pinnedOnlyKeys]).to.deep.equal([4, 0]);
    g.setTiers(slot, keys, Uint8Array.of(0, 0, 0, 0));
    expect([g.keyCount, g.pinnedOnlyKeys], 'the pinned key stays without a holder').to.deep.equal([0, 1]);
    g.clearCandidates();
    g.addCandidate(slot);
    g.matchChain(keys, 4);
    expect(g.deviceHitBlocks(slot) + g.hostOnlyHitBlocks(slot)).to.equal(0);
    g.unpinKey(id0);
    expect(g.pinnedOnlyKeys).to.equal(1);
    g.unpinKey(id0);
    expect([g.keyCount, g.pinnedOnlyKeys, g.keyIdOf(keys, 0)]).to.deep.equal([0, 0, -1]);
  });

  it('clearStream and the orphan sweep keep a pinned key (without holder), delete the others', () => {
    const g = new ResidencyIndex(BS, hasher);
    const slot = g.addStream();
    const keys = chainOf(4, 8);
    const id = g.pinKey(words(keys, 2), 0);
    g.setTiers(slot, keys, new Uint8Array(8).fill(3));
    g.clearStream(slot);
    expect(g.keyCount).to.equal(0);
    g.sweepOrphans(Number.POSITIVE_INFINITY);
    expect([g.unsweptKeys, g.pinnedOnlyKeys, g.keyIdOf(keys, 2 * 16)]).to.deep.equal([0, 1, id]);
    g.setKeyTiers(slot, words(keys, 2), 0, 2);
    expect([g.keyCount, g.pinnedOnlyKeys, g.tiersOf(slot, keys, 2 * 16)]).to.deep.equal([1, 0, 2]);
  });

  it('dropped pins are released a few per later update, and all at once on drain', () => {
    const g = new ResidencyIndex(BS, hasher);
    const slot = g.addStream();
    const keys = chainOf(5, 200);
    const ids = Uint32Array.from({ length: 200 }, (_, b) => g.pinKey(words(keys, b), 0));
    g.dropPinsLater(ids);
    expect(g.pendingUnpins).to.equal(200);
    const traffic = chainOf(6, 4);
    g.setTiers(slot, traffic, Uint8Array.of(1, 1, 1, 1));
    expect(g.pendingUnpins, 'a few per update').to.be.above(0).and.below(200);
    g.drainDroppedPins();
    expect([g.pendingUnpins, g.pinnedOnlyKeys, g.keyCount]).to.deep.equal([0, 0, 4]);
  });
});
