// The group's key records (shared/index/key-holder-table.ts): a chain stored at once gets
// consecutive records, so the prefix walk reads them one after another; a free record is re-used,
// preferably right after the key stored before it; and a record's old key words never answer a
// lookup once it is free, wherever its key comes back.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { KeyHolderTable } from '../../../shared/index/key-holder-table.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';

const BS = 4;

describe('KeyHolderTable records in insertion order', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });
  const chainWords = (doc: number, blocks: number): Uint32Array => {
    const keys = hasher.chain(Array.from({ length: blocks * BS }, (_, i) => doc * 100_000 + i), BS);
    return new Uint32Array(keys.buffer, keys.byteOffset, blocks * 4);
  };
  const insertChain = (t: KeyHolderTable, w: Uint32Array, set: number): number[] => {
    const ids: number[] = [];
    let prev = -1;
    for (let b = 0; b < w.length >>> 2; b++) {
      const o = b << 2;
      prev = t.insert(w[o]!, w[o + 1]!, w[o + 2]!, w[o + 3]!, set, prev);
      ids.push(prev);
    }
    return ids;
  };

  it('a chain stored at once takes consecutive records, found from the previous one or by hash', () => {
    const t = new KeyHolderTable();
    const a = insertChain(t, chainWords(1, 300), 1);
    const b = insertChain(t, chainWords(2, 300), 1);
    expect(a).to.deep.equal(Array.from({ length: 300 }, (_, i) => i));
    expect(b[0]).to.equal(300);
    const w = chainWords(2, 300);
    expect(t.findAfter(w, 5 << 2, b[4]!)).to.equal(b[5]);
    expect(t.findAfter(w, 5 << 2, -1), 'no hint').to.equal(b[5]);
    expect(t.findAfter(w, 5 << 2, a[17]!), 'a wrong hint').to.equal(b[5]);
    expect(t.findAfter(chainWords(3, 1), 0, b[299]!)).to.equal(-1);
  });

  it('a freed record never answers for its old key; the key comes back in another record', () => {
    const t = new KeyHolderTable();
    const w = chainWords(4, 64);
    const ids = insertChain(t, w, 1);
    insertChain(t, chainWords(5, 64), 1);
    // Free blocks 10..19 of the chain, then store block 15 again after another chain's record.
    for (let b = 10; b < 20; b++) t.deleteAt(ids[b]!);
    expect(t.findAfter(w, 15 << 2, ids[14]!), 'freed').to.equal(-1);
    const other = chainWords(6, 1);
    const prev = t.insert(other[0]!, other[1]!, other[2]!, other[3]!, 1, ids[9]!);
    expect(prev, 'takes the freed record after its predecessor').to.equal(ids[10]);
    const back = t.insert(w[60]!, w[61]!, w[62]!, w[63]!, 2, -1);
    expect(back).to.not.equal(ids[15]);
    expect(t.findAfter(w, 15 << 2, ids[14]!), 'the stale words of record 15 do not match').to.equal(back);
    expect(t.setAt(back)).to.equal(2);
    expect([t.findAfter(w, 9 << 2, ids[8]!), t.findAfter(w, 20 << 2, ids[19]!)]).to.deep.equal([ids[9], ids[20]]);
  });

  it('re-uses free records before growing, and gives memory back when the last records go', () => {
    const t = new KeyHolderTable();
    const first = chainWords(7, 20_000);
    const ids = insertChain(t, first, 1);
    const full = t.approxBytes();
    for (let b = 0; b < 20_000; b += 2) t.deleteAt(ids[b]!);
    insertChain(t, chainWords(8, 10_000), 1);
    // Free records are taken until fewer than 1/64 of them are left, then the end grows.
    expect(t.size).to.equal(20_000);
    expect(t.idBound).to.be.within(20_000, 20_000 + 20_000 / 64 + 1);
    for (let b = 1; b < 20_000; b += 2) expect(t.findAfter(first, b << 2, -1)).to.equal(ids[b]);
    const w = chainWords(8, 10_000);
    for (let b = 0; b < 10_000; b++) t.deleteAt(t.findAfter(w, b << 2, -1));
    for (let b = 1; b < 20_000; b += 2) t.deleteAt(ids[b]!);
    expect([t.size, t.idBound]).to.deep.equal([0, 0]);
    expect(t.approxBytes()).to.be.below(full / 8);
  });

  it('the group walk finds chains split over re-used records (a hint that misses falls back to the hash)', () => {
    const g = new ResidencyIndex(BS, hasher);
    const s = g.addStream();
    const tokens = (doc: number, blocks: number): number[] => Array.from({ length: blocks * BS }, (_, i) => doc * 100_000 + i);
    const churn = hasher.chain(tokens(9, 500), BS);
    g.setTiers(s, churn, new Uint8Array(500).fill(1));
    // Every third churn key leaves: the next chain lands in those holes, out of order with its blocks.
    const off = new Uint8Array(500);
    for (let b = 0; b < 500; b++) off[b] = b % 3 === 0 ? 0 : 1;
    g.setTiers(s, churn, off);
    const prompt = tokens(10, 300);
    const keys = hasher.chain(prompt, BS);
    g.setTiers(s, keys, new Uint8Array(300).fill(2));
    g.clearCandidates();
    g.addCandidate(s);
    g.matchChain(keys, 300);
    expect([g.deviceHitBlocks(s), g.hostOnlyHitBlocks(s)]).to.deep.equal([0, 300]);
    g.match(prompt);
    expect([g.deviceHitBlocks(s), g.hostOnlyHitBlocks(s)]).to.deep.equal([0, 300]);
  });
});
