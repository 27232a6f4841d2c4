/**
 * The TTFT policy's pure parts (docs/concepts.md "Routing by predicted time to first token"; issue 27): the cost
 * (ttft-cost.ts), the prefill throughput estimate with its prior (prefill-throughput.ts) and the
 * worth of a reported waiting request (routed-prefill-mean.ts), and the near-tie rule (work-slack.ts).
 * Hand-computed numbers throughout.
 *
 *   queued_tokens = known_tokens + max(0, waiting_unknown · per_waiting − θ · since_report_ms)
 *   device_kept   = min(device, max(0, K − queued_tokens))   (device when K unknown)
 *   own_tokens    = input − device_kept − host_only + c · host_only
 *   predicted_ms  = (queued_tokens + own_tokens) / θ
 */
import { expect } from 'chai';
import { newTtftPrediction, ownPrefillTokens, predictTtft, survivingHitTokens, type TtftTerms } from '../../../router-svc/policy/ttft-cost.js';
import { PrefillThroughput } from '../../../router-svc/policy/prefill-throughput.js';
import { RoutedPrefillMean } from '../../../router-svc/policy/routed-prefill-mean.js';
import { keepLeastWork, slackFor, tieWithin } from '../../../router-svc/policy/work-slack.js';

const BASE: TtftTerms = {
  inputTokens: 1000,
  deviceHitTokens: 0,
  hostOnlyHitTokens: 0,
  pendingHitTokens: 0,
  hostTokenCost: 0.25,
  waitingUnknown: 0,
  tokensPerWaiting: 0,
  sinceReportMs: 0,
  knownTokens: 0,
  workedOffTokens: 0,
  tokensPerMs: 10,
  deviceCapacityTokens: 0,
  aheadTokens: 0,
  afterPendingTokens: 0,
};

function predict(over: Partial<TtftTerms>) {
  return predictTtft({ ...BASE, ...over }, newTtftPrediction());
}

describe('TTFT policy: the cost (TT1), throughput (TT2) and per-waiting worth', () => {
  describe('TT1 cost', () => {
    it('TT1 own tokens: a Device hit is free, a Host-only hit costs c of a recompute', () => {
      expect(ownPrefillTokens(1000, 600, 0, 0.25)).to.equal(400);
      // 1000 − 200 − 400 + .25 · 400 = 500
      expect(ownPrefillTokens(1000, 200, 400, 0.25)).to.equal(500);
      expect(ownPrefillTokens(1000, 200, 400, 0)).to.equal(400);
      expect(ownPrefillTokens(1000, 200, 400, 1)).to.equal(800);
      // Hits beyond the prompt are clamped to it; negative ones to 0.
      expect(ownPrefillTokens(100, 160, 50, 0.25)).to.equal(0);
      expect(ownPrefillTokens(100, 60, 80, 0.5)).to.equal(20);
      expect(ownPrefillTokens(100, -5, 0, 0.5)).to.equal(100);
    });

    it('TT1 an idle engine: predicted = own tokens / θ', () => {
      expect(predict({ deviceHitTokens: 600 })).to.deep.equal({ ownTokens: 400, deviceCreditTokens: 600, hostOnlyCreditTokens: 0, evictedHitTokens: 0, queuedTokens: 0, queueMs: 0, ownMs: 40, predictedMs: 40 });
    });

    it('TT1 queued tokens, not requests: 3 waiting × 2,000 tokens is 600 ms ahead at 10 tokens/ms', () => {
      const p = predict({ waitingUnknown: 3, tokensPerWaiting: 2000 });
      expect(p).to.include({ queuedTokens: 6000, queueMs: 600, ownMs: 100, predictedMs: 700 });
      // The same count of short requests weighs a thousandth as much.
      expect(predict({ waitingUnknown: 3, tokensPerWaiting: 2 }).queueMs).to.equal(0.6);
    });

    it('TT1 the engine works the reported backlog off after the report: 6,000 − 10 · 250 = 3,500 left, never below 0', () => {
      expect(predict({ waitingUnknown: 3, tokensPerWaiting: 2000, sinceReportMs: 250 }).queuedTokens).to.equal(3500);
      expect(predict({ waitingUnknown: 3, tokensPerWaiting: 2000, sinceReportMs: 5000 }).queuedTokens).to.equal(0);
      expect(predict({ waitingUnknown: 3, tokensPerWaiting: 2000, sinceReportMs: -100 }).queuedTokens).to.equal(6000);
    });

    it('TT1 known tokens (ledgers, in-flight decisions) are not worked off: they are counted as they stand', () => {
      const p = predict({ waitingUnknown: 1, tokensPerWaiting: 1000, sinceReportMs: 1000, knownTokens: 2500 });
      expect(p).to.include({ queuedTokens: 2500, queueMs: 250, predictedMs: 350 });
    });

    it('TT1 a full pool keeps of a Device hit only what fits beside the queued prefill ahead', () => {
      // Pool of 3,000 tokens: 2,500 queued ahead leave room for 500 of the 1,200-token hit.
      expect(survivingHitTokens(1200, 2500, 3000)).to.equal(500);
      expect(survivingHitTokens(1200, 1000, 3000)).to.equal(1200);
      expect(survivingHitTokens(1200, 4000, 3000)).to.equal(0);
      // A pool never seen full (K = 0) keeps the whole hit.
      expect(survivingHitTokens(1200, 1e9, 0)).to.equal(1200);
      // 1000 input, 800 Device hit, 2,700 queued, K 3,000: 300 kept, own 700, 500 evicted.
      const p = predict({ deviceHitTokens: 800, knownTokens: 2700, deviceCapacityTokens: 3000 });
      expect(p).to.include({ ownTokens: 700, evictedHitTokens: 500, queuedTokens: 2700, predictedMs: 340 });
      // The same with an unknown pool: the whole hit counts.
      expect(predict({ deviceHitTokens: 800, knownTokens: 2700 })).to.include({ ownTokens: 200, evictedHitTokens: 0 });
      // A Host-only hit is not on Device and stays at c: 1000 − 0 − 400 + .25 · 400 = 700.
      expect(predict({ deviceHitTokens: 300, hostOnlyHitTokens: 400, knownTokens: 5000, deviceCapacityTokens: 3000 })).to.include({ ownTokens: 700, evictedHitTokens: 300 });
    });

    it('TT1 what the prompts ahead hold evicts the hit when it exceeds their prefill: a prefix cached there refreshed by them', () => {
      // 300 tokens of prefill queued, but the prompts ahead touch 2,900 tokens of other content: 100 of the 800 kept.
      expect(predict({ deviceHitTokens: 800, knownTokens: 300, aheadTokens: 2900, deviceCapacityTokens: 3000 })).to.include({ ownTokens: 900, evictedHitTokens: 700, queuedTokens: 300 });
    });

    it('TT1 a pending prefix is computed by a request queued ahead: the prefill queued is not what evicts it, only the other content ahead; the smaller own work wins', () => {
      // View credit 800 of which 300 kept behind 2,700 queued; a pending prefix of 600 (other content ahead: 0): own 400, the pending credit.
      const p = predict({ deviceHitTokens: 800, pendingHitTokens: 600, knownTokens: 2700, deviceCapacityTokens: 3000 });
      expect(p).to.include({ ownTokens: 400, deviceCreditTokens: 600, hostOnlyCreditTokens: 0, evictedHitTokens: 0 });
      // 2,700 tokens of other prompts ahead leave room for 300 of the pending 600 (and of the view's 800): own 700, 300 evicted.
      expect(predict({ deviceHitTokens: 800, pendingHitTokens: 600, knownTokens: 2700, aheadTokens: 2700, afterPendingTokens: 2700, deviceCapacityTokens: 3000 })).to.include({ ownTokens: 700, deviceCreditTokens: 300, evictedHitTokens: 500 });
      // With room for the whole view hit, the view's 800 beat the pending 600.
      expect(predict({ deviceHitTokens: 800, pendingHitTokens: 600, knownTokens: 2000, deviceCapacityTokens: 3000 })).to.include({ ownTokens: 200, deviceCreditTokens: 800 });
    });

    it('TT1 a throughput of 0 or less is refused', () => {
      expect(() => predict({ tokensPerMs: 0 })).to.throw(RangeError, /tokensPerMs/);
      expect(() => predict({ tokensPerMs: Number.NaN })).to.throw(RangeError);
    });
  });

  describe('TT2 throughput estimate', () => {
    const make = (priorSamples = 8, window = 64): PrefillThroughput => new PrefillThroughput({ priorTokensPerS: 8000, priorSamples, window });

    it('TT2 the prior until an engine is observed (tokens per second in, per ms out)', () => {
      const t = make();
      expect(t.tokensPerMs('a')).to.equal(8);
      expect(t.samples('a')).to.equal(0);
      expect(t.estimates()).to.deep.equal([]);
    });

    it('TT2 the prior weighs as its samples: 8 prior at 8/ms and 8 observations at 2/ms give 5/ms (window ∞)', () => {
      const t = make(8, Number.MAX_VALUE);
      for (let i = 0; i < 8; i++) expect(t.observe('a', 200, 100)).to.equal(true);
      expect(t.tokensPerMs('a')).to.be.closeTo(5, 1e-9);
      expect(t.tokensPerMs('b')).to.equal(8);
    });

    it('TT2 a ratio of sums: 1,000 tokens in 100 ms and 10 tokens in 10 ms is 1,010 / 110, not the mean of 10 and 1', () => {
      const t = make(0, Number.MAX_VALUE);
      t.observe('a', 1000, 100);
      t.observe('a', 10, 10);
      expect(t.tokensPerMs('a')).to.be.closeTo(1010 / 110, 1e-12);
      expect(t.estimates()).to.deep.equal([{ instance: 'a', tokensPerS: (1010 / 110) * 1000, samples: 2 }]);
    });

    it('TT2 the prior fades: after 10 windows of observations at 2/ms the estimate is within 0.1% of 2', () => {
      const t = make(8, 16);
      for (let i = 0; i < 160; i++) t.observe('a', 200, 100);
      expect(t.tokensPerMs('a')).to.be.closeTo(2, 0.002);
      // The decayed count never exceeds the window.
      expect(t.samples('a')).to.be.lessThan(16);
    });

    it('TT2 window 1 follows the last observation alone', () => {
      const t = make(8, 1);
      t.observe('a', 300, 100);
      expect(t.tokensPerMs('a')).to.equal(3);
      t.observe('a', 100, 100);
      expect(t.tokensPerMs('a')).to.equal(1);
    });

    it('TT2 observations that carry nothing are refused: no work, a time of 0, NaN or Infinity', () => {
      const t = make();
      expect(t.observe('a', 0, 50)).to.equal(false);
      expect(t.observe('a', 0.5, 50)).to.equal(false);
      expect(t.observe('a', 100, 0)).to.equal(false);
      expect(t.observe('a', Number.NaN, 50)).to.equal(false);
      expect(t.observe('a', 100, Number.POSITIVE_INFINITY)).to.equal(false);
      expect(t.tokensPerMs('a')).to.equal(8);
      expect(t.samples('a')).to.equal(0);
    });

    it('TT2 engines gone from the fleet are forgotten', () => {
      const t = make(0);
      t.observe('a', 100, 10);
      t.observe('b', 100, 50);
      t.retainOnly(new Set(['b']));
      expect(t.estimates().map((e) => e.instance)).to.deep.equal(['b']);
      expect(t.tokensPerMs('a')).to.equal(8);
    });

    it('TT2 bad options are refused', () => {
      expect(() => new PrefillThroughput({ priorTokensPerS: 0, priorSamples: 1, window: 1 })).to.throw(RangeError, /priorTokensPerS/);
      expect(() => new PrefillThroughput({ priorTokensPerS: 1, priorSamples: -1, window: 1 })).to.throw(RangeError, /priorSamples/);
      expect(() => new PrefillThroughput({ priorTokensPerS: 1, priorSamples: 1, window: 0.5 })).to.throw(RangeError, /window/);
    });
  });

  describe('what a reported waiting request is worth (routed-prefill-mean.ts)', () => {
    it("TT1 the caller's guess before any decision; then the engine's exponential mean, starting from the overall one", () => {
      const m = new RoutedPrefillMean(4);
      expect(m.tokensPerRequest('a', 123)).to.equal(123);
      m.record('a', 1000);
      expect(m.tokensPerRequest('a', 123)).to.equal(1000);
      // b has had nothing: the overall mean.
      expect(m.tokensPerRequest('b', 123)).to.equal(1000);
      m.record('b', 200);
      // b starts from the overall 1,000 and moves a quarter of the way to 200.
      expect(m.tokensPerRequest('b', 0)).to.equal(800);
      m.record('a', 3000);
      expect(m.tokensPerRequest('a', 0)).to.equal(1500);
      m.record('a', Number.NaN);
      expect(m.tokensPerRequest('a', 0)).to.equal(1500);
      m.retainOnly(new Set(['b']));
      expect(m.tokensPerRequest('a', 0)).to.be.greaterThan(0).and.not.equal(1500);
    });
  });

  describe('near ties (TT13): the slack, widened by the share of the soonest prediction a cached prefix spares, and the tie tolerance', () => {
    it('slackFor: the slack alone without a saving or without --ttft_slack_growth; up to 1 + growth times it, by the share of the soonest prediction spared', () => {
      // [slack, spared ms, soonest ms, growth] → the widened slack.
      const cases: [number, number, number, number, number][] = [
        [1, 0, 500, 2, 1], // nothing spared
        [1, -50, 500, 2, 1], // more work than the soonest: no widening either
        [1, 400, 500, 0, 1], // growth 0: the plain slack
        [1, 250, 500, 2, 2], // half the soonest spared: 1 + 2 · 0.5
        [0.5, 500, 500, 2, 1.5], // all of it: three times the slack
        [1, 3000, 500, 2, 3], // beyond it: still three times
        [1, 250, 500, 1, 1.5],
        [0, 3000, 500, 2, 0], // a slack of 0 stays 0
        [1, 100, 0, 2, 1], // no soonest prediction to weigh against (0 ms)
      ];
      for (const [slack, spared, soonest, growth, want] of cases) expect(slackFor(slack, spared, soonest, growth), `${slack}, ${spared}, ${soonest}, ${growth}`).to.equal(want);
    });

    it('keepLeastWork: within each one\'s slack of the soonest the least work alone stays; the soonest index is returned', () => {
      // At 10 tokens/ms. 0: soonest (100 ms), 1,000 tokens. 1: 2.9× later, 0 tokens (spares 100 ms of 100: slack 3).
      // 2: 2.5× later, 900 tokens (spares 10 ms of 100: slack 1.2).
      const scores = Float64Array.of(100, 290, 250, 400);
      const work = Float64Array.of(1000, 0, 900, 0);
      const rate = Float64Array.of(10, 10, 10, 10);
      expect(keepLeastWork(scores, work, rate, 3, 1, 2)).to.equal(0);
      // Only candidate 1 is left: 2, beyond its own slack yet sooner than 1, must not win for having less work than the soonest.
      expect([...scores.subarray(0, 3)]).to.deep.equal([Infinity, 290, Infinity]);
      // Past `count` nothing is touched.
      expect(scores[3]).to.equal(400);
    });

    it('keepLeastWork: the spared work is timed at the soonest engine\'s throughput', () => {
      // Candidate 1 spares 1,000 tokens: at 10 tokens/ms 100 ms (slack 3, 290 within); at 100 tokens/ms 10 ms (slack 1.2, 290 beyond).
      const slow = Float64Array.of(100, 290);
      expect(keepLeastWork(slow, Float64Array.of(1000, 0), Float64Array.of(10, 1), 2, 1, 2)).to.equal(0);
      expect([...slow]).to.deep.equal([Infinity, 290]);
      const fast = Float64Array.of(100, 290);
      expect(keepLeastWork(fast, Float64Array.of(1000, 0), Float64Array.of(100, 1), 2, 1, 2)).to.equal(0);
      expect([...fast]).to.deep.equal([100, Infinity]);
    });

    it('keepLeastWork: without growth the plain slack decides, and beyond it the soonest stays', () => {
      const scores = Float64Array.of(100, 290);
      expect(keepLeastWork(scores, Float64Array.of(1000, 0), Float64Array.of(10, 10), 2, 1, 0)).to.equal(0);
      expect([...scores]).to.deep.equal([100, Infinity]);
      expect(keepLeastWork(new Float64Array(0), new Float64Array(0), new Float64Array(0), 0, 1, 2)).to.equal(-1);
    });

    it('tieWithin (--ttft_tie_tolerance): what is left within the tolerance of its smallest becomes equal to it; dropped ones stay dropped', () => {
      // What keepLeastWork left: 0 dropped, 1 the soonest left, 2 at 4% behind it, 3 at 6%, 4 past `count`.
      const scores = Float64Array.of(Infinity, 200, 208, 212, 201);
      expect(tieWithin(scores, 4, 0.05)).to.equal(2);
      expect([...scores]).to.deep.equal([Infinity, 200, 200, 212, 201]);
    });

    it('tieWithin: a tolerance of 0 or nothing left changes nothing', () => {
      const scores = Float64Array.of(200, 201);
      expect(tieWithin(scores, 2, 0)).to.equal(0);
      expect([...scores]).to.deep.equal([200, 201]);
      const dropped = Float64Array.of(Infinity, Infinity);
      expect(tieWithin(dropped, 2, 0.05)).to.equal(0);
      expect([...dropped]).to.deep.equal([Infinity, Infinity]);
      expect(tieWithin(new Float64Array(0), 0, 0.05)).to.equal(0);
    });
  });
});
