/**
 * The prefill ledger's times (prefill-ledger.ts) and what the TTFT policy reads from them per
 * engine (queue-progress.ts): the head the engine works on, what it has worked off, and which of a
 * load report's waiting requests the ledgers account for (issue 27). Times in ms, hand-computed.
 */
import { expect } from 'chai';
import { PrefillLedger } from '../../../router-svc/inflight/prefill-ledger.js';
import { fingerprintsOf } from '../../../shared/keys/prompt-fingerprint.js';
import { EngineProgress, unheadedRequests } from '../../../router-svc/policy/queue-progress.js';
import { NO_SHARES, type InflightShare } from '../../../router-svc/viewcache/view-update.js';
import { NO_LAST_END } from '../../../shared/view/view-wire.js';

const ME = 'router-me';

/** Another replica's share with only its ledger: requests, tokens, head tokens, head start, last end. */
function share(routerId: string, requests: number, tokens: number, headTokens: number, headStartMs: number, lastEndMs: number): InflightShare {
  return {
    routerId,
    count: 0,
    prompts: [],
    seqs: [],
    openClaimSeqs: [],
    prefillTokens: 0,
    prefillTokenDecisions: 0,
    outstandingRequests: requests,
    outstandingTokens: tokens,
    headTokens,
    headStartMs: headTokens > 0 ? headStartMs : Number.POSITIVE_INFINITY,
    lastEndMs,
    outstandingPrompts: [],
    outstandingPromptTokens: [],
  };
}
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

  it('TT12 the gauge for the directory: sent when it changed, not when it came back to what was sent; its head and last end as ages', () => {
    const l = new PrefillLedger();
    expect(l.takeChange(0)).to.equal(null);
    l.start(1, 300.4, null, 0);
    expect(l.takeChange(5)).to.deep.equal({ tokens: '300', requests: 1, head_tokens: '300', head_age_ms: 5, last_end_age_ms: NO_LAST_END });
    expect(l.takeChange(6)).to.equal(null);
    l.start(2, 50, null, 10);
    l.end(2, 20);
    expect(l.takeChange(25)).to.equal(null);
    l.start(3, 70, null, 30);
    l.end(1, 40);
    expect(l.takeChange(45)).to.deep.equal({ tokens: '70', requests: 1, head_tokens: '70', head_age_ms: 15, last_end_age_ms: 5 });
    l.end(3, 50);
    // Emptied, it still says when its last first token came: the engine's next head started then.
    expect(l.takeChange(52)).to.deep.equal({ tokens: '0', requests: 0, last_end_age_ms: 2 });
  });

  it('TT17 the gauge carries the newest entries\' prompt fingerprints (at most 8, oldest first), for the other replicas\' pending credit', () => {
    const l = new PrefillLedger();
    for (let i = 1; i <= 10; i++) l.start(i, 10 * i, Uint32Array.of(i, i + 100), i);
    l.start(11, 10, null, 11);
    const g = l.takeChange(20)!;
    expect(g.prompts!.map((b) => [...fingerprintsOf(b)!])).to.deep.equal([3, 4, 5, 6, 7, 8, 9, 10].map((i) => [i, i + 100]));
    // Each with its prefill tokens: claim order takes out exactly those ordered after a claim.
    expect(g.prompt_tokens).to.deep.equal([30, 40, 50, 60, 70, 80, 90, 100]);
  });

  it("TT15 the other replicas' heads come through the view: the union's oldest head, busy since the newest first token of any ledger", () => {
    const own = new PrefillLedger();
    own.start(1, 800, null, 300);
    const e = new EngineProgress();
    const x = share('router-x', 2, 5000, 3000, 100, Number.NEGATIVE_INFINITY);
    // x's head (sent at 100) is older than this router's (300): busy with it since 100.
    expect(e.see(400, own, NO_SHARES, ME, 2, 1, 0).workedOff(own, [x], ME, 400, 1)).to.equal(300);
    // y saw a first token at 350: the engine has been on the next head since then.
    const y = share('router-y', 1, 900, 900, 200, 350);
    expect(e.workedOff(own, [x, y], ME, 400, 1)).to.equal(50);
    // This router's own share coming back is skipped; a stale view gives none.
    expect(e.workedOff(null, [share(ME, 1, 10, 10, 0, Number.NEGATIVE_INFINITY)], ME, 400, 1)).to.equal(0);
    expect(e.workedOff(own, NO_SHARES, ME, 400, 1)).to.equal(100);
  });

  it("TT15 a replica whose ledger there emptied still dates the next head: busy with it only since that replica's last first token", () => {
    const own = new PrefillLedger();
    // This router's request was sent at 100 and waited behind router-x's, answered at 700.
    own.start(1, 5000, null, 100);
    const e = new EngineProgress();
    e.see(800, own, NO_SHARES, ME, 0, 1, 0);
    // Without x's last end the engine would count as busy with the head since 100: 700 tokens.
    expect(e.workedOff(own, NO_SHARES, ME, 800, 1)).to.equal(700);
    // x has no request left there; its share still carries the end at 700: 100 tokens.
    const x = share('router-x', 0, 0, 0, 0, 700);
    expect(e.workedOff(own, [x], ME, 800, 1)).to.equal(100);
    // And it counts as having answered one a report made before 700 counted.
    expect(e.see(810, own, [x], ME, 0, 2, 650).ledgerAtReport).to.equal(1 + 0 + 1);
  });

  it("TT14 an older replica's ledger without a head: its head starts when its count is first seen above 0, a fall is a first token, its mean is its size", () => {
    const old = (requests: number, tokens: number): InflightShare => share('router-old', requests, tokens, 0, 0, Number.NEGATIVE_INFINITY);
    const e = new EngineProgress();
    // 2 requests seen at 100 (4,000 tokens): busy since 100, head worth 2,000.
    e.see(100, null, [old(2, 4000)], ME, 2, 1, 0);
    expect(e.workedOff(null, [old(2, 4000)], ME, 400, 1)).to.equal(300);
    expect(e.workedOff(null, [old(2, 4000)], ME, 5000, 1)).to.equal(2000);
    // Its count falls at 600: the engine starts on the next from then.
    e.see(600, null, [old(1, 1500)], ME, 1, 1, 0);
    expect(e.workedOff(null, [old(1, 1500)], ME, 700, 1)).to.equal(100);
    // Emptied, its start is forgotten: a later rise starts again.
    e.see(800, null, NO_SHARES, ME, 0, 1, 0);
    e.see(900, null, [old(1, 100)], ME, 1, 1, 0);
    expect(e.workedOff(null, [old(1, 100)], ME, 950, 1)).to.equal(50);
    expect(unheadedRequests([old(3, 10), share('router-x', 2, 5, 5, 0, 0), share(ME, 4, 1, 0, 0, 0)], ME)).to.equal(3);
  });

  it('TT12 ledgerAtReport: read once per load report, this router\'s entries at its time plus the others\' as seen with it', () => {
    const own = new PrefillLedger();
    own.start(1, 100, null, 0);
    own.start(2, 100, null, 300);
    const e = new EngineProgress();
    // A report made at 200 (stamp 7): own entry 1 was there, 2 not yet; 3 of the others'.
    expect(e.see(310, own, NO_SHARES, ME, 3, 7, 200).ledgerAtReport).to.equal(4);
    own.end(1, 320);
    // The same report later: unchanged, though entry 1 has been answered since.
    expect(e.see(330, own, NO_SHARES, ME, 1, 7, 200).ledgerAtReport).to.equal(4);
    // A new report made at 400: own entry 2, and the others' 1.
    expect(e.see(410, own, NO_SHARES, ME, 1, 8, 400).ledgerAtReport).to.equal(2);
    // A replica whose last first token came after the report answered one the report counted: it
    // is gone from its ledger, not unknown. One before the report, or this router's own share, adds none.
    const x = share('router-x', 1, 100, 100, 380, 450);
    const y = share('router-y', 1, 100, 100, 380, 390);
    expect(e.see(460, own, [x, y, share(ME, 1, 1, 1, 0, 455)], ME, 2, 9, 420).ledgerAtReport).to.equal(1 + 2 + 1);
  });
});
