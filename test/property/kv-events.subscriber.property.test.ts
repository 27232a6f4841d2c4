// kv-events §5–§7 as properties over random engine histories: a REAL StreamSubscriber against a
// REAL RankPublisher over TCP ZeroMQ, the publisher driven by the simulator's BlockPool with faults
// injected (test/property/engine-history.ts). At every 'state' and 'view' event of the subscriber:
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
import { expect } from 'chai';
import fc from 'fast-check';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { envInt } from '../helpers/fuzz.js';
import { waitFor } from '../helpers/ports.js';
import { StreamRig, stableClock } from '../helpers/stream-harness.js';
import { residencyMap } from '../helpers/view-model.js';
import { EngineHistory, PROBES, REPLAY_TIMEOUT_MS, historyScenarioArb } from './engine-history.js';
import type { HistoryScenario } from './engine-history.js';

const RUNS = envInt('FC_RUNS', 8);
const MAX_ACTIONS = envInt('FC_ACTIONS', 30);
const FC_SEED = process.env['FC_SEED'];
const MAX_ENTRIES = 100_000;

/** Watches one subscriber: every event is checked against the history's truth. */
class TruthChecker {
  readonly violations: string[] = [];
  /** Lowest publisher epoch the subscriber can still be in (it never goes back). */
  private minEpoch = 0;
  private readonly queries = new StreamQuery();
  checks = 0;
  syncedChecks = 0;

  constructor(
    private readonly rig: StreamRig,
    private readonly history: EngineHistory,
  ) {
    const check = (what: string): void => this.check(what);
    rig.sub.on('state', (s: StreamState) => check(`state ${s}`));
    rig.sub.on('view', (kind: string) => check(`view ${kind}`));
  }

  /** Runs synchronously inside the subscriber's emit: what it sees is exactly what a query would. */
  check(what: string): void {
    this.checks++;
    const sub = this.rig.sub;
    const q = sub.toQueryable();
    if (sub.state !== 'SYNCHRONIZED') {
      if (sub.index !== null || q.index !== null) this.violations.push(`${what}: index visible in ${sub.state}`);
      const matches = this.queries.query(PROBES[0]!, [q]).matches;
      for (const m of matches) {
        if (m.synchronized || m.reusable_prefix_tokens !== 0 || m.device_blocks !== 0 || m.host_blocks !== 0) {
          this.violations.push(`${what}: ${sub.state} stream reports ${JSON.stringify(m, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))}`);
        }
      }
      return;
    }
    this.syncedChecks++;
    const index = sub.index;
    if (index === null) {
      this.violations.push(`${what}: SYNCHRONIZED without an index`);
      return;
    }
    const seq = sub.sequence;
    // The subscriber may still be in an older publisher process than the newest one (it learns of a
    // restart by a disconnect or a seq reset): accept the oldest epoch it can be in that matches.
    const tried: string[] = [];
    for (let epoch = this.minEpoch; epoch <= this.history.epoch; epoch++) {
      const ref = this.history.referenceIndex(epoch, seq, MAX_ENTRIES);
      if (ref === null) continue;
      const residency = residencyMap(index.exportResidency());
      const residencyProblems = this.history.residencyMismatches(epoch, seq, residency);
      if (index.sameStateAs(ref) && residencyProblems.length === 0) {
        this.minEpoch = epoch;
        return;
      }
      tried.push(`epoch ${epoch}: sameStateAs=${index.sameStateAs(ref)} records ${index.recordCount} vs ${ref.recordCount}; ${residencyProblems.slice(0, 4).join('; ')}`);
    }
    this.violations.push(`${what}: SYNCHRONIZED at seq ${seq} differs from the publisher's true state (${tried.length === 0 ? 'no epoch published that seq' : tried.join(' | ')})`);
  }
}

/** What the runs exercised, printed once so a quiet pass still shows the faults it went through. */
const coverage: Record<string, number> = {};
function count(key: string, n = 1): void {
  coverage[key] = (coverage[key] ?? 0) + n;
}

async function runHistory(scenario: HistoryScenario, resyncIntervalMs: number, maxBufferedBytes: number): Promise<void> {
  const rig = await StreamRig.open({
    limits: { replayTimeoutMs: REPLAY_TIMEOUT_MS, resyncIntervalMs, maxBlocksPerStream: MAX_ENTRIES, maxBufferedBytes },
    // Every loss counts as after a stable period, so recoveries start at once (§7.4 n = 0) and a
    // run is not dominated by backoff; aborted recoveries still back off.
    nowMs: stableClock(),
    random: () => 0,
  });
  try {
    const pool = EngineHistory.poolFor(scenario);
    const history = new EngineHistory(rig.pub, pool, rig.hasher, scenario.chunkBlocks);
    // Snapshots come from the pool itself, as the engine simulator serves them.
    rig.pub.setSnapshotSource(() => pool.snapshot());
    const checker = new TruthChecker(rig, history);
    await rig.startSynchronized();
    const settle = async (): Promise<void> => {
      const target = history.lastSeq;
      await waitFor(() => rig.sub.state === 'SYNCHRONIZED' && rig.sub.sequence === target, 2000, 'settle').catch(() => undefined);
    };
    for (const action of scenario.actions) await history.run(action, settle);

    // Faults stop. Without reconciliation one more batch reveals a dropped tail as a gap; with it
    // the quiet period alone must find the silent loss (§7.5).
    await history.endFaults();
    if (resyncIntervalMs === 0) await history.publish([]);
    const lastSeq = history.lastSeq;
    const epoch = history.epoch;
    try {
      await waitFor(() => rig.sub.state === 'SYNCHRONIZED' && rig.sub.sequence === lastSeq, 30_000, `SYNCHRONIZED at seq ${lastSeq}`);
    } catch (e) {
      throw new Error(
        `${e instanceof Error ? e.message : String(e)}: now ${rig.sub.state} at ${rig.sub.sequence} (${rig.sub.error}), backoff n=${rig.sub.consecutiveFailures}\nactions: ${history.log.join(' ')}\nreplies: ${history.replies.join(' ')}`,
      );
    }
    const ref = history.referenceIndex(epoch, lastSeq, MAX_ENTRIES);
    const index = rig.sub.index;
    const report = `\nactions: ${history.log.join(' ')}\nreplies: ${history.replies.join(' ')}\nstates: ${rig.states.join(' ')}\nerrors: ${rig.errors.filter((x) => x !== '').join(' | ')}`;
    expect(checker.violations, `violations${report}`).to.deep.equal([]);
    expect(history.log.filter((l) => l.startsWith('SIMULATOR MISMATCH')), `simulator${report}`).to.deep.equal([]);
    expect(index !== null && ref !== null && index.sameStateAs(ref), `final index equals the true state at ${epoch}:${lastSeq}${report}`).to.equal(true);
    expect(history.residencyMismatches(epoch, lastSeq, residencyMap(index!.exportResidency())), `final residency${report}`).to.deep.equal([]);
    expect(rig.staleViewSeen, 'an index was visible outside SYNCHRONIZED').to.equal(false);
    expect(checker.syncedChecks, 'checks while SYNCHRONIZED').to.be.greaterThan(0);
    count('runs');
    count('checks', checker.checks);
    count('synchronized_checks', checker.syncedChecks);
    count('epochs', history.epoch + 1);
    for (const [cls, n] of Object.entries(rig.sub.counters.syncLost)) count(`sync_lost_${cls}`, n);
    count('restores', rig.sub.counters.restores);
    count('silent_loss', rig.sub.counters.silentLoss);
    count('recoveries_failed', rig.sub.counters.recoveriesFailed);
    count('reconcile_failures', rig.sub.counters.reconcileFailures);
  } finally {
    await rig.close();
  }
}

describe('kv-events §5–§7 properties: a real subscriber over random faulty engine histories', function () {
  this.timeout(Math.max(120_000, RUNS * 60_000));

  it(`a SYNCHRONIZED stream always equals the publisher's true state at its seq, others serve nothing, and it ends synchronized and equal (${RUNS} runs)`, async () => {
    await fc.assert(
      fc.asyncProperty(
        historyScenarioArb(MAX_ACTIONS),
        fc.constantFrom(0, 900),
        // A small recovery buffer: batches arriving during a slow snapshot overflow it (§7.2 limit).
        fc.constantFrom(1 << 20, 3000),
        async (scenario, resyncIntervalMs, maxBufferedBytes) => runHistory(scenario, resyncIntervalMs, maxBufferedBytes),
      ),
      { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}), endOnFailure: true },
    );
    console.log(`      coverage ${JSON.stringify(coverage)}`);
  });
});
