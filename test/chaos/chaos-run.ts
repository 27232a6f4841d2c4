/**
 * Chaos run: a steady seeded workload through TWO CAR routers while faults are injected one after
 * another; after each, the run records the workload requests that failed, the seconds with stale
 * credit (credit-monitor.ts: every hit the monitor's continuous queries of both routers and the
 * workload's own `POST /v1/route` answers report, checked against the engines' true pools) and the seconds from the healing action to full recovery (every stream synchronized in
 * both routers and a prompt sent to each engine after the heal credited by both, at exactly the
 * tokens the engine holds).
 *
 * Faults, in order (engines: e0 DP=1, e1 DP=1, e2 DP=2 registered in etcd; v0 DP=1 vLLM-kind,
 * in an engines file; all DEFAULT). directory_kill9_restart covers both sources:
 *   baseline               no fault (the monitor's own false-positive check)
 *   engine_kill9_restart   SIGKILL e2's group; after hold, a new process (new incarnation) on its address
 *   vllm_engine_kill9_restart  the same for v0, a vLLM-kind engine from the engines file: its new
 *                          process_start_time_seconds is the new incarnation (engines.md §4.3)
 *   engine_sigstop         SIGSTOP e0 (publisher, heartbeats, lease keep-alive and HTTP all stop); SIGCONT after hold
 *   directory_kill9_restart SIGKILL the directory; after hold, a new one on the same ports (new epoch)
 *   router_kill9_restart   SIGKILL router-2; after hold, a new one on the same port
 *   etcd_kill9_restart     SIGKILL etcd; after hold, restart on the same data dir and ports
 *   stream_fill            prompts sent straight to e1 until its stream passes max_blocks_per_stream
 *                          (kv-events §5.2 `limit`); healed by a cache clear on e1 (§11.7, a full-state batch)
 *
 * Run: `npm run chaos` (full form: longer holds and steady periods), or `runChaos()` from a test.
 * Output: one JSON line per fault, then the same as a Markdown table.
 */
import { waitFor } from '../helpers/ports.js';
import { ChaosCluster, type EngineHandle } from './chaos-cluster.js';
import { CreditMonitor, type StaleSample } from './credit-monitor.js';
import { Workload } from './workload.js';

export interface ChaosOptions {
  /** Fault duration before the healing action. */
  readonly holdMs: number;
  /**
   * SIGSTOP length. Kept under the engines' 3 s lease TTL so the fault is a stop, not a lease loss;
   * on a slow machine the lease may still run out, and the engine then registers again under the
   * same incarnation (engine-control.ts), which the directory_kill9_restart after it relies on.
   */
  readonly pauseMs: number;
  /** Steady load before each fault (and the baseline's length). */
  readonly steadyMs: number;
  readonly recoverTimeoutMs: number;
  readonly graceMs: number;
  readonly seed: number;
  readonly maxRequests: number;
  readonly log?: (line: string) => void;
}

export interface FaultRow {
  readonly fault: string;
  readonly method: string;
  readonly requests: number;
  readonly failed: number;
  readonly stale_credit_s: number;
  readonly stale_samples: number;
  readonly checks: number;
  readonly credited_hits: number;
  readonly frozen_credit: number;
  /** Longest a router kept a credit the engine had dropped (within the grace; upper bound). */
  readonly max_lag_ms: number;
  readonly hold_s: number;
  /** From the healing action to full recovery; null when it did not recover in time. */
  readonly recovery_s: number | null;
}

export interface ChaosReport {
  readonly rows: readonly FaultRow[];
  readonly stale: readonly StaleSample[];
  readonly failures: readonly string[];
  readonly graceMs: number;
}

const BLOCK_SIZE = 16;
const MAX_BLOCKS_PER_STREAM = 400;
/** Fill prompts: 8 blocks each, distinct, so 60 of them pass the 400-entry limit. */
const FILL_BLOCKS = 8;

export const SHORT_CHAOS: ChaosOptions = { holdMs: 2000, pauseMs: 2000, steadyMs: 1500, recoverTimeoutMs: 45000, graceMs: 1000, seed: 7, maxRequests: 20000 };
export const FULL_CHAOS: ChaosOptions = { holdMs: 5000, pauseMs: 2000, steadyMs: 8000, recoverTimeoutMs: 90000, graceMs: 1000, seed: 7, maxRequests: 200000 };

async function post(url: string, body: unknown, timeoutMs = 5000): Promise<{ status: number; json: unknown }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(timeoutMs) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? null : (JSON.parse(text) as unknown) };
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runChaos(opts: ChaosOptions): Promise<ChaosReport> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const cluster = new ChaosCluster({
    blockSize: BLOCK_SIZE,
    engineDpSizes: [1, 1, 2],
    vllmEngines: 1,
    deviceCapacityBlocks: 4096,
    hostCapacityBlocks: 0,
    maxBlocksPerStream: MAX_BLOCKS_PER_STREAM,
    viewStaleAfterMs: 2000,
  });
  let phase = 'startup';
  const phaseStart = new Map<string, number>();
  const phaseEnd = new Map<string, number>();
  const rows: FaultRow[] = [];
  let recoverySalt = 0;
  const monitor = new CreditMonitor(cluster, () => phase, opts.graceMs);
  const workload = new Workload({
    routerUrls: () => cluster.routers.map((r) => r.url),
    blockSize: BLOCK_SIZE,
    seed: opts.seed,
    salt: 11,
    families: 6,
    variants: 3,
    prefixBlocks: 4,
    suffixBlocks: 2,
    concurrency: 2,
    pauseMs: 25,
    maxRequests: opts.maxRequests,
    proxyShare: 0.7,
    timeoutMs: 10000,
    onRouteAnswer: (startMs, router, prompt, answer) => monitor.routeAnswer(startMs, `router-${router + 1}`, prompt, answer),
  });

  /** A fresh prompt sent straight to each engine; recovered when both routers credit it exactly. */
  const recoveryPrompts = (): Map<EngineHandle, number[]> => {
    recoverySalt++;
    const m = new Map<EngineHandle, number[]>();
    for (const e of cluster.engines) m.set(e, Array.from({ length: 5 * BLOCK_SIZE + 1 }, (_, k) => 120_000_000 + recoverySalt * 10_000 + e.index * 1000 + k));
    return m;
  };
  const creditedExactly = async (prompts: Map<EngineHandle, number[]>): Promise<boolean> => {
    for (const [e, p] of prompts) {
      const truth = await cluster.residency(e, [p]);
      if (truth === null) return false;
      for (const r of cluster.routers) {
        const q = await cluster.query(r, p);
        if (q === null) return false;
        let anyResident = false;
        for (const rank of truth.ranks) {
          const held = rank.prompts[0]!.device_hit_tokens + rank.prompts[0]!.host_only_hit_tokens;
          const m = q.matches.find((x) => x.instance_name === e.name && x.dp_rank === rank.dp_rank);
          const credited = m === undefined ? -1 : m.device_hit_tokens + m.host_only_hit_tokens;
          if (credited !== held) return false;
          if (held > 0) anyResident = true;
        }
        if (!anyResident) return false;
      }
    }
    return true;
  };
  const waitRecovered = async (healedAt: number): Promise<number | null> => {
    const prompts = recoveryPrompts();
    let sent = false;
    try {
      await waitFor(
        async () => {
          if ((await cluster.allSynchronized()) !== null) return false;
          if (!sent) {
            // Straight to each engine: the prompt is resident there whatever CAR would pick.
            for (const [e, p] of prompts) {
              const res = await post(`${e.url}/v1/completions`, { prompt: p, max_tokens: 1 }).catch(() => null);
              if (res?.status !== 200) return false;
            }
            monitor.watch([...prompts.values()]);
            sent = true;
          }
          return creditedExactly(prompts);
        },
        opts.recoverTimeoutMs,
        'full recovery',
      );
      return (Date.now() - healedAt) / 1000;
    } catch (e) {
      log(`not recovered: ${e instanceof Error ? e.message : String(e)} (${await cluster.allSynchronized()})`);
      for (const p of [cluster.directory, ...cluster.routers.map((r) => r.proc)]) log(`--- ${p.name} (tail)\n${p.tail(15)}`);
      return null;
    }
  };

  const runFault = async (fault: string, method: string, inject: () => Promise<void>, heal: () => Promise<void>, holdMs = opts.holdMs): Promise<void> => {
    phase = `steady:${fault}`;
    await sleep(opts.steadyMs);
    phase = fault;
    phaseStart.set(fault, Date.now());
    log(`fault ${fault}: ${method}`);
    const t0 = Date.now();
    await inject();
    await sleep(Math.max(0, holdMs - (Date.now() - t0)));
    const healedAt = Date.now();
    const holdS = (healedAt - t0) / 1000;
    await heal();
    const recovery = await waitRecovered(healedAt);
    // One grace period more, so a credit that outlived the recovery is still this fault's.
    await sleep(opts.graceMs);
    phaseEnd.set(fault, Date.now());
    const credit = monitor.stats(fault);
    const reqs = workload.records.filter((r) => r.startMs >= phaseStart.get(fault)! && r.startMs < phaseEnd.get(fault)!);
    rows.push({
      fault,
      method,
      requests: reqs.length,
      failed: reqs.filter((r) => !r.ok).length,
      stale_credit_s: CreditMonitor.staleSeconds(credit.stale),
      stale_samples: credit.stale.length,
      checks: credit.checks,
      credited_hits: credit.creditedHits,
      frozen_credit: credit.frozenCredit,
      max_lag_ms: Math.max(0, Math.round(credit.maxLagMs)),
      hold_s: Math.round(holdS * 10) / 10,
      recovery_s: recovery === null ? null : Math.round(recovery * 10) / 10,
    });
    log(JSON.stringify(rows[rows.length - 1]));
  };

  try {
    await cluster.start();
    monitor.watch(workload.prompts);
    monitor.start();
    workload.start();
    const [e0, e1, e2, v0] = cluster.engines as [EngineHandle, EngineHandle, EngineHandle, EngineHandle];

    await runFault('baseline', 'no fault', async () => undefined, async () => undefined);
    await runFault('engine_kill9_restart', `SIGKILL ${e2.name} (DP=2), new incarnation on the same address`, () => e2.proc.kill().then(() => undefined), () => cluster.restartEngine(e2));
    await runFault(
      'vllm_engine_kill9_restart',
      `SIGKILL ${v0.name} (vLLM kind, engines file), new process on the same ports`,
      () => v0.proc.kill().then(() => undefined),
      () => cluster.restartEngine(v0),
    );
    await runFault(
      'engine_sigstop',
      `SIGSTOP ${e0.name} (publisher, heartbeats, lease keep-alive, HTTP) for ${opts.pauseMs / 1000} s, then SIGCONT`,
      async () => cluster.pauseEngine(e0),
      async () => cluster.resumeEngine(e0),
      opts.pauseMs,
    );
    await runFault('directory_kill9_restart', 'SIGKILL directory-svc, restart on the same ports', () => cluster.directory.kill().then(() => undefined), () => cluster.startDirectory());
    const r2 = cluster.routers[1]!;
    await runFault('router_kill9_restart', 'SIGKILL router-2, restart on the same port', () => r2.proc.kill().then(() => undefined), () => cluster.restartRouter(r2));
    await runFault('etcd_kill9_restart', 'SIGKILL etcd, restart on the same data dir', () => cluster.etcd.kill().then(() => undefined), () => cluster.startEtcd());
    await runFault(
      'stream_fill',
      `distinct prompts straight to ${e1.name} until its stream passes max_blocks_per_stream=${MAX_BLOCKS_PER_STREAM}; healed by a cache clear`,
      async () => {
        const fill: number[][] = [];
        for (let i = 0; i < Math.ceil((MAX_BLOCKS_PER_STREAM * 1.25) / FILL_BLOCKS); i++) fill.push(Array.from({ length: FILL_BLOCKS * BLOCK_SIZE }, (_, k) => 130_000_000 + i * 1000 + k));
        monitor.watch(fill.slice(0, 3));
        for (const p of fill) await post(`${e1.url}/v1/completions`, { prompt: p, max_tokens: 1 });
        await waitFor(
          async () => {
            for (const r of cluster.routers) {
              const m = (await cluster.query(r, []))?.matches.find((x) => x.instance_name === e1.name);
              if (m === undefined || m.synchronized || !m.error.startsWith('limit')) return false;
            }
            return true;
          },
          opts.recoverTimeoutMs,
          `${e1.name} unsynchronized with a limit error in both routers`,
        );
      },
      () => cluster.clearEngine(e1),
    );
  } finally {
    phase = 'shutdown';
    await workload.stop();
    await monitor.stop();
    await cluster.stop();
  }

  const stale = [...monitor.byPhase.values()].flatMap((s) => s.stale);
  const failures = workload.records.filter((r) => !r.ok).slice(0, 20).map((r) => `${new Date(r.startMs).toISOString()} router-${r.router + 1} ${r.kind} ${r.status} ${r.error}`);
  return { rows, stale, failures, graceMs: opts.graceMs };
}

export function chaosMarkdown(rows: readonly FaultRow[]): string {
  const head = '| fault | method | requests | failed | stale credit s | stale samples | checks | credited hits | frozen credit | max lag ms | hold s | recovery s |';
  const sep = '|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|';
  const lines = rows.map(
    (r) => `| ${r.fault} | ${r.method} | ${r.requests} | ${r.failed} | ${r.stale_credit_s} | ${r.stale_samples} | ${r.checks} | ${r.credited_hits} | ${r.frozen_credit} | ${r.max_lag_ms} | ${r.hold_s} | ${r.recovery_s ?? 'NOT RECOVERED'} |`,
  );
  return [head, sep, ...lines].join('\n');
}
