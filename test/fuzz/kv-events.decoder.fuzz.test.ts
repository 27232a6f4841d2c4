// kv-events §2, §3, §6 decoders under mutation: live frames, batch payloads (decoded, then applied
// to a small index) and snapshot replies (decoded, assembled, built into an index). The contract:
// every input ends in a result or a StreamError (parse, protocol, limit, inconsistent), never
// another exception and never a hang. `live-diff` is differential: the decoder must decode every
// payload exactly as an independent reading of §3 over @msgpack/msgpack does (reference-batch.ts),
// same events or the same error class; `snapshot-diff` does the same for §6 chunks. Seeds are the spec's examples and simulator output
// (test/fuzz/corpus/live-batch, snapshot-chunk). `residency-mirror` checks the shared group
// index (shared/index) fed by the index's residency observer against the index itself. FUZZ_SEED reproduces a run, FUZZ_ITERATIONS
// lengthens it (default: a short form for npm test).
import { expect } from 'chai';
import { MIB } from './lib/memory.js';
import { fuzzIterations, fuzzSeed } from './lib/knobs.js';
import { HEAP_GROWTH_BOUND_BYTES, runGuardedFuzz } from './fuzz-runner.js';

const SEED = fuzzSeed();

describe(`kv-events decoders under a seeded mutation fuzzer (FUZZ_SEED=${SEED})`, function () {
  this.timeout(120_000);

  for (const [target, shortForm] of [
    ['live-frame', 2000],
    ['live-batch', 2500],
    ['snapshot-reply', 2000],
    ['live-diff', 2000],
    ['snapshot-diff', 2000],
    ['residency-mirror', 2000],
  ] as const) {
    it(`${target}: only StreamErrors are thrown, no input hangs, the heap does not grow`, async () => {
      const r = await runGuardedFuzz({ target, seed: SEED, iterations: fuzzIterations(shortForm) });
      const growth = r.heapGrowthBytes;
      console.log(`      ${target}: ${JSON.stringify(r.outcomes)}; heap growth ${(growth / MIB).toFixed(1)} MiB${r.gcExposed ? '' : ' (no --expose-gc: reported only)'}`);
      if (r.gcExposed) expect(growth, 'heap growth after gc').to.be.lessThan(HEAP_GROWTH_BOUND_BYTES);
      // The mutations must reach past the first check: some inputs still decode.
      expect((r.outcomes['ok'] ?? 0) + (r.outcomes['both_ok'] ?? 0), 'inputs that decoded (and applied)').to.be.greaterThan(0);
    });
  }
});
