/**
 * FlushTimer (shared/timing/flush-timer.ts): one batching timer, asked for a run within a delay
 * or throttled against the previous run; the earlier due time wins. Orders of runs only, never
 * their timing.
 */
import { expect } from 'chai';
import { FlushTimer } from '../../../shared/timing/flush-timer.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('FlushTimer', () => {
  it('throttled after a quiet spell runs at the end of this turn, once for every request of the turn', async () => {
    let runs = 0;
    const t = new FlushTimer(() => runs++);
    t.throttled(50);
    t.throttled(50);
    expect(runs).to.equal(0);
    await turn();
    expect(runs).to.equal(1);
    expect(t.pending).to.equal(false);
  });

  it('throttled right after a run waits out the interval; a later within() cannot push it back', async () => {
    let runs = 0;
    const t = new FlushTimer(() => runs++);
    t.throttled(40);
    await turn();
    t.throttled(40);
    t.within(10_000);
    await turn();
    expect(runs).to.equal(1);
    expect(t.pending).to.equal(true);
    await sleep(60);
    expect(runs).to.equal(2);
  });

  it('within() pulls nothing forward that is due earlier, and a throttled request pulls a pending within() forward', async () => {
    let runs = 0;
    const t = new FlushTimer(() => runs++);
    t.within(10_000);
    t.throttled(0);
    await turn();
    expect(runs).to.equal(1);
    expect(t.pending).to.equal(false);
  });

  it('ranNow() drops the pending run (the owner flushed by itself) and restarts the interval; cancel() drops it only', async () => {
    let runs = 0;
    const t = new FlushTimer(() => runs++);
    t.within(5);
    t.ranNow();
    await sleep(20);
    expect(runs).to.equal(0);
    t.within(5);
    t.cancel();
    await sleep(20);
    expect(runs).to.equal(0);
  });

  it("soon = 'microtask': runs right after the current code, before the turn's other callbacks; cancel() withdraws it", async () => {
    const order: string[] = [];
    const t = new FlushTimer(() => order.push('flush'), undefined, 'microtask');
    setImmediate(() => order.push('immediate'));
    t.throttled(0);
    t.throttled(0);
    order.push('sync');
    await Promise.resolve();
    expect(order).to.deep.equal(['sync', 'flush']);
    t.throttled(0);
    t.cancel();
    await turn();
    expect(order).to.deep.equal(['sync', 'flush', 'immediate']);
  });
});
