// kvcm-meta §5.6 V6D peer choices as pure functions (the HTTP-level Q-14..Q-17 run in
// test/integration/kvcm-meta.parity.test.ts against the meta-svc process).
import { expect } from 'chai';
import { chooseCoveragePeer, choosePrefixPeer, type KeyPeers, type PeerCandidate } from '../../../meta-svc/lookup/backend-selection.js';
import { CLS_SERVING } from '../../../meta-svc/store/meta-store.js';

const candidate = (host: string): PeerCandidate => ({
  location: { locationId: `kvs#event_report_l2#mem#${host}`, storageName: 'l2', type: 8, status: CLS_SERVING, createTimeUs: 1n, rev: 1, specs: [] },
  specs: [],
});
/** `P(i)` per key from the peers that hold it. */
const peers = (...keys: string[][]): KeyPeers[] => keys.map((hosts) => new Map(hosts.map((h) => [h, candidate(h)])));

describe('kvcm-meta §5.6 V6D peer choice', () => {
  it('Q-15 PREFIX: longest gap-free run from the first key, B on all four keys over A on three', () => {
    expect(choosePrefixPeer(peers(['A', 'B'], ['A', 'B'], ['B'], ['A', 'B']))).to.deep.equal({ host: 'B', count: 4 });
    // A on [k0,k1,k3] (gap at k2) counts 2; B on [k0..k3] counts 4.
    expect(choosePrefixPeer(peers(['A', 'B'], ['A', 'B'], ['B'], ['B']))).to.deep.equal({ host: 'B', count: 4 });
  });

  it('Q-15 PREFIX: the walk stops before the first key without a peer; ties go to the smallest host', () => {
    expect(choosePrefixPeer(peers(['B'], [], ['A', 'B']))).to.deep.equal({ host: 'B', count: 1 });
    expect(choosePrefixPeer(peers([], ['A']))).to.equal(null);
    expect(choosePrefixPeer([])).to.equal(null);
    expect(choosePrefixPeer(peers(['h:2', 'h:10'], ['h:2', 'h:10']))).to.deep.equal({ host: 'h:10', count: 2 });
  });

  it('Q-15 COVERAGE: the peer in the most P(i), gaps allowed; ties to the smallest host', () => {
    // A on [k0,k2,k3], B on [k1].
    expect(chooseCoveragePeer(peers(['A'], ['B'], ['A'], ['A']))).to.equal('A');
    expect(chooseCoveragePeer(peers(['B'], ['A']))).to.equal('A');
    expect(chooseCoveragePeer(peers([], []))).to.equal(null);
  });
});
