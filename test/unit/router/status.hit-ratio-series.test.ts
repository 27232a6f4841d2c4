// The status page's hit-ratio series (router-svc/status/hit-ratio-series.ts): decisions recorded
// between two ticks become one per-second point; the window and the decision ring are bounded.
// Manual ticks (intervalMs 0) with the time passed in: no timers, no clock.
import { expect } from 'chai';
import { HitRatioSeries } from '../../../router-svc/status/hit-ratio-series.js';

describe('status page hit-ratio series', () => {
  it('a tick closes one second: mean, max and count of the decisions since the previous tick', () => {
    const s = new HitRatioSeries({ intervalMs: 0 });
    s.record(0);
    s.record(0.5);
    s.record(1);
    s.tick(1000);
    s.record(0.25);
    s.tick(2000);
    expect(s.series()).to.deep.equal([
      { tMs: 1000, mean: 0.5, max: 1, count: 3 },
      { tMs: 2000, mean: 0.25, max: 0.25, count: 1 },
    ]);
    expect(s.decisions).to.equal(4);
  });

  it('a second without decisions is a point with count 0', () => {
    const s = new HitRatioSeries({ intervalMs: 0 });
    s.tick(1000);
    expect(s.series()).to.deep.equal([{ tMs: 1000, mean: 0, max: 0, count: 0 }]);
  });

  it('keeps the last windowSeconds points, oldest first', () => {
    const s = new HitRatioSeries({ intervalMs: 0, windowSeconds: 3 });
    for (let t = 1; t <= 5; t++) {
      s.record(t / 10);
      s.tick(t * 1000);
    }
    expect(s.series().map((p) => [p.tMs, p.mean])).to.deep.equal([
      [3000, 0.3],
      [4000, 0.4],
      [5000, 0.5],
    ]);
  });

  it('a second with more decisions than the ring holds averages the latest ones and counts them all', () => {
    const s = new HitRatioSeries({ intervalMs: 0, decisionCapacity: 4 });
    for (let i = 0; i < 6; i++) s.record(i < 2 ? 1 : 0); // the two 1s are overwritten
    s.tick(1000);
    expect(s.series()).to.deep.equal([{ tMs: 1000, mean: 0, max: 0, count: 6 }]);
  });

  it('with a timer: starts at the first decision and stops after a window of idle seconds', async () => {
    let now = 0;
    const s = new HitRatioSeries({ intervalMs: 5, windowSeconds: 2, clock: () => (now += 1000) });
    try {
      s.record(1);
      // Ticks: one with the decision, then two idle ones fill the window and stop the timer.
      while (now < 3000) await new Promise((r) => setTimeout(r, 5));
      expect(s.series().map((p) => p.count)).to.deep.equal([0, 0]);
      // Stopped: ten more periods pass without a tick.
      await new Promise((r) => setTimeout(r, 50));
      expect(now).to.equal(3000);
      s.record(0.5);
      while (now < 4000) await new Promise((r) => setTimeout(r, 5));
      expect(s.series().map((p) => p.count)).to.deep.equal([0, 1]);
    } finally {
      s.close();
    }
  });
});
