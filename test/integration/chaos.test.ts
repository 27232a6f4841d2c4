/**
 * Chaos, short form (test/chaos/chaos-run.ts; the full form is `npm run chaos`): etcd, three
 * simulated engines (one DP=2), directory-svc and two CAR routers as real processes, a seeded
 * workload through both routers' proxy and /v1/route, and in turn: kill -9 + restart of an
 * engine (new incarnation), SIGSTOP/SIGCONT of an engine, kill -9 + restart of the directory, of
 * a router and of etcd, and a stream filled past max_blocks_per_stream. Fails on any stale
 * credit (a hit either router reports that the engine's true pool does not back within the
 * grace, or any hit on an unsynchronized stream) and on any fault not recovered in time.
 *
 * The monitor's own check comes first, against a scripted cluster: it must flag what it exists to
 * flag, or a zero in the table would mean nothing.
 */
import { expect } from 'chai';
import { CreditMonitor } from '../chaos/credit-monitor.js';
import { SHORT_CHAOS, chaosMarkdown, runChaos, type ChaosReport } from '../chaos/chaos-run.js';
import type { ChaosCluster } from '../chaos/chaos-cluster.js';
import type { WireResidencyAnswer } from '../chaos/engine-residency.js';
import type { QueryResult } from '../../shared/view/query-result.js';
import { waitFor } from '../helpers/ports.js';

/** A cluster of one engine `e` (DP=1) and one router `r`, both answering what the test says. */
function scriptedCluster(state: { truthTokens: number | null; hitTokens: number; synchronized: boolean }): ChaosCluster {
  const engine = { index: 0, name: 'e', url: '', dpSize: 1, paused: false };
  const router = { name: 'r', url: '', port: 0, proc: { isRunning: true } };
  const fake = {
    engines: [engine],
    routers: [router],
    residency: async (_e: unknown, prompts: readonly unknown[]): Promise<WireResidencyAnswer | null> =>
      state.truthTokens === null
        ? null
        : { incarnation_id: 'i1', ranks: [{ dp_rank: 0, device_blocks: 1, host_blocks: 0, prompts: prompts.map(() => ({ device_hit_tokens: state.truthTokens!, host_only_hit_tokens: 0 })) }] },
    query: async (): Promise<QueryResult> => ({
      input_tokens: 64,
      block_size: 16,
      matches: [{ instance_name: 'e', dp_rank: 0, synchronized: state.synchronized, sequence: 1, device_hit_tokens: state.hitTokens, host_only_hit_tokens: 0, reusable_prefix_tokens: state.hitTokens, device_blocks: 4, host_blocks: 0, error: '', engine_kind: 'xllm' }],
    }),
  };
  return fake as unknown as ChaosCluster;
}

async function monitorRun(state: { truthTokens: number | null; hitTokens: number; synchronized: boolean }, graceMs: number, change?: (m: CreditMonitor, prompt: number[]) => void): Promise<number> {
  const monitor = new CreditMonitor(scriptedCluster(state), () => 'p', graceMs);
  const prompt = [1, 2, 3];
  monitor.watch([prompt]);
  monitor.start();
  await waitFor(() => monitor.rounds >= 5, 5000, 'five monitor rounds');
  change?.(monitor, prompt);
  const after = monitor.rounds;
  await waitFor(() => monitor.rounds >= after + 10, 10000, 'ten more rounds');
  await monitor.stop();
  return monitor.stats('p').stale.length;
}

describe('chaos: stale-credit monitor, against a scripted engine and router', function () {
  this.timeout(30000);

  it('a hit the engine backs is not stale', async () => {
    expect(await monitorRun({ truthTokens: 32, hitTokens: 32, synchronized: true }, 1000)).to.equal(0);
  });

  it('a hit above what the engine holds is stale', async () => {
    expect(await monitorRun({ truthTokens: 16, hitTokens: 32, synchronized: true }, 1000)).to.be.greaterThan(0);
  });

  it('any hit on an unsynchronized stream is stale', async () => {
    expect(await monitorRun({ truthTokens: 64, hitTokens: 16, synchronized: false }, 1000)).to.be.greaterThan(0);
  });

  it('a hit on an engine that stopped answering is stale once the grace has passed', async () => {
    const state = { truthTokens: 32 as number | null, hitTokens: 32, synchronized: true };
    expect(await monitorRun(state, 50, () => (state.truthTokens = null))).to.be.greaterThan(0);
  });

  it('a /v1/route candidate credited under another incarnation than the engine runs is stale; under its own, not', async () => {
    const route = (incarnation: string) => ({ candidates: [{ instance_name: 'e', incarnation_id: incarnation, device_hit_tokens: 16, host_only_hit_tokens: 0 }] });
    const state = { truthTokens: 32, hitTokens: 0, synchronized: true };
    expect(await monitorRun(state, 1000, (m, p) => m.routeAnswer(Date.now(), 'r', p, route('i1')))).to.equal(0);
    expect(await monitorRun(state, 1000, (m, p) => m.routeAnswer(Date.now(), 'r', p, route('i0')))).to.equal(1);
  });
});

describe('chaos (short form): faults under a steady two-router workload, every reported hit checked against the engines', function () {
  this.timeout(6 * 60 * 1000);
  let report: ChaosReport;
  /** The run's log (faults, rows, and the services' last lines when a fault does not recover). */
  const log: string[] = [];

  before(async () => {
    report = await runChaos({ ...SHORT_CHAOS, log: (line) => log.push(line) });
    console.log(`${report.rows.map((r) => JSON.stringify(r)).join('\n')}\n\n${chaosMarkdown(report.rows)}\n`);
  });

  it('every fault was injected and recovered (all streams synchronized, fresh prompts credited exactly in both routers)', () => {
    expect(report.rows.map((r) => r.fault)).to.deep.equal(['baseline', 'engine_kill9_restart', 'vllm_engine_kill9_restart', 'engine_sigstop', 'directory_kill9_restart', 'router_kill9_restart', 'etcd_kill9_restart', 'stream_fill']);
    for (const r of report.rows) expect(r.recovery_s, `${r.fault}\n${log.join('\n')}`).to.not.equal(null);
  });

  it('zero seconds of stale credit in every fault, with the monitor checking credited hits throughout', () => {
    expect(report.stale, JSON.stringify(report.stale.slice(0, 5))).to.deep.equal([]);
    for (const r of report.rows) {
      expect(r.stale_credit_s, r.fault).to.equal(0);
      expect(r.checks, `${r.fault}: monitor checks`).to.be.greaterThan(0);
    }
    expect(report.rows.reduce((a, r) => a + r.credited_hits, 0)).to.be.greaterThan(0);
  });

  it('no request fails without a fault, nor while the directory or etcd is down (routers keep routing by load), nor when an engine is killed (sent once to the next-best)', () => {
    for (const fault of ['baseline', 'engine_kill9_restart', 'vllm_engine_kill9_restart', 'directory_kill9_restart', 'etcd_kill9_restart']) {
      const row = report.rows.find((r) => r.fault === fault)!;
      expect(row.failed, `${fault}: ${report.failures.join('\n')}`).to.equal(0);
      expect(row.requests, fault).to.be.greaterThan(0);
    }
  });
});
