// kvcm-meta §9.4 Redis store layout, the pure parts: sortable block keys keep int64 order as
// text (the scan index is lexicographic), index members round-trip, location values round-trip.
import { expect } from 'chai';
import fc from 'fast-check';
import { blockKeyOfSortable, decodeLocationValue, locationBody, parseScanMember, scanMember, sortableKey } from '../../../meta-svc/store/redis-layout.js';
import { CLS_SERVING } from '../../../meta-svc/store/meta-store.js';

const int64 = fc.bigInt({ min: -(1n << 63n), max: (1n << 63n) - 1n });

describe('kvcm-meta §9.4 Redis layout', () => {
  it('§9.2 sortable keys order like the signed int64 keys and round-trip', () => {
    fc.assert(
      fc.property(int64, int64, (a, b) => {
        expect(blockKeyOfSortable(sortableKey(a))).to.equal(a);
        expect(sortableKey(a) < sortableKey(b)).to.equal(a < b);
      }),
    );
  });

  it('§9.2 index members round-trip and sort by (instance, key, location id)', () => {
    const m = scanMember('inst:a', -5n, 'kvs#event_report_l2#gpu#h:1');
    expect(parseScanMember(m)).to.deep.equal({ instanceId: 'inst:a', blockKey: -5n, locationId: 'kvs#event_report_l2#gpu#h:1' });
    expect(scanMember('a', 9n, 'Z') < scanMember('a', 10n, 'A')).to.equal(true);
    expect(scanMember('a', 10n, 'Z') < scanMember('ab', -9n, 'A')).to.equal(true);
    expect(parseScanMember('no-separators')).to.equal(null);
  });

  it('§9.2 a location value round-trips specs with any characters', () => {
    const specs = [{ name: 'a#b\n', uri: 'x://h/1?s_version=' + 'a'.repeat(32) }, { name: 'ünï', uri: 'x://"q"' }];
    const body = locationBody({ storageName: 'event_report_l2', type: 8, status: CLS_SERVING, createTimeUs: -(1n << 63n), specs });
    expect(decodeLocationValue('L1', `7\n${body}`)).to.deep.equal({ locationId: 'L1', storageName: 'event_report_l2', type: 8, status: CLS_SERVING, createTimeUs: -(1n << 63n), rev: 7, specs });
    expect(decodeLocationValue('L1', 'garbage')).to.equal(null);
  });
});
