// StreamIndex.exportResidency (architecture.md "The view stream": snapshots and stream resets
// carry a stream's whole residency): exactly the resident keys with their tier bits, equal to
// residencyOf key by key, after stores, replicas, removals, clears and key-id reuse.
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import type { SkipCounters } from '../../../directory-svc/index/stream-index.js';
import { cleared, range, removed, stored } from './index-fixtures.js';

function skips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

function exported(index: StreamIndex): Map<string, number> {
  const { keys, tiers } = index.exportResidency();
  expect(keys.length).to.equal(tiers.length * 16);
  const out = new Map<string, number>();
  for (let i = 0; i < tiers.length; i++) {
    const hex = Buffer.from(keys.subarray(i * 16, i * 16 + 16)).toString('hex');
    expect(out.has(hex), `key ${hex} exported twice`).to.equal(false);
    out.set(hex, tiers[i]!);
  }
  return out;
}

describe('StreamIndex.exportResidency (view snapshots and stream resets)', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });

  it('an empty index exports nothing', () => {
    const index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 100 });
    const r = index.exportResidency();
    expect(r.keys.length).to.equal(0);
    expect(r.tiers.length).to.equal(0);
  });

  it('exports every resident key with the tier bits residencyOf reports, across removals, clears and id reuse', () => {
    const index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 });
    const s = skips();
    // Chain of 6 blocks on Device, a Host replica of the first 3, then churn.
    index.applyEvents([stored([1, 2, 3, 4, 5, 6], null, range(1, 24), 1)], s);
    index.applyEvents([stored([1, 2, 3], null, [], 2)], s);
    index.applyEvents([removed([5, 6], 1)], s);
    index.applyEvents([removed([2], 1)], s);
    // Released ids are reused by a new chain.
    index.applyEvents([stored([10, 11, 12], null, range(101, 112), 1)], s);
    const chainA = hasher.chain(range(1, 24), 4);
    const chainB = hasher.chain(range(101, 112), 4);
    const got = exported(index);
    const want = new Map<string, number>();
    for (const [chain, n] of [[chainA, 6], [chainB, 3]] as const) {
      for (let b = 0; b < n; b++) {
        const t = index.residencyOf(chain, b * 16);
        if (t !== 0) want.set(Buffer.from(chain.subarray(b * 16, b * 16 + 16)).toString('hex'), t);
      }
    }
    expect(got).to.deep.equal(want);
    expect(got.size).to.equal(7); // A: 1..4 (2 host only), B: 3 keys
    expect(index.deviceBlocks + index.hostBlocks).to.equal([...got.values()].reduce((a, t) => a + (t === 3 ? 2 : 1), 0));

    index.applyEvents([cleared(1)], s);
    const afterClear = exported(index);
    expect([...afterClear.values()]).to.deep.equal([2, 2, 2]);
    index.applyEvents([cleared(3)], s);
    expect(exported(index).size).to.equal(0);
  });
});
