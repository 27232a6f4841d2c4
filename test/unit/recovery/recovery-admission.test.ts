// The directory-wide snapshot admission (max_concurrent_recoveries, our extension beyond
// kv-events §9): FIFO grants, cancellation that leaves the queue without taking a slot,
// idempotent release, and tryAcquire never overtaking the queue. Pure: promises only.
import { expect } from 'chai';
import { AdmissionCancelledError, RecoveryAdmission } from '../../../directory-svc/recovery/recovery-admission.js';
import type { ReleaseSlot } from '../../../directory-svc/recovery/recovery-admission.js';

/** Lets every pending promise callback run. */
function settle(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

describe('recovery admission (max_concurrent_recoveries)', () => {
  it('grants up to capacity at once, then queues', async () => {
    const a = new RecoveryAdmission(2);
    const r1 = await a.acquire();
    const r2 = await a.acquire();
    expect(a.inUse).to.equal(2);
    let third: ReleaseSlot | null = null;
    void a.acquire().then((r) => (third = r));
    await settle();
    expect(third).to.equal(null);
    expect(a.queued).to.equal(1);
    r1();
    await settle();
    expect(third).to.be.a('function');
    expect(a.inUse).to.equal(2);
    expect(a.queued).to.equal(0);
    r2();
    third!();
    expect(a.inUse).to.equal(0);
  });

  it('grants waiters in request order (FIFO)', async () => {
    const a = new RecoveryAdmission(1);
    const first = await a.acquire();
    const order: number[] = [];
    const releases: ReleaseSlot[] = [];
    for (let i = 0; i < 4; i++) {
      void a.acquire().then((r) => {
        order.push(i);
        releases.push(r);
      });
    }
    first();
    for (let i = 0; i < 4; i++) {
      await settle();
      expect(order).to.have.length(i + 1);
      releases[i]();
    }
    expect(order).to.deep.equal([0, 1, 2, 3]);
    expect(a.inUse).to.equal(0);
  });

  it('release is idempotent: a second call frees nothing', async () => {
    const a = new RecoveryAdmission(1);
    const r = await a.acquire();
    r();
    r();
    expect(a.inUse).to.equal(0);
    const again = a.tryAcquire();
    expect(again).to.be.a('function');
    expect(a.tryAcquire()).to.equal(null);
    r(); // a stale release must not free the slot someone else now holds
    expect(a.inUse).to.equal(1);
  });

  it('a cancelled waiter leaves the queue, rejects, and takes no slot', async () => {
    const a = new RecoveryAdmission(1);
    const held = await a.acquire();
    const ctl = new AbortController();
    let error: unknown = null;
    void a.acquire(ctl.signal).catch((e: unknown) => (error = e));
    let next: ReleaseSlot | null = null;
    void a.acquire().then((r) => (next = r));
    expect(a.queued).to.equal(2);
    ctl.abort();
    await settle();
    expect(error).to.be.instanceOf(AdmissionCancelledError);
    expect(a.queued).to.equal(1);
    held();
    await settle();
    expect(next).to.be.a('function');
    expect(a.inUse).to.equal(1);
    next!();
    expect(a.inUse).to.equal(0);
  });

  it('an already-aborted signal rejects at once; abort after the grant changes nothing', async () => {
    const a = new RecoveryAdmission(1);
    const ctl = new AbortController();
    ctl.abort();
    let error: unknown = null;
    await a.acquire(ctl.signal).catch((e: unknown) => (error = e));
    expect(error).to.be.instanceOf(AdmissionCancelledError);
    expect(a.inUse).to.equal(0);
    const late = new AbortController();
    const r = await a.acquire(late.signal);
    late.abort();
    expect(a.inUse).to.equal(1);
    r();
    expect(a.inUse).to.equal(0);
  });

  it('tryAcquire succeeds only with a free slot and nobody queued', async () => {
    const a = new RecoveryAdmission(1);
    const r = a.tryAcquire();
    expect(r).to.be.a('function');
    expect(a.tryAcquire()).to.equal(null);
    let waiter: ReleaseSlot | null = null;
    void a.acquire().then((x) => (waiter = x));
    r!();
    // The slot went to the waiter, not back to the pool.
    expect(a.tryAcquire()).to.equal(null);
    await settle();
    expect(waiter).to.be.a('function');
    waiter!();
    expect(a.tryAcquire()).to.be.a('function');
  });

  it('rejects a capacity below 1 or not an integer', () => {
    expect(() => new RecoveryAdmission(0)).to.throw(RangeError);
    expect(() => new RecoveryAdmission(1.5)).to.throw(RangeError);
  });
});
