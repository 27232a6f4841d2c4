// kv-events §4 content-key test vectors and kvcm-meta §4.3 block keys (I1, Q-01 vectors).
import { expect } from 'chai';
import fc from 'fast-check';
import { createXXHash128 } from 'hash-wasm';
import { ContentKeyHasher, contentKeyHex, blockKeyOf } from '../../../shared/keys/content-key.js';

function range(a: number, b: number): number[] {
  const out: number[] = [];
  for (let i = a; i <= b; i++) out.push(i);
  return out;
}

describe('kv-events §4 content keys', () => {
  it('I1 seed 1024, block_size 4, tokens 1..8 match the vectors', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(range(1, 8), 4);
    expect(contentKeyHex(keys, 0)).to.equal('b0c6037e37a15e2de8d8689c759e965f');
    expect(contentKeyHex(keys, 16)).to.equal('94600a4a64fa896e3c6f4572bb0437f0');
  });
  it('I1 seed 1024, block_size 16, tokens 1..32 match the vectors', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(range(1, 32), 16);
    expect(contentKeyHex(keys, 0)).to.equal('cce872f24ddd4da242181e528a8a5d7c');
    expect(contentKeyHex(keys, 16)).to.equal('baf6ab6b946ce13c3ba631d4ccf4656b');
  });
  it('I1 seed 2048, block_size 4, tokens 1..8 match the vectors', async () => {
    const h = await ContentKeyHasher.forSeed(2048);
    const keys = h.chain(range(1, 8), 4);
    expect(contentKeyHex(keys, 0)).to.equal('d97bc90b289c0fc57fcf31e8a777322e');
    expect(contentKeyHex(keys, 16)).to.equal('dc7df32a8685cf7a27f48a56eb501ae2');
  });
  it('I1 extreme token ids encode as int32 LE', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain([151643, 0, 65536, 2147483647], 4);
    expect(contentKeyHex(keys, 0)).to.equal('22f546fead09d8b8cb1ac82c86081df6');
  });
  it('I1 the canonical (big-endian) digest order is not the key', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(range(1, 8), 4);
    const canonical = Buffer.from(keys.subarray(0, 16)).reverse().toString('hex');
    expect(canonical).to.not.equal('b0c6037e37a15e2de8d8689c759e965f');
  });
  it('keys hashed in hash-wasm\'s module directly equal its wrapper\'s, for any tokens, parent and block size (longer preimages take the wrapper)', async () => {
    const h = await ContentKeyHasher.forSeed(4321);
    expect(h.backend).to.equal('direct');
    const reference = await createXXHash128(4321, 0);
    const expected = (tokens: number[], blockSize: number): string => {
      let parent: Uint8Array | null = null;
      let hex = '';
      for (let b = 0; b + blockSize <= tokens.length; b += blockSize) {
        const pre = Buffer.alloc((parent === null ? 0 : 16) + 4 * blockSize);
        if (parent !== null) pre.set(parent, 0);
        for (let i = 0; i < blockSize; i++) pre.writeInt32LE(tokens[b + i]!, (parent === null ? 0 : 16) + 4 * i);
        reference.init();
        reference.update(pre);
        parent = Uint8Array.from(reference.digest('binary')).reverse();
        hex += Buffer.from(parent).toString('hex');
      }
      return hex;
    };
    await fc.assert(
      fc.property(fc.constantFrom(1, 4, 16, 128, 4092, 4100), fc.integer({ min: 1, max: 3 }), fc.integer({ min: 0, max: 2 ** 31 - 1 }), (blockSize, blocks, salt) => {
        const tokens = Array.from({ length: blockSize * blocks }, (_, i) => (Math.imul(i + 1, 2654435761) ^ salt) & 0x7fffffff);
        expect(Buffer.from(h.chain(tokens, blockSize)).toString('hex')).to.equal(expected(tokens, blockSize));
      }),
      { numRuns: 60 },
    );
  });
  it('incomplete trailing blocks are ignored', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    expect(h.chain(range(1, 10), 4).length).to.equal(32);
    expect(h.chain(range(1, 3), 4).length).to.equal(0);
  });
});

describe('kvcm-meta §4.3 block keys', () => {
  it('Q-01 bs=8 tokens 1..19 give the published digests and int64 keys', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(range(1, 19), 8);
    expect(contentKeyHex(keys, 0)).to.equal('59f4d0ae6f85e3d56f28a078d6aabf79');
    expect(contentKeyHex(keys, 16)).to.equal('379d227863e1bb44022c00138fdd831d');
    expect([blockKeyOf(keys, 0), blockKeyOf(keys, 16)]).to.deep.equal([-3034435009196788647n, 4952800032557538615n]);
  });
  it('bs=4 tokens 1..8 give the published int64 keys', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(range(1, 8), 4);
    expect([blockKeyOf(keys, 0), blockKeyOf(keys, 16)]).to.deep.equal([3269227639227008688n, 7965172724627300500n]);
  });
});
