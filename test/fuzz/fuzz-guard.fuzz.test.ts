// The fuzz runner's own guarantees, shown with targets that misbehave on purpose at one input:
// a synchronous infinite loop is stopped by the wall-clock guard and reported as a hang, and an
// exception outside the contract is reported; both name the seed, the iteration and the input,
// so `FUZZ_SEED=<seed>` reproduces them.
import { expect } from 'chai';
import { Rng } from './lib/rng.js';
import { SELFTEST_BAD_INPUT } from './fuzz-targets.js';
import { runGuardedFuzz } from './fuzz-runner.js';

/** Iterations 0..3 of seed 1: input 3 is the bad one, as long as no earlier input equals it. */
const EARLIER_CLEAN = [0, 1, 2].every((i) => Rng.forIteration(1, i).int(1000) !== SELFTEST_BAD_INPUT);

describe('fuzz runner guard: hangs and contract violations are failures that name their input', function () {
  this.timeout(60_000);

  it('a target stuck in a synchronous loop is killed by the wall-clock guard and reported as a hang of iteration 3', async () => {
    expect(EARLIER_CLEAN).to.equal(true);
    const err = await runGuardedFuzz({ target: 'selftest-hang', seed: 1, iterations: 10, hangMs: 1500 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).message).to.match(/FUZZ_SEED=1, iteration 3\): no progress for 1500 ms \(hang\)/);
    expect((err as Error).message).to.contain(`input 3: number ${SELFTEST_BAD_INPUT}`);
  });

  it('an exception outside the contract fails the run with the seed, the iteration and the input', async () => {
    const err = await runGuardedFuzz({ target: 'selftest-throw', seed: 1, iterations: 10 }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).message).to.match(/FUZZ_SEED=1, iteration 3\): selftest-throw: threw TypeError: deliberate/);
    expect((err as Error).message).to.contain(`input 3: number ${SELFTEST_BAD_INPUT}`);
  });
});
