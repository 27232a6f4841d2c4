// cache-identity §3: LoRA and salt terms in content keys, against the spec's vectors; plain keys unchanged.
import { expect } from 'chai';
import fc from 'fast-check';
import { createXXHash128 } from 'hash-wasm';
import { ContentKeyHasher, contentKeyHex } from '../../../shared/keys/content-key.js';
import { KeyIdentityCache, PLAIN_IDENTITY, keyIdentity, sameIdentity } from '../../../shared/keys/cache-identity.js';

const ONE_TO_EIGHT = [1, 2, 3, 4, 5, 6, 7, 8];

describe('cache-identity §3 content keys', () => {
  it('CI-K1 LoRA "sql-lora": both blocks carry the L term (spec vectors)', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(ONE_TO_EIGHT, 4, undefined, keyIdentity('sql-lora', null));
    expect(contentKeyHex(keys, 0)).to.equal('b991f11bf97aab27422405a07b599fc3');
    expect(contentKeyHex(keys, 16)).to.equal('9cd8b53134746ed3ebfc6d70cb377c89');
  });
  it('CI-K2 salt "tenant-a": block 0 carries the S term, block 1 only through its parent (spec vectors)', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(ONE_TO_EIGHT, 4, undefined, keyIdentity(null, 'tenant-a'));
    expect(contentKeyHex(keys, 0)).to.equal('56aba034c7993806' + '98625157cb7850c0');
    expect(contentKeyHex(keys, 16)).to.equal('398e7f6f39101fd8' + '38509a95b3a4bbd2');
  });
  it('CI-K3 LoRA and salt together (spec vectors, and block 0\'s preimage byte for byte)', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const id = keyIdentity('sql-lora', 'tenant-a');
    const keys = h.chain(ONE_TO_EIGHT, 4, undefined, id);
    expect(contentKeyHex(keys, 0)).to.equal('62ac9cabbf9bab2d4e612b0714c1f64b');
    expect(contentKeyHex(keys, 16)).to.equal('6cf68ade01b27c11ec28c41b1435e86a');
    const pre = Buffer.concat([Buffer.from('01000000020000000300000004000000', 'hex'), Buffer.from(id.rootSuffix!)]);
    expect(pre.toString('hex')).to.equal('01000000020000000300000004000000' + '4c080000' + '0073716c' + '2d6c6f72' + '61530800' + '00007465' + '6e616e74' + '2d61');
  });
  it('CI-K4 a plain identity leaves every kv-events §4 key unchanged', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const keys = h.chain(ONE_TO_EIGHT, 4, undefined, PLAIN_IDENTITY);
    expect(contentKeyHex(keys, 0)).to.equal('b0c6037e37a15e2de8d8689c759e965f');
    expect(contentKeyHex(keys, 16)).to.equal('94600a4a64fa896e3c6f4572bb0437f0');
    expect(keyIdentity(null, null)).to.equal(PLAIN_IDENTITY);
  });
  it('CI-K5 identity terms hashed directly equal a reference preimage for any names, salts and block sizes (multi-byte UTF-8, long preimages through the wrapper)', async () => {
    const h = await ContentKeyHasher.forSeed(77);
    const reference = await createXXHash128(77, 0);
    const termOf = (tag: number, s: string): Buffer => {
      const b = Buffer.from(s, 'utf8');
      const head = Buffer.alloc(5);
      head[0] = tag;
      head.writeUInt32LE(b.length, 1);
      return Buffer.concat([head, b]);
    };
    await fc.assert(
      fc.property(
        fc.constantFrom(1, 4, 16, 4095),
        fc.integer({ min: 1, max: 3 }),
        fc.option(fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }), { nil: null }),
        fc.option(fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }), { nil: null }),
        (blockSize, blocks, lora, salt) => {
          const tokens = Array.from({ length: blockSize * blocks }, (_, i) => Math.imul(i + 7, 2654435761) & 0x7fffffff);
          let parent: Buffer | null = null;
          let want = '';
          for (let b = 0; b < blocks; b++) {
            const words = Buffer.alloc(4 * blockSize);
            for (let i = 0; i < blockSize; i++) words.writeInt32LE(tokens[b * blockSize + i]!, 4 * i);
            const parts: Buffer[] = [];
            if (parent !== null) parts.push(parent);
            parts.push(words);
            if (lora !== null) parts.push(termOf(0x4c, lora));
            if (salt !== null && parent === null) parts.push(termOf(0x53, salt));
            reference.init();
            reference.update(Buffer.concat(parts));
            parent = Buffer.from(reference.digest('binary')).reverse();
            want += parent.toString('hex');
          }
          expect(Buffer.from(h.chain(tokens, blockSize, undefined, keyIdentity(lora, salt))).toString('hex')).to.equal(want);
        },
      ),
      { numRuns: 80 },
    );
  });
  it('CI-K6 different identities never share a key for the same tokens', async () => {
    const h = await ContentKeyHasher.forSeed(1024);
    const ids = [PLAIN_IDENTITY, keyIdentity('a', null), keyIdentity('b', null), keyIdentity(null, 'a'), keyIdentity('a', 'a'), keyIdentity('a', 'b')];
    const seen = new Set<string>();
    for (const id of ids) {
      const keys = h.chain(ONE_TO_EIGHT, 4, undefined, id);
      for (const k of [contentKeyHex(keys, 0), contentKeyHex(keys, 16)]) {
        expect(seen.has(k), `${id.loraName}/${id.salt}`).to.equal(false);
        seen.add(k);
      }
    }
  });
  it('KeyIdentityCache returns one identity per (LoRA, salt) and tells null from empty-looking names', () => {
    const c = new KeyIdentityCache(3);
    expect(c.get('x', null)).to.equal(c.get('x', null));
    expect(c.get(null, null)).to.equal(PLAIN_IDENTITY);
    expect(sameIdentity(c.get('x', 'y'), keyIdentity('x', 'y'))).to.equal(true);
    expect(sameIdentity(c.get('\u0001', null), c.get(null, null))).to.equal(false);
    for (let i = 0; i < 10; i++) expect(c.get(`l${i}`, null).loraName).to.equal(`l${i}`);
  });
});
