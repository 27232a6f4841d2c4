// The mutation fuzzer's seed and length: `FUZZ_SEED` reproduces a run, `FUZZ_ITERATIONS` lengthens it.
import { envInt } from '../../helpers/env-int.js';

/** The run's seed: FUZZ_SEED when set, else a fresh one (always printed by the caller on failure). */
export function fuzzSeed(): number {
  return envInt('FUZZ_SEED', Math.floor(Math.random() * 0x7fff_ffff)) >>> 0;
}

/** Iterations per target: `shortForm` in `npm test`, FUZZ_ITERATIONS for long runs. */
export function fuzzIterations(shortForm: number): number {
  return envInt('FUZZ_ITERATIONS', shortForm);
}
