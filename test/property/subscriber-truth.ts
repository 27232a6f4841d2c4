// The truth-checking runner shared by the subscriber property suites (xLLM snapshot recovery in
// kv-events.subscriber.property.test.ts, vLLM/SGLang history replay in
// engines.history.property.test.ts): a REAL StreamSubscriber against a REAL RankPublisher over TCP
// ZeroMQ, driven by an EngineHistory, checked at every state move, applied batch and index swap against the
// publisher's true state at the stream's seq; others must serve nothing.
import { expect } from 'chai';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { waitFor } from '../helpers/ports.js';
import { StreamRig, stableClock } from '../helpers/stream-harness.js';
import type { StreamRigOptions } from '../helpers/stream-harness.js';
import { residencyMap } from '../helpers/view-model.js';
import { EngineHistory, PROBES, REPLAY_TIMEOUT_MS } from './engine-history.js';
import type { HistoryScenario } from './engine-history.js';

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
    rig.listen({
      stateChanged: (s: StreamState) => check(`state ${s}`),
      batchApplied: () => check('view batch'),
      indexReplaced: () => check('view reset'),
    });
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
export const coverage: Record<string, number> = {};
function count(key: string, n = 1): void {
  coverage[key] = (coverage[key] ?? 0) + n;
}

/** How one run is set up beyond its scenario. */
export interface RunOptions {
  readonly resyncIntervalMs: number;
  readonly maxBufferedBytes: number;
  /** Stream and publisher options (engine kind, history ring...) on top of the defaults. */
  readonly rig?: StreamRigOptions;
}

export async function runHistory(scenario: HistoryScenario, opts: RunOptions): Promise<void> {
  const { resyncIntervalMs, maxBufferedBytes } = opts;
  const historyKind = opts.rig?.engineKind !== undefined && opts.rig.engineKind !== 'xllm';
  const rig = await StreamRig.open({
    ...opts.rig,
    limits: { replayTimeoutMs: REPLAY_TIMEOUT_MS, resyncIntervalMs, maxBlocksPerStream: MAX_ENTRIES, maxBufferedBytes },
    // Every loss counts as after a stable period, so recoveries start at once (§7.4 n = 0) and a
    // run is not dominated by backoff; aborted recoveries still back off.
    nowMs: stableClock(),
    random: () => 0,
  });
  try {
    const pool = EngineHistory.poolFor(scenario);
    const history = new EngineHistory(rig.pub, pool, rig.hasher, scenario.chunkBlocks, { historyReplay: historyKind });
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
    if (historyKind) await recoverFromHistoryLoss(rig, history);
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


/**
 * engines.md §3: a history_lost stream waits for a full-state batch or a restart's seq 0. When
 * the faults left it so, the engine restarts with an empty cache (what an operator's prefix-cache
 * reset or a redeploy does), so the run can still end synchronized.
 */
async function recoverFromHistoryLoss(rig: StreamRig, history: EngineHistory): Promise<void> {
  const target = history.lastSeq;
  const synced = await waitFor(() => rig.sub.state === 'SYNCHRONIZED' && rig.sub.sequence === target, 3000, 'settle')
    .then(() => true)
    .catch(() => false);
  if (synced) return;
  count('history_lost_restarts');
  await history.restartEngine(false);
  await rig.pub.waitForSubscribers(1, 10_000).catch(() => undefined);
  await history.publish([]);
}
