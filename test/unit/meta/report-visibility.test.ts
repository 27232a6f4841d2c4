/** kvcm-meta §7.10 visibility of event-report locations (Q-09 reporter side) and the §7.6 URI rules. */
import { expect } from 'chai';
import { ReporterVisibility } from '../../../meta-svc/report/event-report-visibility.js';
import { appendSVersion, hasSVersionParam, parseReportLocationId, sVersionsOf, storedSVersion } from '../../../meta-svc/report/report-location-id.js';
import { ReporterRegistry, type ReporterIdentity } from '../../../meta-svc/report/reporter-registry.js';
import { CLS_SERVING, type StoredLocation } from '../../../meta-svc/store/meta-store.js';

const ID: ReporterIdentity = { instanceId: 'i', storageType: 8, hostIpPort: 'h:1', storageName: 'event_report_l2' };
const A = 'a'.repeat(32);
const B = 'b'.repeat(32);

function loc(uris: string[], locationId = 'kvs#event_report_l2#gpu#h:1', type = 8): StoredLocation {
  return { locationId, storageName: 'event_report_l2', type, status: CLS_SERVING, createTimeUs: 0n, rev: 1, specs: uris.map((uri, i) => ({ name: `tp${i}`, uri })) };
}

describe('kvcm-meta §7.10 event-report visibility', () => {
  let reg: ReporterRegistry;
  let vis: ReporterVisibility;
  beforeEach(() => {
    reg = new ReporterRegistry();
    vis = new ReporterVisibility(reg);
  });

  it('Q-09 soft mode: legacy, old-generation and current specs are all visible', () => {
    reg.heartbeat(ID, 0);
    expect(vis.isVisible('i', loc(['x://h/p']), 0)).to.equal(true);
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${A}`]), 0)).to.equal(true);
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${A.toUpperCase()}`]), 0)).to.equal(true);
  });

  it('Q-09 strict mode: only with ≥1 spec carrying the fence; a candidate is hidden until commit', () => {
    const r = reg.heartbeat(ID, 0)!;
    r.fence = A;
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${A}`, 'x://h/q']), 0)).to.equal(true);
    expect(vis.isVisible('i', loc(['x://h/q']), 0)).to.equal(false);
    r.candidate = B;
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${B}`]), 0)).to.equal(false);
    r.fence = B;
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${B}`]), 0)).to.equal(true);
  });

  it('Q-09 malformed: bad URI, two s_version, 31-hex s_version, bad id, type mismatch, no specs', () => {
    reg.heartbeat(ID, 0);
    expect(vis.isVisible('i', loc(['not a uri']), 0)).to.equal(false);
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${A}&s_version=${A}`]), 0)).to.equal(false);
    expect(vis.isVisible('i', loc([`x://h/p?s_version=${A.slice(1)}`]), 0)).to.equal(false);
    expect(vis.isVisible('i', loc(['x://h/p', 'bad uri']), 0)).to.equal(false);
    expect(vis.isVisible('i', loc(['x://h/p'], 'kvs#event_report_l2#gpu'), 0)).to.equal(false);
    expect(vis.isVisible('i', loc(['x://h/p'], 'kvs#event_report_l1p5#gpu#h:1'), 0)).to.equal(false);
    expect(vis.isVisible('i', loc([]), 0)).to.equal(false);
  });

  it('hard gate: UNKNOWN, UNAVAILABLE and TOMBSTONED reporters are hidden', () => {
    expect(vis.isVisible('i', loc(['x://h/p']), 0)).to.equal(false);
    reg.heartbeat(ID, 0);
    expect(vis.isVisible('i', loc(['x://h/p']), 30_001)).to.equal(false);
    expect(vis.isVisible('j', loc(['x://h/p']), 0)).to.equal(false);
    reg.hostDown(ID, 1);
    expect(vis.isVisible('i', loc(['x://h/p']), 1)).to.equal(false);
  });

  it('one row object re-checked follows the reporter: liveness, fence, tombstone, instance', () => {
    // The row-only checks are cached per row object; the reporter's state never is.
    const row = loc([`x://h/p?s_version=${A}`]);
    expect(vis.isVisible('i', row, 0)).to.equal(false); // UNKNOWN
    const r = reg.heartbeat(ID, 0)!;
    expect(vis.isVisible('i', row, 0)).to.equal(true);
    expect(vis.isVisible('j', row, 0)).to.equal(false); // another instance's reporter is unknown
    expect(vis.isVisible('i', row, 0)).to.equal(true);
    r.fence = B;
    expect(vis.isVisible('i', row, 0)).to.equal(false);
    r.fence = A;
    expect(vis.isVisible('i', row, 0)).to.equal(true);
    expect(vis.isVisible('i', row, 30_001)).to.equal(false); // UNAVAILABLE
    reg.hostDown(ID, 1);
    expect(vis.isVisible('i', row, 1)).to.equal(false);
    reg.register(ID, [], 2);
    expect(vis.isVisible('i', row, 2)).to.equal(true); // soft mode after the tombstone is cleared
    const bad = loc(['x://h/p', 'bad uri']);
    expect(vis.isVisible('i', bad, 2)).to.equal(false);
    expect(vis.isVisible('i', bad, 2)).to.equal(false);
  });

  it('§7.4 hasSVersionParam agrees with sVersionsOf', () => {
    const uris = ['x://h/p', 'x://h/p?', 'x://h/p?s_version', 'x://h/p?s_version=', `x://h/p?s_version=${A}`, 'x://h/p?a=1&s_version=2', 'x://h/p?a=1&s_versionx=2',
      'x://h/s_version=1/p', 'x://h/p?xs_version=1', 'x://h/p?a&s_version&b', 'x://h/p?a=s_version', 'x://h/p??s_version=1', 'x://h/p?a?s_version=1', 'x://h/p?&&s_version=', 'x://h/p?s_version_2=1'];
    for (const u of uris) expect(hasSVersionParam(u), u).to.equal(sVersionsOf(u).length > 0);
  });

  it('§7.6 s_version appending and parsing', () => {
    expect(appendSVersion('x://h/p', A)).to.equal(`x://h/p?s_version=${A}`);
    expect(appendSVersion('x://h/p?size=1', A)).to.equal(`x://h/p?size=1&s_version=${A}`);
    expect(appendSVersion('x://h/p?', A)).to.equal(`x://h/p?s_version=${A}`);
    expect(appendSVersion('x://h/p?a=1&', A)).to.equal(`x://h/p?a=1&s_version=${A}`);
    expect(storedSVersion('x://h/s_version=1/p')).to.equal('');
    expect(storedSVersion(`x://h/p?a=1&s_version=${A.toUpperCase()}`)).to.equal(A);
    expect(parseReportLocationId('kvs#event_report_l1p5#gpu#10.0.0.1:80')).to.deep.equal({ storageType: 7, medium: 'gpu', hostIpPort: '10.0.0.1:80' });
    expect(parseReportLocationId('kvs#nfs#gpu#h')).to.equal(null);
  });
});
