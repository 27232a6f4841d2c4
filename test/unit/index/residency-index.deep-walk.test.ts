// kv-events §8 prefix match past the point where ResidencyIndex.match converts the prompt to
// int32 words (a deep walk): the lazy walk over a JS array, over an Int32Array and the walk over
// the precomputed §4 chain give the same hits and hash the same blocks, for every prefix length
// and for a prompt that leaves the stored chain anywhere; and the §4 keys of an Int32Array
// prompt equal those of the same tokens as a JS array.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';

const BS = 16;
const DOC_BLOCKS = 40;

describe('ResidencyIndex deep walks (the prompt as int32 words)', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });

  it('§4 keys of an Int32Array prompt equal those of the same JS array', () => {
    const tokens = Array.from({ length: DOC_BLOCKS * BS }, (_, i) => (Math.imul(i + 7, 2654435761) >>> 1) & 0x7fffffff);
    expect(Buffer.from(hasher.chain(Int32Array.from(tokens), BS)).toString('hex')).to.equal(Buffer.from(hasher.chain(tokens, BS)).toString('hex'));
  });

  it('every prefix length and divergence point: JS array, Int32Array and chain walks agree with the stored chain', () => {
    const doc = Array.from({ length: DOC_BLOCKS * BS }, (_, i) => 1000 + i);
    const g = new ResidencyIndex(BS, hasher);
    const device = g.addStream();
    const host = g.addStream();
    const keys = hasher.chain(doc, BS);
    // Device holds the whole chain; host only its first 30 blocks (Host tier).
    g.setTiers(device, keys, new Uint8Array(DOC_BLOCKS).fill(1));
    g.setTiers(host, keys.subarray(0, 30 * 16), new Uint8Array(30).fill(2));
    for (let diverge = 0; diverge <= DOC_BLOCKS; diverge++) {
      // The prompt follows the doc for `diverge` blocks, then has blocks of its own.
      const prompt = doc.slice(0, diverge * BS);
      while (prompt.length < DOC_BLOCKS * BS + 5) prompt.push(900_000 + prompt.length);
      const results: number[][] = [];
      for (const form of ['array', 'int32', 'chain'] as const) {
        g.clearCandidates();
        g.addCandidate(device);
        g.addCandidate(host);
        if (form === 'array') g.match(prompt);
        else if (form === 'int32') g.match(Int32Array.from(prompt));
        else g.matchChain(hasher.chain(prompt, BS), DOC_BLOCKS);
        results.push([g.deviceHitBlocks(device), g.hostOnlyHitBlocks(device), g.deviceHitBlocks(host), g.hostOnlyHitBlocks(host), form === 'chain' ? -1 : g.lastHashedBlocks]);
      }
      const want = [diverge, 0, 0, Math.min(diverge, 30), Math.min(diverge + 1, DOC_BLOCKS)];
      expect(results[0], `diverge ${diverge}, JS array`).to.deep.equal(want);
      expect(results[1], `diverge ${diverge}, Int32Array`).to.deep.equal(want);
      expect(results[2]!.slice(0, 4), `diverge ${diverge}, chain`).to.deep.equal(want.slice(0, 4));
    }
  });
});
