// Config, discovery, MetaService and router parsers under a seeded mutation fuzzer (token-level
// JSON mutations of the seeds in test/fuzz/corpus/). Each parser's error contract:
//   heartbeat (discovery.md)            → DiscoveryError only
//   kv-events config (kv-events §9)     → ConfigError only
//   directory/router flags              → ConfigError only
//   MetaService config (kvcm-meta §8)   → never throws (errors are returned)
//   MetaService JSON + RequestReader    → JsonParseError / BadRequestError only (kvcm-meta §1.2: 400)
//   router bodies (routing.md HTTP API) → RouterHttpError only
// FUZZ_SEED reproduces a run, FUZZ_ITERATIONS lengthens it.
import { expect } from 'chai';
import { MIB } from './lib/memory.js';
import { fuzzIterations, fuzzSeed } from './lib/knobs.js';
import { HEAP_GROWTH_BOUND_BYTES, runGuardedFuzz } from './fuzz-runner.js';

const SEED = fuzzSeed();

describe(`config, discovery, MetaService and router parsers under a seeded mutation fuzzer (FUZZ_SEED=${SEED})`, function () {
  this.timeout(120_000);

  for (const [target, contract, shortForm] of [
    ['heartbeat', 'only DiscoveryError', 2000],
    ['kv-events-config', 'only ConfigError', 2000],
    ['flags', 'only ConfigError', 1500],
    ['meta-config', 'nothing thrown', 500],
    ['meta-request', 'only JsonParseError or BadRequestError', 2000],
    ['router-body', 'only RouterHttpError', 1500],
  ] as const) {
    it(`${target}: ${contract}, no input hangs, the heap does not grow`, async () => {
      const r = await runGuardedFuzz({ target, seed: SEED, iterations: fuzzIterations(shortForm) });
      console.log(`      ${target}: ${JSON.stringify(r.outcomes)}; heap growth ${(r.heapGrowthBytes / MIB).toFixed(1)} MiB${r.gcExposed ? '' : ' (no --expose-gc: reported only)'}`);
      if (r.gcExposed) expect(r.heapGrowthBytes, 'heap growth after gc').to.be.lessThan(HEAP_GROWTH_BOUND_BYTES);
      expect(Object.keys(r.outcomes).length, 'distinct outcomes (the mutations reach more than one path)').to.be.greaterThan(1);
    });
  }
});
