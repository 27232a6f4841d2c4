/**
 * The prefill ledger's times (prefill-ledger.ts) and what the TTFT policy reads from them per
 * engine (queue-progress.ts): the head the engine works on, what it has worked off, and which of a
 * load report's waiting requests the ledgers account for (issue 27). Times in ms, hand-computed.
 */
import { expect } from 'chai';
import { PrefillLedger } from '../../../router-svc/inflight/prefill-ledger.js';
import { EngineProgress } from '../../../router-svc/policy/queue-progress.js';
import { workedOffTokens } from '../../../router-svc/policy/ttft-cost.js';

describe('TTFT policy: the prefill ledger and the engine\'s progress', () => {
  it('TT14 worked off: θ · busy time, never more than the head, nothing for an empty head or no time', () => {
    expect(workedOffTokens(1000, 30, 10)).to.equal(300);
    expect(workedOffTokens(1000, 300, 10)).to.equal(1000);
    expect(workedOffTokens(0, 300, 10)).to.equal(0);
    expect(workedOffTokens(1000, -5, 10)).to.equal(0);
    expect(workedOffTokens(1000, Number.NaN, 10)).to.equal(0);
  });

  it('TT14 the head is the oldest outstanding entry; the last end is the newest first token', () => {
    const l = new PrefillLedger();
    expect(l.headStartMs).to.equal(Number.POSITIVE_INFINITY);
    expect(l.headTokens).to.equal(0);
    l.start(1, 500, null, 10);
    l.start(2, 700, null, 20);
    expect([l.requests, l.tokens, l.headStartMs, l.headTokens]).to.deep.equal([2, 1200, 10, 500]);
    expect(l.end(1, 40)).to.equal(true);
    expect(l.end(1, 45)).to.equal(false);
    expect([l.requests, l.tokens, l.headStartMs, l.headTokens, l.lastEndMs]).to.deep.equal([1, 700, 20, 700, 40]);
  });

  it('TT12 liveAt: the entries at the engine when a report was made — sent by then, answered after — within the kept window', () => {
    const l = new PrefillLedger(1000);
    l.start(1, 100, null, 0);
    l.start(2, 100, null, 50);
    l.start(3, 100, null, 200);
    l.end(1, 100);
    // At 60: 1 (answered at 100) and 2 were there; 3 was not sent yet.
    expect(l.liveAt(60)).to.equal(2);
    expect(l.liveAt(150)).to.equal(1);
    expect(l.liveAt(250)).to.equal(2);
    // An end more than 1,000 ms before the newest one is forgotten (counted as ended).
    l.end(2, 1500);
    expect(l.liveAt(60)).to.equal(1);
    // The ended ring grows past its first size and keeps its order.
    for (let i = 10; i < 60; i++) l.start(i, 1, null, 2000 + i);
    for (let i = 10; i < 60; i++) l.end(i, 2100 + i);
    expect(l.liveAt(2059)).to.equal(50 + 1);
  });

  it('TT12 the gauge for the directory: sent when it changed, not when it came back to what was sent', () => {
    const l = new PrefillLedger();
    expect(l.takeChange()).to.equal(null);
    l.start(1, 300.4, null, 0);
    expect(l.takeChange()).to.deep.equal({ tokens: '300', requests: 1 });
    expect(l.takeChange()).to.equal(null);
    l.start(2, 50, null, 1);
    l.end(2, 2);
    expect(l.takeChange()).to.equal(null);
    l.end(1, 3);
    expect(l.takeChange()).to.deep.equal({ tokens: '0', requests: 0 });
  });

  it("TT14 the other replicas' ledgers: their head starts when their count is first seen above 0, a fall is a first token, their mean is its size", () => {
    const e = new EngineProgress();
    // 2 requests of others' seen at 100 (4,000 tokens): busy since 100, head worth 2,000.
    e.see(100, null, 2, 1, 0);
    expect(e.workedOff(null, 4000, 2, 400, 1)).to.equal(300);
    expect(e.workedOff(null, 4000, 2, 5000, 1)).to.equal(2000);
    // Their count falls at 600: the engine starts on the next from then.
    e.see(600, null, 1, 1, 0);
    expect(e.workedOff(null, 1500, 1, 700, 1)).to.equal(100);
    // This router's own entry sent at 50 is older than the others' (seen at 100): it is the head.
    const own = new PrefillLedger();
    own.start(1, 800, null, 50);
    const f = new EngineProgress();
    f.see(120, own, 1, 1, 0);
    expect(f.workedOff(own, 5000, 1, 250, 1)).to.equal(200);
    // Emptied, the others' start is forgotten: a later rise starts again.
    f.see(300, own, 0, 1, 0);
    f.see(900, null, 1, 1, 0);
    expect(f.workedOff(null, 100, 1, 950, 1)).to.equal(50);
  });

  it('TT12 ledgerAtReport: read once per load report, this router\'s entries at its time plus the others\' as seen with it', () => {
    const own = new PrefillLedger();
    own.start(1, 100, null, 0);
    own.start(2, 100, null, 300);
    const e = new EngineProgress();
    // A report made at 200 (stamp 7): own entry 1 was there, 2 not yet; 3 of the others'.
    expect(e.see(310, own, 3, 7, 200).ledgerAtReport).to.equal(4);
    own.end(1, 320);
    // The same report later: unchanged, though entry 1 has been answered since.
    expect(e.see(330, own, 1, 7, 200).ledgerAtReport).to.equal(4);
    // A new report made at 400: own entry 2, and the others' 1.
    expect(e.see(410, own, 1, 8, 400).ledgerAtReport).to.equal(2);
  });
});
