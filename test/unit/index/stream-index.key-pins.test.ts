// A directory stream index in its group's key space (kv-events §5 records naming group key ids):
// its indexes share one copy of each key, and every pin comes back — at once on dispose(), or
// after garbage collection for an index simply dropped (the subscriber drops indexes in many
// places), so replaced indexes leave no key behind.
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { ResidencyIndex } from '../../../shared/index/residency-index.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import { D, noSkips, range, stored } from './index-fixtures.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

describe('StreamIndex key pins in a shared group', () => {
  let hasher: ContentKeyHasher;
  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024);
  });
  const fill = (space: ResidencyIndex, hashBase: number): StreamIndex => {
    const index = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000, keySpace: space });
    const hashes = range(hashBase, hashBase + 49);
    index.applyEvents([stored(hashes, null, range(1, 200), D)], noSkips());
    return index;
  };

  it('two indexes with the same blocks share the keys; dispose gives their pins back', () => {
    const space = new ResidencyIndex(4, hasher);
    const a = fill(space, 1);
    const b = fill(space, 1001);
    expect(a.sameStateAs(b), 'different engine hashes').to.equal(false);
    expect(space.pinnedOnlyKeys, 'one copy of the 50 keys').to.equal(50);
    a.dispose();
    expect(space.pinnedOnlyKeys).to.equal(50);
    b.dispose();
    expect(space.pinnedOnlyKeys).to.equal(0);
  });

  it('a dropped index gives its pins back after garbage collection', async () => {
    const space = new ResidencyIndex(4, hasher);
    const kept = fill(space, 1);
    let dropped: StreamIndex | null = fill(space, 2001);
    dropped.applyEvents([stored(range(3001, 3010), 2050, range(201, 240), D)], noSkips());
    expect(space.pinnedOnlyKeys).to.equal(60);
    dropped = null;
    for (let i = 0; i < 20 && space.pendingUnpins === 0; i++) {
      gc();
      await new Promise((r) => setTimeout(r, 10));
    }
    expect(space.pendingUnpins, 'its 60 pins handed to the group').to.equal(60);
    space.drainDroppedPins();
    expect(space.pinnedOnlyKeys, 'the kept index still pins its 50').to.equal(50);
    expect(kept.recordCount).to.equal(50);
    expect(dropped).to.equal(null);
  });
});
