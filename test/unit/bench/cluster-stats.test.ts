/**
 * The cluster benchmark's pure helpers: the knee interpolation of the load sweep and the
 * confidence intervals the 4-replica targets print (bench/cluster/load-sweep.ts, rep-stats.ts).
 */
import { expect } from 'chai';
import { kneeRate, poissonStarts, scheduleOf, wrappingSlice } from '../../../bench/cluster/load-sweep.js';
import { confidence, gapResolved, meanCi95, notMeasurablyWorse, ratios, relativeGaps, t95 } from '../../../bench/cluster/rep-stats.js';

describe('cluster benchmark statistics', () => {
  it('kneeRate interpolates between the last step below the limit and the first above; null when none reaches it', () => {
    const base = { rate: 1, ttftP90Ms: 100 };
    expect(kneeRate(base, [{ rate: 2, ttftP90Ms: 200 }, { rate: 4, ttftP90Ms: 600 }], 500)).to.equal(3.5);
    expect(kneeRate(base, [{ rate: 2, ttftP90Ms: 600 }], 500)).to.be.closeTo(1 + 0.8, 1e-12);
    expect(kneeRate(base, [{ rate: 2, ttftP90Ms: 200 }], 500)).to.equal(null);
  });

  it('poissonStarts is seeded, starts at 0 and has mean gap 1/rate', () => {
    const a = poissonStarts(4000, 10, 7);
    expect(a).to.deep.equal(poissonStarts(4000, 10, 7));
    expect(a[0]).to.equal(0);
    expect(a.at(-1)! / (a.length - 1)).to.be.closeTo(100, 8);
  });

  it('scheduleOf: repetition 0 is the sweep\'s schedule; later ones take other sessions and arrival seeds, a trace\'s stretches spread over it', () => {
    expect(scheduleOf(160, 21, 0, 3, false)).to.deep.equal({ from: 0, seedOffset: 0 });
    const generated = [1, 2, 3, 7].map((rep) => scheduleOf(160, 21, rep, 10, false));
    expect(generated.map((s) => s.from)).to.deep.equal([21, 42, 63, 147]);
    expect(new Set(generated.map((s) => s.seedOffset)).size).to.equal(4);
    expect(generated.every((s) => s.seedOffset !== 0)).to.equal(true);
    // Wrapping past the population's end (the caller joins the end and the start).
    expect(scheduleOf(160, 21, 8, 10, false).from).to.equal(8);
    // A trace: n consecutive requests from starts spread over it, with the trace's own times.
    expect([0, 1, 2].map((rep) => scheduleOf(480, 196, rep, 3, true))).to.deep.equal([
      { from: 0, seedOffset: 0 },
      { from: 142, seedOffset: 0 },
      { from: 284, seedOffset: 0 },
    ]);
    expect(scheduleOf(600, 100, 2, 3, true).from).to.equal(500);
    expect([0, 1, 2].map((rep) => scheduleOf(50, 50, rep, 3, true).from)).to.deep.equal([0, 0, 0]);
    expect(scheduleOf(50, 20, 0, 1, true).from).to.equal(0);
    expect(() => scheduleOf(10, 11, 0, 1, false)).to.throw(RangeError, /n ≤ population/);
    expect(() => scheduleOf(10, 5, 3, 3, true)).to.throw(RangeError, /rep < reps/);
  });

  it('wrappingSlice: n items of the population from `from`, joining its end and its start; never past the population', () => {
    const items = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9];
    expect(wrappingSlice(items, 8, 2, 4)).to.deep.equal([2, 3, 4, 5]);
    expect(wrappingSlice(items, 8, 6, 4)).to.deep.equal([6, 7, 0, 1]);
    expect(wrappingSlice(items, 8, 0, 8)).to.deep.equal([0, 1, 2, 3, 4, 5, 6, 7]);
  });

  it('meanCi95: Student t half-width over repetitions; none for a single value', () => {
    expect(t95(2)).to.equal(4.303);
    expect(t95(50)).to.equal(1.96);
    const { mean, halfWidth } = meanCi95([1, 2, 3]);
    expect(mean).to.equal(2);
    expect(halfWidth).to.be.closeTo(4.303 * Math.sqrt(1 / 3), 1e-9);
    expect(meanCi95([5]).halfWidth).to.equal(null);
  });

  it('paired repetitions: signed relative gaps and ratios, rounded confidence for a JSON line', () => {
    expect(relativeGaps([0.5, 0.8], [0.55, 0.8])).to.deep.equal([0.10000000000000009, 0]);
    expect(ratios([2, 4], [1, 4])).to.deep.equal([0.5, 1]);
    expect(confidence([0.1, 0.1, 0.1])).to.deep.equal({ reps: 3, mean: 0.1, ci95: [0.1, 0.1] });
    expect(confidence([0.2]).ci95).to.equal(null);
  });

  it('gapResolved: the paired gap\'s 95% half-width against a margin, whatever the gap itself; never on one pair', () => {
    // Gaps 10%, 10%, 10%: wide of any 2% verdict, but known exactly.
    expect(gapResolved([1, 1, 1], [1.1, 1.1, 1.1], 0.02)).to.equal(true);
    // Gaps −5%, +5%, −5%, +5%: mean 0, half-width 3.182 · 0.0577/2 ≈ 9.2%.
    expect(gapResolved([1, 1, 1, 1], [0.95, 1.05, 0.95, 1.05], 0.02)).to.equal(false);
    expect(gapResolved([1, 1, 1, 1], [0.95, 1.05, 0.95, 1.05], 0.1)).to.equal(true);
    expect(gapResolved([1], [1], 0.5)).to.equal(false);
  });

  it('notMeasurablyWorse ("no worse than CAR"): a pooled speedup of at least 1, or per-repetition speedups whose interval reaches 1', () => {
    // A tie: pooled 0.98, per repetition 0.95, 1.02, 0.97, 1.04 (interval about 0.93–1.06): not measurably worse.
    const tie = confidence([0.95, 1.02, 0.97, 1.04]);
    expect(notMeasurablyWorse(0.98, tie)).to.equal(true);
    // Worse on every repetition: 0.90, 0.92, 0.91, 0.93 (interval about 0.89–0.94) and pooled below 1: not met.
    const worse = confidence([0.9, 0.92, 0.91, 0.93]);
    expect(notMeasurablyWorse(0.91, worse)).to.equal(false);
    // A pooled speedup of 1 or more is met on its own, even with one repetition (no interval).
    expect(notMeasurablyWorse(1, confidence([0.9]))).to.equal(true);
    expect(notMeasurablyWorse(0.99, confidence([0.99]))).to.equal(false);
  });
});
