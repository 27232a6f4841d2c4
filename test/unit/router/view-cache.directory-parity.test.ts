/**
 * routing.md `POST /v1/internal/kv-cache/query`: the router's answer from its view equals the
 * directory's Query for the same state. Two directory stream indexes are fed kv-events, exported
 * as a view snapshot (exportResidency, as the directory's view publisher does), and both sides
 * are asked the same token lists.
 */
import { expect } from 'chai';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { StreamIndex } from '../../../directory-svc/index/stream-index.js';
import { StreamQuery, type QueryableStream } from '../../../directory-svc/index/stream-query.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { range, removed, stored } from '../index/index-fixtures.js';
import { apply, snapshot, wireInstance, wireStream } from './view-fixtures.js';
import { ServedResidency } from '../../../directory-svc/index/served-residency.js';

describe('routing.md query: router view answers exactly as the directory Query', () => {
  it('same matches for full, partial, misaligned and empty token lists (replicas, host-only, unsynchronized rank)', async () => {
    const hasher = await ContentKeyHasher.forSeed(1024);
    const skips = { outOfScope: 0, descendant: 0, orphan: 0 };
    const r0 = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 });
    r0.applyEvents([stored([1, 2, 3, 4, 5, 6], null, range(1, 24), 1)], skips);
    r0.applyEvents([stored([1, 2, 3], null, [], 2)], skips);
    r0.applyEvents([removed([2], 1)], skips);
    const r1 = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 });
    r1.applyEvents([stored([7, 8], null, range(1, 8), 2)], skips);
    const other = new StreamIndex({ blockSize: 4, hasher, maxEntries: 1000 });
    other.applyEvents([stored([9], null, range(1, 4), 1)], skips);

    const streams: QueryableStream[] = [
      { instanceName: 'b:1', dpRank: 0, blockSize: 4, hashSeed: 1024n, synchronized: true, sequence: 12n, error: '', index: r0, residency: ServedResidency.of(r0) },
      { instanceName: 'b:1', dpRank: 1, blockSize: 4, hashSeed: 1024n, synchronized: true, sequence: 3n, error: '', index: r1, residency: ServedResidency.of(r1) },
      { instanceName: 'a:1', dpRank: 0, blockSize: 4, hashSeed: 1024n, synchronized: false, sequence: -1n, error: 'timeout: replay', index: other, residency: null },
    ];
    const view = new ViewCache({ staleAfterMs: 3000 });
    await apply(
      view,
      snapshot('e1', 1, [wireInstance('a:1'), wireInstance('b:1', { dp_size: 2 })], streams.map((s, i) => {
        const res = s.index!.exportResidency();
        return wireStream(i + 1, s.instanceName, { dp_rank: s.dpRank, synchronized: s.synchronized, sequence: String(s.sequence), error: s.error, keys: res.keys, tiers: res.tiers });
      })),
      0,
    );
    const directory = new StreamQuery();
    for (const t of [range(1, 24), range(1, 10), range(1, 3), [], range(2, 9)]) {
      expect(view.query(t, 1)).to.deep.equal(directory.query(t, streams), `token_ids 1..${t.length}`);
    }
  });
});
