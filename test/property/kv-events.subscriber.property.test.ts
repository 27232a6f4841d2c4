// kv-events §5–§7 as properties over random engine histories: a REAL StreamSubscriber against a
// REAL RankPublisher over TCP ZeroMQ, the publisher driven by the simulator's BlockPool with faults
// injected (test/property/engine-history.ts). At every state move, applied batch and index swap
// of the subscriber:
//   - SYNCHRONIZED at seq S: the served index equals the publisher's true state after batch S
//     (§7.5 equality: same engine hashes, same tier sets, same keys where both are indexed), and
//     its residency (exportResidency) is the true residency: every served key is a resident
//     block's key with that block's tiers, every resident root block is served;
//   - any other state: no index and zero hits (§7 "only SYNCHRONIZED serves hits").
// Eventually, after the faults stop and a quiet period, the stream is SYNCHRONIZED at the last
// published seq and equal to the true state.
//
//   BlockPool ──events──▶ RankPublisher ──PUB [topic, seq, batch]──▶ StreamSubscriber ──▶ checks
//      │  truth(epoch, seq)   └─ROUTER snapshot (faults per request)◀─DEALER─┘
//      └──────────────────────────────────────────────────────────────────────────▲
//
// Default: FC_RUNS=8 runs of up to 30 actions; FC_RUNS / FC_SEED lengthen or reproduce a run
// (fast-check prints the seed and path of a failure).
import fc from 'fast-check';
import { envInt } from '../helpers/env-int.js';
import { historyScenarioArb } from './engine-history.js';
import { coverage, runHistory } from './subscriber-truth.js';

const RUNS = envInt('FC_RUNS', 8);
const MAX_ACTIONS = envInt('FC_ACTIONS', 30);
const FC_SEED = process.env['FC_SEED'];

describe('kv-events §5–§7 properties: a real subscriber over random faulty engine histories', function () {
  this.timeout(Math.max(120_000, RUNS * 60_000));

  it(`a SYNCHRONIZED stream always equals the publisher's true state at its seq, others serve nothing, and it ends synchronized and equal (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        historyScenarioArb(MAX_ACTIONS),
        fc.constantFrom(0, 900),
        // A small recovery buffer: batches arriving during a slow snapshot overflow it (§7.2 limit).
        fc.constantFrom(1 << 20, 3000),
        async (scenario, resyncIntervalMs, maxBufferedBytes) => runHistory(scenario, { resyncIntervalMs, maxBufferedBytes }),
      ),
      { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}), endOnFailure: true },
    );
    console.log(`      coverage ${JSON.stringify(coverage)}`);
  });
});
