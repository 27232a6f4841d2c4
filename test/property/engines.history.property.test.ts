// engines.md §3 as a property: the kv-events subscriber property (subscriber-truth.ts) for a
// vLLM-kind stream against a vLLM-mode publisher whose history ring is small, so drops,
// duplicates, restarts and corrupt batches meet history rotation (history_lost). At every state
// and view event a SYNCHRONIZED stream equals the publisher's true state at its seq and any other
// serves nothing; after the faults stop it ends synchronized and equal (a history_lost stream is
// brought back by an engine restart, its only way back besides a full-state batch).
//
// Default: FC_RUNS=6 runs of up to 30 actions; FC_RUNS / FC_SEED lengthen or reproduce a run.
import fc from 'fast-check';
import { envInt } from '../helpers/env-int.js';
import { historyScenarioArb } from './engine-history.js';
import { coverage, runHistory } from './subscriber-truth.js';

const RUNS = envInt('FC_RUNS', 6);
const MAX_ACTIONS = envInt('FC_ACTIONS', 30);
const FC_SEED = process.env['FC_SEED'];

describe('engines.md §3 properties: a vLLM-kind subscriber over random faulty histories with rotation', function () {
  this.timeout(Math.max(120_000, RUNS * 60_000));

  it(`a SYNCHRONIZED vllm stream always equals the publisher's true state at its seq, an unsynchronized one reports zero hits (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        historyScenarioArb(MAX_ACTIONS),
        fc.constantFrom(0, 1000),
        fc.constantFrom(3, 8, 10_000),
        fc.constantFrom<'array' | 'map'>('array', 'map'),
        async (scenario, resyncIntervalMs, replayBufferSteps, encoding) =>
          runHistory(scenario, {
            resyncIntervalMs,
            maxBufferedBytes: 1 << 20,
            rig: { engineKind: 'vllm', replayBufferSteps, batchForm: { encoding, omitDpRank: encoding === 'map' } },
          }),
      ),
      { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}), endOnFailure: true },
    );
    console.log(`      coverage ${JSON.stringify(coverage)}`);
  });
});
