// Run-length knobs from the environment, shared by the fast-check properties (FC_RUNS…) and the
// mutation fuzzer (FUZZ_SEED, FUZZ_ITERATIONS).

/** An integer from the environment (FUZZ_SEED, FUZZ_ITERATIONS, FC_RUNS…), else `fallback`. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return n;
}
