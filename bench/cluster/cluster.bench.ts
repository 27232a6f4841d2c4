/**
 * Cluster benchmark: does cache-aware routing (CAR, routing.md; TTFT, issue 27) beat the
 * alternatives on a cluster whose engines pay for every uncached prompt token?
 *
 * Setup (all real parts, cluster-stack.ts): etcd and directory-svc as processes; 8 simulated
 * engines, each a BlockPool with finite Device and Host capacity (Device 50% + Host 20% of the
 * workload's working set over the 8 engines, so about 70% of it fits) behind a FIFO prefill queue
 * served one request at a time (prefill-cost-model.ts, sim time): TTFT = queue wait + 1 ms +
 * 80 µs × recomputed tokens + 20 µs × Host-hit tokens, hits as the pool reports them at admission;
 * engines heartbeat their in-flight requests as `waiting` every 500 ms (discovery.md; --heartbeat_ms);
 * router-svc replicas (RouterService in this process, each its own WatchView stream and view cache)
 * proxy `POST /v1/completions` and `/v1/chat/completions` to the chosen engine. Block size 16.
 *
 * Workloads (workloads.ts, seeded, bodies serialized before timing), each user/agent a closed-loop
 * client pacing itself like a real one (next request after the answer plus a think/tool time):
 *   multi_turn  chats as text messages: users share 8 system prompts (512 tokens); each turn appends
 *               the previous reply and a new message (32–128 tokens each); routers and engines
 *               tokenize them with the Qwen3 tokenizer, and the oracle sees the same ids.
 *               Quick: 32 users × 5 turns; full: 96 × 8.
 *   agentic     tasks with a 1536-token shared context; branches add a 128-token goal, each step
 *               48–160 tokens. Quick: 4 tasks × 8 branches × 5 steps; full: 6 × 16 × 8.
 *   mixed_length  (sweep only) Mooncake's conversation-trace input lengths (mean ~12k tokens,
 *               median ~6k, a tail past 100k), half the requests continuing an earlier
 *               conversation: generated in Mooncake's trace format (mixed-trace.ts) and replayed
 *               open loop like a trace. `--write_trace=FILE` writes it as JSON Lines.
 *   trace       (sweep only, with `--trace=FILE`) a Mooncake-format trace as published
 *               (mooncake-trace.ts: each hash id 512 seeded tokens; strict format check with line
 *               numbers), its first `--trace_requests` (quick 480) requests, replayed at their
 *               recorded times scaled to each run's rate; `--trace_speed=X` also replays it (and
 *               mixed_length) at X× its recorded rate, every policy once (`cluster_replay` lines;
 *               `--replay_only` skips the sweep for them). Both trace workloads run on a stack of
 *               their own with 128-token blocks (xLLM's), on engines 8× cheaper per token than the
 *               sweep's (TRACE_PREFILL, `--trace_us_per_token`), windows of `--trace_window_s`;
 *               their knee is RR's saturation rate (engines / RR's mean prefill time, measured
 *               unloaded: traceKnee says why not a latency criterion), so 50/70/90% of it are
 *               RR's utilisation.
 *
 * Policies: RR, SLO_AWARE, CAR with --car_prefill_lambda 0.5 and 0.8 through the router, each
 * with 1 router and with 4 replicas (requests spread round-robin over them; in-flight load on
 * unless --car_inflight_load=false); ORACLE_0.5 and ORACLE_0.8 (oracle.ts), computed here and sent
 * straight to the engine: an omniscient router reading every engine's true pool and true queue at
 * decision time with CAR's cost function and λ; TTFT (routing by predicted time to first token,
 * router-svc/policy/ttft-policy.ts; its throughput prior set to the engines' nominal tokens/s, as
 * an operator sets it from the hardware's) and ORACLE_TTFT (ttft-oracle.ts: the same cost with
 * the true queue, pools and costs). Before each run every cache is emptied and every
 * view must show empty caches and idle queues; each set of engines starts with one dropped RR
 * pass (JIT, first-use paths); 4 fresh replicas get their rotation turns spread first (see
 * desynchronize; `--no_desync` leaves them where their router ids start them).
 *
 * CAR and ORACLE runs are repeated REPS times (--reps, default 6; interleaved, each repetition runs
 * every configuration once), RR and SLO_AWARE once. Per (workload, policy, routers) one JSON line
 * over the pooled repetitions (each drops its own warm-up), with the per-repetition hit ratio and
 * TTFT p90s: hit_ratio = cached / prompt tokens from the
 * engines' own accounting (usage.prompt_tokens_details.cached_tokens, Device and Host hits, the
 * `x-sim-*` headers split them), TTFT p50/p90/p99 measured at the client (send → response headers;
 * max_tokens 1, so the answer follows the first token; performance.now, monotonic), the engines'
 * own TTFT p90 (the prefill queue's virtual schedule), and throughput (answers/s). The first 10%
 * of requests of each run are warm-up and dropped. RR is the baseline: every line carries its
 * ratio to RR's TTFT p90 and to its oracle's hit ratio and TTFT p90.
 *
 * Load sweep (load-sweep.ts; sweepWorkloads, open loop: session arrivals Poisson, turns at their
 * scheduled times; engines 4× slower per token, SWEEP_PREFILL): RR unloaded, then RR at rising
 * session rates until its engine-clock TTFT p90 passes 5× unloaded (the knee, interpolated), then
 * (the bracket bisected SWEEP.refine times first) RR, CAR_0.5 and CAR_0.8 on 1 and 4 routers and
 * both oracles at 50%, 70% and 90% of the knee: `cluster_knee` and `cluster_sweep` lines (with
 * engine_tail_queue_share: how much of the slowest tenth's engine TTFT was queue wait).
 *
 * The sweep runs on two KV sizes (SWEEP_KV, `kv` on its lines; the knee is found again on each),
 * the same Device 50% + Host 20% shares of two working sets, because the ratio of KV capacity to
 * the live sessions' prefixes decides how much prefill cache-aware routing can save:
 *   pressured  sized on the policy runs' workload (32 users): a 90% run's sessions need ~1.4× the
 *              blocks Device + Host hold (run_working_set_blocks / kv_capacity_blocks), as in a
 *              fleet whose KV is short of its live prefixes (human think times of minutes, long
 *              contexts, a big model on few GPUs).
 *   ample      sized on the sweep's own session population (160 sessions): a 90% run needs ~0.45
 *              of the capacity, as on a GPU whose KV holds its live sessions (an 8B model on one
 *              80 GB H100 keeps ~350k tokens: a few hundred of these ~1k-token conversations).
 * Measured (quick, 2026-12-02): agentic is memory-bound (CAR_0.8 at 90%: hit 0.70–0.73 pressured,
 * 0.89 ample), multi_turn at λ 0.8 is not (0.78–0.79 against 0.81: near the workload's ceiling of
 * new tokens per turn). What then floors CAR's p90 at 90% is a run starting on empty caches: the
 * first request of each shared prefix prefills it from nothing (a ~600-token system prompt,
 * 193 ms; a 1,664-token task context, 533 ms), 5–10% of a quick window's requests, plus queue
 * wait at the engines that own the popular prefixes; `--sweep_warm` measures each window after a
 * window of the same policy and rate instead (steady state: prefixes already placed; off by
 * default, it doubles the sweep's time). At 90% of the knee RR's p90 is below 5× its unloaded
 * p90 by definition, so "10× better than RR" needs CAR's p90 under half of RR's unloaded one
 * (multi_turn: 186 ms, under one cold system prompt). Warm and ample, agentic CAR_0.8 reached
 * 29–34× (hit 0.93; pressured 2.4–3.3×); multi_turn stays at 6–8×, bounded by its ~19% new
 * tokens per turn and by RR's own hits on the system prompts once KV is ample (0.53).
 *
 * `cluster_target` lines check issue 15's targets: CAR hit ratio ≥ 95% of its ORACLE's; 4 replicas'
 * hit ratio within 2% and TTFT p90 within 10% of 1 router's (judged on the pooled value; `per_rep`
 * gives the signed per-repetition gap's mean and 95% interval); CAR TTFT p90 ≥ 10× better than RR
 * at 90% load (sweep; the ORACLE lines are the reference of what the cost function can reach
 * there); and the older ≥ 2× better than RR on multi_turn (client and engine clocks). Issue 27's
 * (ttftTargets, every swept workload at 90% of RR's knee, 1 and 4 routers): TTFT's p90 ≥ 1.3× better
 * than the better CAR λ on mixed_length and no worse elsewhere, its hit ratio ≥ 0.95 of that
 * CAR's, and 4 TTFT replicas' p90 within 10% of one's, judged on sweepReps() repetitions of the
 * compared runs pooled ("no worse" also when the paired per-repetition interval reaches 1:
 * rep-stats.ts notMeasurablyWorse); the policy runs also give TTFT CAR's 4-replica and
 * hit-vs-ORACLE targets.
 *
 * The client (load-client.ts) runs on its own worker thread, so its schedule holds whatever load
 * the engines and routers put on this one.
 *
 * Run: node --import tsx bench/cluster/cluster.bench.ts [--quick] [--heartbeat_ms=500]
 *        [--workload=multi_turn|agentic|mixed_length|trace] [--samples=FILE] [--car_inflight_load=false] [--car_pending_prefix=false]
 *        [--no_sweep | --sweep_only] [--sweep_kv=pressured|ample] [--sweep_warm] [--sweep_reps=N] [--reps=10] [--max_pair_reps=30] [--no_desync]
 *        [--trace=FILE] [--trace_requests=N] [--trace_speed=X [--replay_only]] [--trace_us_per_token=40] [--trace_window_s=10]
 *        [--write_trace=FILE] [--runs=TTFT,CAR_0.8,...] [--router_flag=--name=value ...]
 * (--quick: the short form for CI; full ≈ 15 min plus the trace workloads. --samples appends every
 * request's sample. Issue 27's comparisons alone: --sweep_only [--workload=mixed_length].)
 * The machine is shared: client TTFT includes its scheduling noise; engine_ttft_p90_ms does not.
 */
import { appendFileSync, writeFileSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import type { RouterService } from '../../router-svc/router-service.js';
import type { PrefillCostOptions } from '../../tools/engine-sim/prefill-cost-model.js';
import { LoadClient, type ClientTarget, type OracleChooser, type Sample } from './load-client.js';
import { ClusterStack, untilSettled, type ClusterEngine, type EngineShape } from './cluster-stack.js';
import { KNEE_FACTOR, SWEEP_FRACTIONS, kneeRate, poissonStarts, scheduleOf, wrappingSlice, type KneeStep } from './load-sweep.js';
import { seededRandom } from '../lib/seeded-random.js';
import { OmniscientRouter } from './oracle.js';
import { TtftOracle } from './ttft-oracle.js';
import { rotationOffset } from '../../router-svc/policy/pick-minimum.js';
import { confidence, gapResolved, notMeasurablyWorse, ratios, relativeGaps } from './rep-stats.js';
import { buildAgentic, buildMultiTurn, workingSetBlocks, type SessionRequest, type Workload } from './workloads.js';
import { generateMixedTrace } from './mixed-trace.js';
import { readMooncakeTrace, toJsonl, TraceFormatError } from './mooncake-trace.js';
import { isTraceWorkload, traceStarts, traceWorkload, type TraceWorkload } from './trace-workload.js';

const QUICK = process.argv.includes('--quick');
const SEED = 0xc1a5;
const ENGINES = 8;
const BLOCK_SIZE = 16;
/**
 * The trace workloads' engines use xLLM's 128-token blocks (a stack of their own): their prompts
 * are ~10× the chat's, and an engine's per-block work (hashing, events, the directory's index)
 * at 16 tokens a block would make the harness, not the engines, the bottleneck.
 */
const TRACE_BLOCK_SIZE = 128;
const REPLICAS = 4;
const WARMUP_FRACTION = 0.1;
/**
 * Repetitions of every CAR and ORACLE run (interleaved: each repetition runs every policy once):
 * one quick run of 144 measured requests swings by more than the 2% the 4-replica target asks
 * about, so the targets are judged on the pooled samples (10 × 144 in the quick form), with a
 * 95% interval over repetitions. Three repetitions flipped a 2% or 10% target between identical
 * runs; with six, multi_turn λ 0.5's hit gap still read 0.2–2.2% in three runs of one commit
 * (its per-repetition interval ±7%: one router's own hit ratio moves 0.53–0.60 between
 * repetitions, load-driven splits at λ 0.5 being timing-sensitive).
 */
const REPS = numberArg('--reps', 10);
/**
 * A CAR pair (1 router, REPLICAS routers) whose per-repetition gap is still wider than its
 * target's margin after REPS repetitions (hit ratio ±2%, engine TTFT p90 ±10%, 95%) gets more
 * repetitions of just that pair, up to this many: multi_turn λ 0.5 (load-driven splits, one
 * router's hit ratio 0.53–0.63 between repetitions) needs about 30, the λ 0.8 pairs are inside
 * ±0.5% after 10. The rule reads the interval's width, never the gap itself, so it does not
 * steer the verdict: 30-repetition runs of one commit read 0.3% where 10-repetition runs read 0.2–3.9%.
 */
const MAX_PAIR_REPS = numberArg('--max_pair_reps', 3 * REPS);
/**
 * Repetitions, at the sweep's top load fraction (90%), of the configurations issue 27's goals
 * compare (CAR λ 0.5 and 0.8 and TTFT, 1 and REPLICAS routers), each on a schedule of its own
 * (scheduleOf), interleaved and pooled. One quick window's p90 rests on about 20 requests: the
 * same code's TTFT p90 on mixed_length read 1,229–1,741 ms over nine runs, and agentic's sits on a
 * handful of cold prefills, so single-run verdicts near a goal's threshold were coin flips; across
 * schedules agentic's p90 moves by 2× (one policy, 648–978 ms over three). A generated workload's
 * repetition costs about 5 s per configuration, a trace's about 15 s, and a trace holds few
 * distinct stretches: quick 10 and 3, full (windows 4–5× longer) 3 and 1. `--sweep_reps=N` sets
 * both.
 */
const SWEEP_REPS_FLAG = stringArg('--sweep_reps') === null ? null : Math.ceil(numberArg('--sweep_reps', 1));
function sweepReps(trace: boolean): number {
  if (SWEEP_REPS_FLAG !== null) return SWEEP_REPS_FLAG;
  if (trace) return QUICK ? 3 : 1;
  return QUICK ? 10 : 3;
}
/** Device and Host shares of the working set, over all engines (70% fits). */
const DEVICE_SHARE = 0.5;
const HOST_SHARE = 0.2;
const HEARTBEAT_MS = numberArg('--heartbeat_ms', 500);
/** `--samples=FILE`: every sample of every run as a JSON line (analysis, not results). */
const SAMPLES = stringArg('--samples');
/** `--trace=FILE`: a Mooncake-format trace (mooncake-trace.ts) replayed as the `trace` workload of the sweep. */
const TRACE_FILE = stringArg('--trace');
/**
 * `--trace_speed=X`: the trace (and the mixed-length workload) is also replayed at X times its
 * recorded arrival rate, every comparison policy once (`cluster_replay` lines). Absent: the sweep
 * alone, whose runs pick their own speeds (each line says which).
 */
const TRACE_SPEED = stringArg('--trace_speed') === null ? null : numberArg('--trace_speed', 1);
/** `--trace_requests=N`: the first N requests of the trace (in time order) are the sweep's population. */
const TRACE_REQUESTS = numberArg('--trace_requests', QUICK ? 480 : 4000);
/** `--router_flag=--name=value` (repeatable): a router-svc flag for every router the bench starts. */
const ROUTER_FLAGS = process.argv.filter((a) => a.startsWith('--router_flag=')).map((a) => a.slice('--router_flag='.length));
/** `--write_trace=FILE`: writes the generated mixed-length workload as Mooncake JSON Lines. */
const WRITE_TRACE = stringArg('--write_trace');
/** `--car_inflight_load=false`: routers without in-flight load (the comparison issue 15 asks about). */
const INFLIGHT_LOAD = !process.argv.includes('--car_inflight_load=false');
/** `--car_pending_prefix=false`: routers without pending prefix credit (routing.md "In-flight load"). */
const PENDING_PREFIX = !process.argv.includes('--car_pending_prefix=false');
/**
 * `--no_desync`: 4 fresh replicas start from the rotation state their router ids give them
 * (routers spread their first tie by id, pick-minimum.ts rotationOffset), as a fleet started at
 * once would, instead of the harness spreading their turns (desynchronize).
 */
const DESYNC = !process.argv.includes('--no_desync');
/**
 * `--sweep_warm`: every sweep run is preceded, without emptying the caches, by a window of the
 * same policy and rate on other sessions of the population (its back half; the measured ones come
 * from the front): the measured window starts from that policy's own steady state, with the
 * shared prefixes (system prompts, task contexts) already placed, instead of from empty caches.
 */
const SWEEP_WARM = process.argv.includes('--sweep_warm');
const PREFILL: PrefillCostOptions = { baseUs: 1000, usPerToken: 80, hostUsPerToken: 20, concurrency: 1 };
/**
 * The sweep's engines are 4× slower per token: the cluster must saturate at a rate this one
 * process (client, routers and engines on a shared event loop) can offer without saturating
 * itself first, or the knee would measure the harness instead of the engines' queues.
 */
const SWEEP_PREFILL: PrefillCostOptions = { baseUs: 1000, usPerToken: 320, hostUsPerToken: 80, concurrency: 1 };
/**
 * The trace workloads' engines (mixed_length, trace): prompts ~10× longer than the chat's (a mean
 * near 12k tokens, a tail past 60k), so a token costs 8× less than the sweep's — the cluster still
 * saturates at a rate (tens of requests per second) the harness can offer: a cold 12k-token prompt
 * takes ~0.5 s, the 99th percentile ~4 s.
 */
const TRACE_US_PER_TOKEN = numberArg('--trace_us_per_token', 40);
const TRACE_PREFILL: PrefillCostOptions = { baseUs: 1000, usPerToken: TRACE_US_PER_TOKEN, hostUsPerToken: TRACE_US_PER_TOKEN / 4, concurrency: 1 };
/** `--replay_only` (with --trace_speed): the trace workloads are only replayed at that speed, no knee search. */
const REPLAY_ONLY = process.argv.includes('--replay_only');
/**
 * The sweep's KV sizes (same Device and Host shares, different working sets; see the header):
 * `pressured` on the policy runs' workload of the same kind, `ample` on the sweep's own session
 * population. `--sweep_kv=pressured|ample` runs one of them.
 */
const SWEEP_KV = (['pressured', 'ample'] as const).filter((kv) => {
  const only = process.argv.find((a) => a.startsWith('--sweep_kv='))?.slice('--sweep_kv='.length);
  return only === undefined || only === kv;
});
type SweepKv = (typeof SWEEP_KV)[number];

function numberArg(name: string, fallback: number): number {
  const a = stringArg(name);
  if (a === null) return fallback;
  const n = Number(a);
  if (!(n > 0) || !Number.isFinite(n)) throw new RangeError(`${name}: expected a positive number, got ${JSON.stringify(a)}`);
  return n;
}

function stringArg(name: string): string | null {
  return process.argv.find((a) => a.startsWith(`${name}=`))?.slice(name.length + 1) ?? null;
}

type PolicyName = 'RR' | 'SLO_AWARE' | 'CAR' | 'TTFT' | 'ORACLE' | 'ORACLE_TTFT';
interface PolicyRun {
  readonly label: string;
  readonly policy: PolicyName;
  readonly lambda: number | null;
}
const POLICIES: readonly PolicyRun[] = [
  { label: 'RR', policy: 'RR', lambda: null },
  { label: 'SLO_AWARE', policy: 'SLO_AWARE', lambda: null },
  { label: 'CAR_0.5', policy: 'CAR', lambda: 0.5 },
  { label: 'CAR_0.8', policy: 'CAR', lambda: 0.8 },
  { label: 'ORACLE_0.5', policy: 'ORACLE', lambda: 0.5 },
  { label: 'ORACLE_0.8', policy: 'ORACLE', lambda: 0.8 },
  { label: 'TTFT', policy: 'TTFT', lambda: null },
  { label: 'ORACLE_TTFT', policy: 'ORACLE_TTFT', lambda: null },
];
const TTFT_RUN = POLICIES[6]!;
const ORACLE_TTFT_RUN = POLICIES[7]!;
/** Runs repeated (the targets' fine margins are judged on them); RR and SLO_AWARE are baselines, once is enough. */
const repeated = (p: PolicyRun): boolean => p.policy === 'CAR' || p.policy === 'TTFT' || p.policy === 'ORACLE' || p.policy === 'ORACLE_TTFT';
/**
 * Policies with a router pair (1 and REPLICAS) whose gap the targets judge; in the sweep, the runs
 * ttftTargets compares, repeated sweepReps() times at the top load fraction.
 */
const paired = (p: PolicyRun): boolean => p.policy === 'CAR' || p.policy === 'TTFT';
const isOracle = (p: PolicyRun): boolean => p.policy === 'ORACLE' || p.policy === 'ORACLE_TTFT';
/** The sweep's policies: the baseline, CAR at λ 0.5 (the default) and 0.8 on 1 and 4 routers, and both oracles. */
const ALL_SWEEP_RUNS: readonly { run: PolicyRun; replicas: number }[] = [
  { run: POLICIES[0]!, replicas: 1 },
  { run: POLICIES[2]!, replicas: 1 },
  { run: POLICIES[2]!, replicas: REPLICAS },
  // λ 0.8 too: at high load the cache share of the cost decides how many tokens the cluster must prefill.
  { run: POLICIES[3]!, replicas: 1 },
  { run: POLICIES[3]!, replicas: REPLICAS },
  { run: POLICIES[4]!, replicas: 0 },
  { run: POLICIES[5]!, replicas: 0 },
  // Issue 27: the predicted-TTFT policy and its own oracle.
  { run: TTFT_RUN, replicas: 1 },
  { run: TTFT_RUN, replicas: REPLICAS },
  { run: ORACLE_TTFT_RUN, replicas: 0 },
];
/**
 * `--runs=LABEL,...`: only these of the sweep's and replay's configurations (RR, their baseline,
 * always runs), e.g. `--runs=TTFT,ORACLE_TTFT,CAR_0.8`.
 */
const RUNS_ONLY = stringArg('--runs')?.split(',') ?? null;
const SWEEP_RUNS = ALL_SWEEP_RUNS.filter((c) => RUNS_ONLY === null || c.run.policy === 'RR' || RUNS_ONLY.includes(c.run.label));
/** The oracle a run (by label) is compared with: TTFT's own; else the one with its λ (CAR's default for the others). */
function oracleLabelFor(label: string): string {
  if (label === 'TTFT' || label === 'ORACLE_TTFT') return 'ORACLE_TTFT';
  return label.endsWith('_0.8') ? 'ORACLE_0.8' : 'ORACLE_0.5';
}

/** The prompt shapes both the policy runs and the sweep use (only the population and pacing differ). */
const CHAT = { systemPrompts: 8, systemPromptTokens: 512, messageTokens: [32, 128] as const };
const AGENTS = { contextTokens: 1536, goalTokens: 128, stepTokens: [48, 160] as const };

async function workloads(): Promise<Workload[]> {
  return [
    await buildMultiTurn(SEED, BLOCK_SIZE, { ...CHAT, users: QUICK ? 32 : 96, turns: QUICK ? 5 : 8, thinkMs: QUICK ? 100 : 700, rampMs: QUICK ? 200 : 2000 }),
    buildAgentic(SEED + 1, BLOCK_SIZE, { ...AGENTS, tasks: QUICK ? 4 : 6, branchesPerTask: QUICK ? 8 : 16, steps: QUICK ? 5 : 8, toolMs: QUICK ? 100 : 700, rampMs: QUICK ? 200 : 2000 }),
  ];
}

/** A sweep workload, built only when its stage starts (why: sweepWorkloads). */
interface SweptWorkload {
  readonly trace: boolean;
  readonly build: () => Promise<Workload>;
}

/**
 * The sweep's workloads: the same shapes with more sessions (offered load comes from their
 * arrival rate, so there must be enough of them for the top rate's window) and no ramp (arrivals
 * are the sweep's Poisson schedule). Each is built when its stage starts and dropped after it:
 * a trace workload holds its prompts' token ids and bodies (about 100 MB for 480 requests of the
 * conversation trace), and with every workload built up front the harness thread, which also
 * runs the engines and the routers, carried them all through the later stages. A trace's records
 * are read here, before any run, so a bad file fails at once.
 */
function sweepWorkloads(only: string | undefined): SweptWorkload[] {
  const want = (name: string): boolean => only === undefined || only === name;
  const out: SweptWorkload[] = [];
  if (want('multi_turn')) out.push({ trace: false, build: async () => shuffled(await buildMultiTurn(SEED + 2, BLOCK_SIZE, { ...CHAT, users: QUICK ? 160 : 1200, turns: QUICK ? 4 : 6, thinkMs: QUICK ? 200 : 700, rampMs: 0 }), SEED + 4) });
  if (want('agentic')) out.push({ trace: false, build: async () => shuffled(buildAgentic(SEED + 3, BLOCK_SIZE, { ...AGENTS, tasks: QUICK ? 10 : 50, branchesPerTask: QUICK ? 16 : 24, steps: QUICK ? 4 : 6, toolMs: QUICK ? 200 : 700, rampMs: 0 }), SEED + 4) });
  if (want('mixed_length') || WRITE_TRACE !== null) {
    const records = generateMixedTrace(SEED + 5, { ...MIXED, requests: TRACE_REQUESTS });
    if (WRITE_TRACE !== null) writeFileSync(WRITE_TRACE, toJsonl(records));
    if (want('mixed_length')) out.push({ trace: true, build: async () => traceWorkload('mixed_length', records, TRACE_BLOCK_SIZE, SEED + 6) });
  }
  // A trace is replayed in its own order (its times are its arrivals): not shuffled.
  if (TRACE_FILE !== null && want('trace')) {
    const records = readMooncakeTrace(TRACE_FILE, { maxRequests: TRACE_REQUESTS });
    out.push({ trace: true, build: async () => traceWorkload('trace', records, TRACE_BLOCK_SIZE, SEED + 6) });
  }
  return out;
}

/**
 * The mixed-length workload's shape (mixed-trace.ts): conversation-trace lengths, half the
 * requests continuing an earlier conversation (30–40% of the blocks reused, near the
 * conversation trace's "up to 50%"), arrivals at the trace's own ~3.3 requests/s, and a
 * conversation's next turn at least 5 s of trace time after its previous one (so reuse starts
 * within a short window; the replay scales both).
 */
const MIXED = { ratePerS: 3.3, continueShare: 0.5, minTurnGapMs: 5_000 } as const;

/**
 * The sessions in a seeded random order: a run takes the first rate × window of them, and in a
 * steady stream arrivals come from every task and system prompt, not from the first few (the
 * builders emit one agentic task's branches together).
 */
function shuffled(w: Workload, seed: number): Workload {
  const rand = seededRandom(seed);
  const sessions = [...w.sessions];
  for (let i = sessions.length - 1; i > 0; i--) {
    const j = Math.floor(rand() * (i + 1));
    [sessions[i], sessions[j]] = [sessions[j]!, sessions[i]!];
  }
  return { ...w, sessions };
}

/**
 * Knee search: RR unloaded at a few sessions far apart, then rates from startRate up by ×step;
 * each run's arrivals last windowS (the sweep workloads hold enough sessions for the top rate).
 */
const SWEEP = QUICK
  ? { unloadedSessions: 6, unloadedRate: 1, startRate: 3, step: 1.5, refine: 2, windowS: 2.5 }
  : { unloadedSessions: 16, unloadedRate: 0.5, startRate: 1, step: 1.3, refine: 2, windowS: 12 };
/**
 * The trace workloads' sweep: each request is a session, so a window needs more of them for a
 * p90 (and p99) of a heavy-tailed mix; the knee is RR's saturation (traceKnee), from a closed-loop
 * unloaded run of `unloadedSessions` requests (measureUnloadedTrace).
 */
const TRACE_SWEEP = {
  unloadedSessions: QUICK ? 48 : 128,
  /** `--trace_window_s`: seconds of arrivals per run. */
  windowS: numberArg('--trace_window_s', QUICK ? 10 : 40),
};


/** Where each request goes: router replicas in turn, or the ORACLE in this thread beside the engines' pools. */
interface Target {
  readonly client: ClientTarget;
  readonly oracle: OracleChooser | null;
}

function routerTarget(routers: readonly RouterService[]): Target {
  return { client: { kind: 'routers', urls: routers.map((r) => `http://127.0.0.1:${r.port}`) }, oracle: null };
}

/** CAR's omniscient router (oracle.ts) at the run's λ, or the TTFT policy's (ttft-oracle.ts). */
function oracleTarget(engines: readonly ClusterEngine[], p: PolicyRun, w: Workload): Target {
  const oracle = p.policy === 'ORACLE_TTFT' ? new TtftOracle(engines, engines[0]!.prefill) : new OmniscientRouter(engines, p.lambda ?? 0.5);
  return { client: { kind: 'oracle' }, oracle: (si, k) => oracle.choose(w.sessions[si]![k]!.tokenIds) };
}

/** One pass of a workload: its samples in send order, wall time and this thread's event-loop utilisation. */
interface Run {
  readonly samples: Sample[];
  readonly wallMs: number;
  readonly elu: number;
}

let loadClient: LoadClient | null = null;

/** Every session at once through the load client's thread (load-client.ts says why), closed or open loop. */
async function drive(w: Workload, target: Target, startsMs: readonly number[] | null): Promise<Run> {
  loadClient ??= await LoadClient.start();
  const elu0 = performance.eventLoopUtilization();
  const { samples, wallMs } = await loadClient.drive(w.sessions, target.client, startsMs, target.oracle);
  return { samples, wallMs, elu: performance.eventLoopUtilization(elu0).utilization };
}

function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))]!;
}

const round = (x: number, digits = 3): number => Number(x.toFixed(digits));

interface RunResult {
  workload: string;
  policy: string;
  routers: number;
  requests: number;
  hit_ratio: number;
  device_hit_ratio: number;
  host_hit_ratio: number;
  ttft_p50_ms: number;
  ttft_p90_ms: number;
  ttft_p99_ms: number;
  engine_ttft_p50_ms: number;
  engine_ttft_p90_ms: number;
  /** Mean prefill time on the engines' clock (TTFT less queue wait). */
  engine_prefill_mean_ms: number;
  engine_tail_queue_share: number;
  overhead_p50_ms: number;
  overhead_p90_ms: number;
  event_loop_utilization: number;
  throughput_rps: number;
  engines_used: number;
  max_engine_share: number;
  wall_s: number;
  [k: string]: unknown;
}

/** A run's samples after its warm-up (the first WARMUP_FRACTION of them, in send order). */
function measuredOf(run: Run): Sample[] {
  return run.samples.slice(Math.floor(run.samples.length * WARMUP_FRACTION));
}

/** Hit ratio (cached / prompt tokens) of samples. */
function hitRatioOf(samples: readonly Sample[]): number {
  let prompt = 0;
  let cached = 0;
  for (const s of samples) {
    prompt += s.promptTokens;
    cached += s.cachedTokens;
  }
  return cached / prompt;
}

/**
 * One line's numbers over one or more repetitions of a run: ratios and percentiles over the
 * pooled measured samples (each repetition drops its own warm-up), and per repetition the hit
 * ratio and TTFT p90s (what the confidence intervals of the 4-replica targets are built from).
 */
function summarize(w: Workload, label: string, routers: number, runs: readonly Run[]): RunResult {
  const perRun = runs.map(measuredOf);
  const measured = perRun.flat();
  const wallMs = runs.reduce((a, r) => a + r.wallMs, 0);
  const elu = runs.reduce((a, r) => a + r.elu, 0) / runs.length;
  let prompt = 0;
  let cached = 0;
  let device = 0;
  let host = 0;
  const perInstance = new Map<string, number>();
  for (const s of measured) {
    prompt += s.promptTokens;
    cached += s.cachedTokens;
    device += s.deviceHitTokens;
    host += s.hostHitTokens;
    perInstance.set(s.instance, (perInstance.get(s.instance) ?? 0) + 1);
  }
  const ttft = measured.map((s) => s.ttftMs).sort((a, b) => a - b);
  const engineTtft = measured.map((s) => s.engineTtftMs).sort((a, b) => a - b);
  const overhead = measured.map((s) => s.ttftMs - s.engineTtftMs).sort((a, b) => a - b);
  const tail = measured.filter((s) => s.engineTtftMs >= percentile(engineTtft, 90));
  const activeMs = perRun.reduce((a, m) => a + Math.max(...m.map((s) => s.doneMs)) - Math.min(...m.map((s) => s.sentMs)), 0);
  const p90 = (xs: number[]): number => percentile(xs.sort((a, b) => a - b), 90);
  return {
    workload: w.name,
    policy: label,
    routers,
    requests: measured.length,
    hit_ratio: round(cached / prompt, 4),
    device_hit_ratio: round(device / prompt, 4),
    host_hit_ratio: round(host / prompt, 4),
    ttft_p50_ms: round(percentile(ttft, 50), 2),
    ttft_p90_ms: round(percentile(ttft, 90), 2),
    ttft_p99_ms: round(percentile(ttft, 99), 2),
    engine_ttft_p50_ms: round(percentile(engineTtft, 50), 2),
    engine_prefill_mean_ms: round(measured.reduce((a, s) => a + s.engineTtftMs - s.engineQueueMs, 0) / measured.length, 2),
    engine_ttft_p90_ms: round(percentile(engineTtft, 90), 2),
    // What the slowest tenth waited for: queue (share of their engine TTFT) rather than prefill.
    engine_tail_queue_share: round(tail.reduce((a, s) => a + s.engineQueueMs, 0) / tail.reduce((a, s) => a + s.engineTtftMs, 0), 3),
    overhead_p50_ms: round(percentile(overhead, 50), 2),
    overhead_p90_ms: round(percentile(overhead, 90), 2),
    throughput_rps: round((measured.length / activeMs) * 1000, 1),
    engines_used: perInstance.size,
    max_engine_share: round(Math.max(...perInstance.values()) / measured.length, 3),
    wall_s: round(wallMs / 1000, 2),
    event_loop_utilization: round(elu, 2),
    reps: runs.length,
    hit_ratio_reps: perRun.map((m) => round(hitRatioOf(m), 4)),
    ttft_p90_reps_ms: perRun.map((m) => round(p90(m.map((s) => s.ttftMs)), 2)),
    engine_ttft_p90_reps_ms: perRun.map((m) => round(p90(m.map((s) => s.engineTtftMs)), 2)),
  };
}

function emit(obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'cluster', ...obj }) + '\n');
}

/**
 * One run: fresh router replicas (none for ORACLE), every cache emptied and every view settled on
 * empty caches and idle queues, then the whole workload.
 */
async function measure(
  stack: ClusterStack,
  engines: readonly ClusterEngine[],
  w: Workload,
  p: PolicyRun,
  replicas: number,
  startsMs: readonly number[] | null = null,
  warm: WarmUp | null = null,
): Promise<RunResult> {
  return summarize(w, p.label, replicas, [await runOnce(stack, engines, w, p, replicas, startsMs, warm)]);
}

/** An open-loop window driven and dropped before the measured one (`--sweep_warm`). */
interface WarmUp {
  readonly w: Workload;
  readonly startsMs: readonly number[];
}

async function runOnce(
  stack: ClusterStack,
  engines: readonly ClusterEngine[],
  w: Workload,
  p: PolicyRun,
  replicas: number,
  startsMs: readonly number[] | null,
  warm: WarmUp | null = null,
): Promise<Run> {
  const routers: RouterService[] = [];
  try {
    // TTFT's throughput prior is the engines' nominal speed, as an operator would set it from the hardware's.
    const prior = [`--ttft_prefill_tokens_per_s=${Math.round(1e6 / engines[0]!.prefill.usPerToken)}`, ...ROUTER_FLAGS];
    for (let i = 0; i < Math.max(1, replicas); i++) routers.push(await stack.startRouter(isOracle(p) ? 'RR' : (p.policy as 'RR' | 'SLO_AWARE' | 'CAR' | 'TTFT'), p.lambda ?? 0.5, INFLIGHT_LOAD, PENDING_PREFIX, undefined, prior));
    for (const e of engines) await e.reset();
    for (const r of routers) await untilSettled(r, engines);
    if (replicas > 1 && DESYNC) await desynchronize(routers, routers.map((r) => rotationOffset(r.routerId)));
    const target = isOracle(p) ? oracleTarget(engines, p, w) : routerTarget(routers);
    if (warm !== null) {
      await drive(warm.w, isOracle(p) ? oracleTarget(engines, p, warm.w) : target, warm.startsMs);
      // Queues idle again, caches as the warm-up left them, every view caught up.
      for (const r of routers) await untilSettled(r, engines, { emptyCaches: false });
    }
    const claims0 = await claimCounts(routers);
    const run = await drive(w, target, startsMs);
    if (replicas > 1 && !isOracle(p)) console.error(`[cluster] ${w.name} ${p.label} routers=${replicas} claims by outcome: ${formatClaims(claims0, await claimCounts(routers))}`);
    if (SAMPLES !== null) appendFileSync(SAMPLES, run.samples.map((x) => JSON.stringify({ workload: w.name, policy: p.label, routers: replicas, ...x })).join('\n') + '\n');
    return run;
  } finally {
    // ORACLE's one router only watched the view settle; it routed nothing.
    for (const r of routers) await r.close();
  }
}

/** The routers' `router_claims_total`, summed over the replicas, by outcome. */
async function claimCounts(routers: readonly RouterService[]): Promise<Map<string, number>> {
  const out = new Map<string, number>();
  for (const r of routers) {
    const metric = r.metrics.registry.getSingleMetric('router_claims_total');
    if (metric === undefined) continue;
    for (const v of (await metric.get()).values) {
      const key = String(v.labels['outcome']);
      out.set(key, (out.get(key) ?? 0) + v.value);
    }
  }
  return out;
}

/** What a run added to each nonzero claim count (analysis lines on stderr). */
function formatClaims(before: ReadonlyMap<string, number>, after: ReadonlyMap<string, number>): string {
  const parts = [...after].map(([k, v]) => [k, v - (before.get(k) ?? 0)] as const).filter(([, n]) => n > 0);
  return parts.length === 0 ? 'none' : parts.map(([k, n]) => `${k} ${n}`).join(', ');
}

/**
 * Replicas started together begin their tie rotations where their router ids put them (random
 * over the engines, so two may share a start: `--no_desync` measures that); replicas of a real
 * deployment started and served at different times. Replica k is moved to start at engine
 * k · engines/replicas: from its id's start (`offsets`, rotationOffset), that many tied decisions
 * first (`POST /v1/route` with ids no engine holds, while every queue is idle and every cache
 * empty: all scores and usage equal). Dry runs: they move the rotation without leaving in-flight
 * load behind.
 */
async function desynchronize(routers: readonly RouterService[], offsets: readonly number[]): Promise<void> {
  const body = JSON.stringify({ token_ids: Array.from({ length: 4 * BLOCK_SIZE }, (_, i) => 0x7ffff000 + i), dry_run: true });
  const step = Math.max(1, Math.floor(ENGINES / routers.length));
  for (let k = 0; k < routers.length; k++) {
    const moves = (((k * step - offsets[k]!) % ENGINES) + ENGINES) % ENGINES;
    for (let i = 0; i < moves; i++) {
      const res = await fetch(`http://127.0.0.1:${routers[k]!.port}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body });
      if (res.status !== 200) throw new Error(`desynchronize: /v1/route answered ${res.status}: ${await res.text()}`);
      await res.arrayBuffer();
    }
  }
}

/**
 * Engines sized for `sizing` (Device + Host shares of its working set; the sweep sizes its fixed
 * cluster on the main workload of the same kind), closed after `body`.
 */
async function withEngines<T>(
  stack: ClusterStack,
  w: Workload,
  sizing: Workload,
  prefill: PrefillCostOptions,
  body: (engines: readonly ClusterEngine[], shape: EngineShape) => Promise<T>,
): Promise<T> {
  const perEngine = sizing.workingSetBlocks / ENGINES;
  const shape: EngineShape = {
    blockSize: isTraceWorkload(sizing) ? TRACE_BLOCK_SIZE : BLOCK_SIZE,
    deviceCapacityBlocks: Math.max(1, Math.round(perEngine * DEVICE_SHARE)),
    hostCapacityBlocks: Math.round(perEngine * HOST_SHARE),
    prefill,
    heartbeatIntervalMs: HEARTBEAT_MS,
  };
  console.error(
    `[cluster] ${w.name}: ${w.sessions.length} sessions, ${w.requests} requests, ${w.promptTokens} prompt tokens, working set ${w.workingSetBlocks} blocks; per engine Device ${shape.deviceCapacityBlocks} + Host ${shape.hostCapacityBlocks} blocks`,
  );
  const engines = await stack.startEngines(ENGINES, shape);
  try {
    // Warm-up, dropped: an RR pass over a quarter of the sessions so JIT and the directory's first-use paths are not billed to RR.
    await measure(stack, engines, { ...sizing, sessions: sizing.sessions.slice(0, Math.ceil(sizing.sessions.length / 4)) }, { label: 'warmup', policy: 'RR', lambda: null }, 1);
    return await body(engines, shape);
  } finally {
    for (const e of engines) await e.close();
  }
}

/** Both 4-replica gaps of a CAR pair are known to within their targets' margins (gapResolved). */
function pairResolved(w: Workload, one: { p: PolicyRun; n: number; runs: Run[] }, four: { p: PolicyRun; n: number; runs: Run[] }): boolean {
  const a = summarize(w, one.p.label, one.n, one.runs);
  const b = summarize(w, four.p.label, four.n, four.runs);
  return gapResolved(reps(a, 'hit_ratio_reps'), reps(b, 'hit_ratio_reps'), 0.02) && gapResolved(reps(a, 'engine_ttft_p90_reps_ms'), reps(b, 'engine_ttft_p90_reps_ms'), 0.1);
}

function summaryLine(r: RunResult): string {
  return `hit ${r.hit_ratio} ttft p50 ${r.ttft_p50_ms} p90 ${r.ttft_p90_ms} ms (engine p90 ${r.engine_ttft_p90_ms}, overhead p50/p90 ${r.overhead_p50_ms}/${r.overhead_p90_ms}), ${r.throughput_rps} req/s, elu ${r.event_loop_utilization}, max share ${r.max_engine_share}`;
}

async function runWorkload(stack: ClusterStack, w: Workload): Promise<RunResult[]> {
  return withEngines(stack, w, w, PREFILL, async (engines, shape) => {
    const configs = POLICIES.flatMap((p) => (isOracle(p) ? [0] : [1, REPLICAS]).map((n) => ({ p, n, runs: [] as Run[] })));
    for (let rep = 0; rep < REPS; rep++) {
      for (const c of configs) {
        // RR and SLO_AWARE are baselines of TTFT, not of the targets' fine margins: once is enough.
        if (rep > 0 && !repeated(c.p)) continue;
        const run = await runOnce(stack, engines, w, c.p, c.n, null);
        c.runs.push(run);
        console.error(`[cluster] ${w.name} ${c.p.label} routers=${c.n} rep ${rep + 1}: ${summaryLine(summarize(w, c.p.label, c.n, [run]))}`);
      }
    }
    for (const one of configs) {
      const four = configs.find((c) => c.p === one.p && c.n === REPLICAS);
      if (!paired(one.p) || one.n !== 1 || four === undefined) continue;
      while (one.runs.length < MAX_PAIR_REPS && !pairResolved(w, one, four)) {
        for (const c of [one, four]) {
          c.runs.push(await runOnce(stack, engines, w, c.p, c.n, null));
          console.error(`[cluster] ${w.name} ${c.p.label} routers=${c.n} rep ${c.runs.length} (its pair's gap not resolved yet): ${summaryLine(summarize(w, c.p.label, c.n, c.runs.slice(-1)))}`);
        }
      }
    }
    const results = configs.map((c) => summarize(w, c.p.label, c.n, c.runs));
    for (const r of results) console.error(`[cluster] ${w.name} ${r.policy} routers=${r.routers} (${r.reps} reps pooled): ${summaryLine(r)}`);
    const rr = results.find((r) => r.policy === 'RR' && r.routers === 1)!;
    for (const r of results) {
      const oracle = results.find((o) => o.policy === oracleLabelFor(r.policy))!;
      emit({
        ...r,
        ttft_p90_vs_rr: round(rr.ttft_p90_ms / r.ttft_p90_ms, 2),
        engine_ttft_p90_vs_rr: round(rr.engine_ttft_p90_ms / r.engine_ttft_p90_ms, 2),
        oracle: oracle.policy,
        hit_vs_oracle: round(r.hit_ratio / oracle.hit_ratio, 3),
        ttft_p90_vs_oracle: round(oracle.ttft_p90_ms / r.ttft_p90_ms, 2),
        working_set_blocks: w.workingSetBlocks,
        device_blocks_per_engine: shape.deviceCapacityBlocks,
        host_blocks_per_engine: shape.hostCapacityBlocks,
        heartbeat_ms: HEARTBEAT_MS,
        car_inflight_load: INFLIGHT_LOAD,
        car_pending_prefix: PENDING_PREFIX,
        desynchronized: DESYNC,
        quick: QUICK,
      });
    }
    return results;
  });
}

interface SweepResult extends RunResult {
  kv: SweepKv;
  warm: boolean;
  load_fraction: number;
  sessions_per_s: number;
  /** Distinct blocks of the sessions this run sends, and the cluster's Device + Host blocks. */
  run_working_set_blocks: number;
  kv_capacity_blocks: number;
}

/**
 * The load sweep (load-sweep.ts) on `w`, on engines sized for `sizing`: RR unloaded (a few
 * sessions, far apart), then RR at geometrically rising session rates until its TTFT p90 passes
 * KNEE_FACTOR × unloaded, then every SWEEP_RUNS configuration at SWEEP_FRACTIONS of that knee.
 * A run at `rate` sends the first rate × SWEEP.windowS sessions (so every rate is sustained for
 * the same time), all configurations of one fraction on the same Poisson schedule; the top
 * fraction's repetitions each on a schedule of their own (scheduleOf), every configuration of a
 * repetition on that one.
 */
async function runSweep(stack: ClusterStack, w: Workload, sizing: Workload, kv: SweepKv): Promise<SweepResult[]> {
  const trace = isTraceWorkload(w) ? w : null;
  return withEngines(stack, w, sizing, trace === null ? SWEEP_PREFILL : TRACE_PREFILL, async (engines, shape) => {
    if (trace !== null && REPLAY_ONLY && TRACE_SPEED !== null) {
      await replayAtSpeed(stack, engines, trace, TRACE_SPEED);
      return [];
    }
    const capacity = ENGINES * (shape.deviceCapacityBlocks + shape.hostCapacityBlocks);
    const rr = POLICIES[0]!;
    const plan = trace === null ? SWEEP : TRACE_SWEEP;
    const turns = w.requests / w.sessions.length;
    const seedFor = (rate: number): number => SEED + Math.round(rate * 1000);
    const reps = sweepReps(trace !== null);
    // With warm-ups the population is split: measured sessions from the front, warm-up ones from the back.
    const population = SWEEP_WARM ? Math.floor(w.sessions.length / 2) : w.sessions.length;
    /**
     * Arrival times of `n` sessions at `rate` per second: Poisson for the generated sessions, the
     * trace's own times scaled to the rate for a trace (from its `from`-th request).
     */
    const startsAt = (rate: number, n: number, from: number, seed: number): number[] =>
      trace === null ? poissonStarts(n, rate, seed) : traceStarts(trace.arrivalsMs.slice(from, from + n), trace.nativeRatePerS, rate);
    /**
     * The sessions of a run at `rate`, their arrival times, and the warm-up before them
     * (`--sweep_warm`). Repetition `rep` > 0 of the top fraction gets a schedule of its own
     * (scheduleOf): other sessions or another stretch of the trace, other arrival times.
     */
    const load = (rate: number, n = Math.min(population, Math.max(plan.unloadedSessions, Math.ceil(rate * plan.windowS))), rep = 0): [Workload, number[], WarmUp | null] => {
      const s = scheduleOf(population, n, rep, reps, trace !== null);
      return [
        { ...w, sessions: wrappingSlice(w.sessions, population, s.from, n) },
        startsAt(rate, n, s.from, seedFor(rate) + s.seedOffset),
        SWEEP_WARM ? { w: { ...w, sessions: w.sessions.slice(w.sessions.length - n) }, startsMs: startsAt(rate, n, w.sessions.length - n, seedFor(rate) + 1 + s.seedOffset) } : null,
      ];
    };
    /** measure()'s arguments for an RR run at `rate`. */
    const runAt = (rate: number, n?: number): [Workload, PolicyRun, number, number[], WarmUp | null] => {
      const [sub, starts, warm] = load(rate, n);
      return [sub, rr, 1, starts, warm];
    };
    const full = trace === null ? await findKnee(stack, engines, w, kv, capacity, turns, population, runAt) : await traceKnee(stack, engines, trace, capacity);
    const out: SweepResult[] = [];
    for (const f of SWEEP_FRACTIONS) {
      const rate = f * full;
      const top = f === SWEEP_FRACTIONS.at(-1);
      // Every configuration of a repetition on one schedule (the comparisons stay paired).
      const schedules = Array.from({ length: top ? reps : 1 }, (_, rep) => load(rate, undefined, rep));
      const sub = schedules[0]![0];
      const runWorkingSet = workingSetBlocks(sub.sessions, shape.blockSize);
      const configs = SWEEP_RUNS.map((c) => ({ ...c, runs: [] as Run[] }));
      for (let rep = 0; rep < schedules.length; rep++) {
        const [repSub, starts, warm] = schedules[rep]!;
        for (const c of configs) {
          if (rep > 0 && !paired(c.run)) continue;
          c.runs.push(await runOnce(stack, engines, repSub, c.run, c.replicas, starts, warm));
          const r = summarize(sub, c.run.label, c.replicas, c.runs.slice(-1));
          console.error(`[cluster] sweep ${w.name} kv=${kv} ${Math.round(f * 100)}% (${round(rate, 2)} sessions/s, working set ${runWorkingSet} blocks of ${capacity}) ${c.run.label} routers=${c.replicas} rep ${c.runs.length}: ${summaryLine(r)}`);
        }
      }
      for (const { run, replicas, runs } of configs) {
        const r = summarize(sub, run.label, replicas, runs);
        if (runs.length > 1) console.error(`[cluster] sweep ${w.name} kv=${kv} ${Math.round(f * 100)}% ${run.label} routers=${replicas} (${runs.length} reps pooled): ${summaryLine(r)}`);
        out.push({
          ...r,
          kv,
          warm: SWEEP_WARM,
          load_fraction: f,
          sessions_per_s: round(rate, 2),
          ...(trace === null ? {} : { trace_speed: round(rate / trace.nativeRatePerS, 3) }),
          run_working_set_blocks: runWorkingSet,
          kv_capacity_blocks: capacity,
        });
      }
    }
    for (const r of out) {
      const same = (label: string, routers: number): SweepResult | undefined => out.find((o) => o.load_fraction === r.load_fraction && o.policy === label && o.routers === routers);
      const base = same('RR', 1)!;
      const oracle = same(oracleLabelFor(r.policy), 0);
      emit({
        kind: 'cluster_sweep',
        ...r,
        offered_rps: round(r.sessions_per_s * turns, 1),
        ttft_p90_vs_rr: round(base.ttft_p90_ms / r.ttft_p90_ms, 2),
        engine_ttft_p90_vs_rr: round(base.engine_ttft_p90_ms / r.engine_ttft_p90_ms, 2),
        hit_vs_oracle: oracle === undefined ? null : round(r.hit_ratio / oracle.hit_ratio, 3),
        engine_ttft_p90_vs_oracle: oracle === undefined ? null : round(oracle.engine_ttft_p90_ms / r.engine_ttft_p90_ms, 2),
        quick: QUICK,
      });
    }
    if (trace !== null && TRACE_SPEED !== null) await replayAtSpeed(stack, engines, trace, TRACE_SPEED);
    return out;
  });
}

/** What the knee search needs of runSweep: an RR run's arguments at a rate. */
type RunAt = (rate: number, n?: number) => [Workload, PolicyRun, number, number[], WarmUp | null];

/**
 * A generated workload's knee: RR unloaded (a few sessions far apart), then RR at rates rising by
 * SWEEP.step until its engine TTFT p90 passes KNEE_FACTOR × unloaded, the bracket bisected
 * SWEEP.refine times, the crossing interpolated (`cluster_knee` line). Returns the knee rate (the
 * last rate tried when none passed).
 */
async function findKnee(stack: ClusterStack, engines: readonly ClusterEngine[], w: Workload, kv: SweepKv, capacity: number, turns: number, population: number, runAt: RunAt): Promise<number> {
  const unloaded = await measure(stack, engines, ...runAt(SWEEP.unloadedRate, SWEEP.unloadedSessions));
  // The knee is found on the engines' clock (queue wait + prefill on their virtual schedule):
  // client TTFT on this shared machine adds the harness's own event-loop delay.
  const limit = KNEE_FACTOR * unloaded.engine_ttft_p90_ms;
  console.error(`[cluster] sweep ${w.name}: RR unloaded (${SWEEP.unloadedRate} sessions/s) engine ttft p90 ${unloaded.engine_ttft_p90_ms} ms, knee at ${round(limit, 1)} ms`);
  const steps: KneeStep[] = [];
  let knee: number | null = null;
  const maxRate = population / SWEEP.windowS;
  for (let rate = SWEEP.startRate; rate <= maxRate && knee === null; rate *= SWEEP.step) {
    const r = await measure(stack, engines, ...runAt(rate));
    steps.push({ rate: round(rate, 2), ttftP90Ms: r.engine_ttft_p90_ms });
    console.error(`[cluster] sweep ${w.name}: RR at ${round(rate, 2)} sessions/s: engine ttft p90 ${r.engine_ttft_p90_ms} ms, client ${r.ttft_p90_ms} ms (${r.throughput_rps} req/s)`);
    knee = kneeRate({ rate: SWEEP.unloadedRate, ttftP90Ms: unloaded.engine_ttft_p90_ms }, steps, limit);
  }
  if (knee !== null) {
    // TTFT is not linear in load (flat, then steep, then window-bound once RR is past its
    // throughput), so a straight line between two steps ×1.5 apart can miss the crossing by
    // most of a step: bisect the bracket (geometric midpoints) before interpolating.
    let hi = steps.at(-1)!;
    let lo = steps.length > 1 ? steps.at(-2)! : { rate: SWEEP.unloadedRate, ttftP90Ms: unloaded.engine_ttft_p90_ms };
    for (let i = 0; i < SWEEP.refine; i++) {
      const rate = Math.sqrt(lo.rate * hi.rate);
      const r = await measure(stack, engines, ...runAt(rate));
      const step = { rate: round(rate, 2), ttftP90Ms: r.engine_ttft_p90_ms };
      steps.push(step);
      console.error(`[cluster] sweep ${w.name}: RR at ${step.rate} sessions/s (refining): engine ttft p90 ${r.engine_ttft_p90_ms} ms, client ${r.ttft_p90_ms} ms (${r.throughput_rps} req/s)`);
      if (step.ttftP90Ms >= limit) hi = step;
      else lo = step;
    }
    knee = kneeRate(lo, [hi], limit);
    steps.sort((a, b) => a.rate - b.rate);
  }
  const full = knee ?? steps.at(-1)!.rate;
  emit({
    kind: 'cluster_knee',
    workload: w.name,
    kv,
    warm: SWEEP_WARM,
    kv_capacity_blocks: capacity,
    unloaded_sessions_per_s: SWEEP.unloadedRate,
    unloaded_ttft_p90_ms: unloaded.ttft_p90_ms,
    unloaded_engine_ttft_p90_ms: unloaded.engine_ttft_p90_ms,
    clock: 'engine',
    limit_engine_ttft_p90_ms: round(limit, 2),
    steps: steps.map((s) => ({ sessions_per_s: s.rate, engine_ttft_p90_ms: s.ttftP90Ms })),
    knee_reached: knee !== null,
    knee_sessions_per_s: round(full, 2),
    turns_per_session: round(turns, 2),
    window_s: SWEEP.windowS,
    quick: QUICK,
  });
  return full;
}

/**
 * A trace's knee is RR's saturation: the rate at which the engines, prefilling RR's requests one
 * at a time, are busy all the time — ENGINES / RR's mean prefill time, measured unloaded on a
 * sample spread over the population (its hits are RR's). A latency criterion does not suit a
 * heavy-tailed prompt mix: its p90 is the longest prompts' own prefill, 5× of which only deep
 * overload reaches, and within a short window even the median stays low well past saturation
 * (measured: RR's p50 crossed 5× unloaded at 2.5× its throughput). 50/70/90% of the knee are
 * then RR's utilisation.
 */
async function traceKnee(stack: ClusterStack, engines: readonly ClusterEngine[], w: TraceWorkload, capacity: number): Promise<number> {
  const unloaded = await measureUnloadedTrace(stack, engines, w);
  const full = (ENGINES * 1000) / unloaded.engine_prefill_mean_ms;
  console.error(`[cluster] sweep ${w.name}: RR unloaded (${TRACE_SWEEP.unloadedSessions} requests, ${UNLOADED_CLIENTS} at a time): mean prefill ${unloaded.engine_prefill_mean_ms} ms, engine ttft p50/p90 ${unloaded.engine_ttft_p50_ms}/${unloaded.engine_ttft_p90_ms} ms: RR saturates at ${round(full, 2)} requests/s`);
  emit({
    kind: 'cluster_knee',
    workload: w.name,
    kv: 'ample',
    kv_capacity_blocks: capacity,
    knee_kind: 'rr_saturation',
    unloaded_requests: TRACE_SWEEP.unloadedSessions,
    unloaded_engine_prefill_mean_ms: unloaded.engine_prefill_mean_ms,
    unloaded_engine_ttft_p50_ms: unloaded.engine_ttft_p50_ms,
    unloaded_engine_ttft_p90_ms: unloaded.engine_ttft_p90_ms,
    unloaded_hit_ratio: unloaded.hit_ratio,
    clock: 'engine',
    knee_sessions_per_s: round(full, 2),
    knee_trace_speed: round(full / w.nativeRatePerS, 3),
    window_s: TRACE_SWEEP.windowS,
    trace: traceLine(w),
    quick: QUICK,
  });
  return full;
}

/** Concurrent clients of a trace's unloaded run (fewer than the engines: RR seldom queues one behind another). */
const UNLOADED_CLIENTS = ENGINES / 2;

/**
 * A trace's unloaded run: TRACE_SWEEP.unloadedSessions of its requests, evenly spread over the
 * population (its start is not its average: a trace opens cold), through RR, closed loop by
 * UNLOADED_CLIENTS clients at once with no pause, so an engine seldom holds two (a heavy-tailed
 * mix needs dozens of requests for its mean, and far apart they would take minutes).
 */
async function measureUnloadedTrace(stack: ClusterStack, engines: readonly ClusterEngine[], w: TraceWorkload): Promise<RunResult> {
  const stride = Math.max(1, Math.floor(w.sessions.length / TRACE_SWEEP.unloadedSessions));
  const requests = w.sessions.filter((_, i) => i % stride === 0).slice(0, TRACE_SWEEP.unloadedSessions).map((s) => s[0]!);
  const sessions = Array.from({ length: UNLOADED_CLIENTS }, (_, c) => requests.filter((_, i) => i % UNLOADED_CLIENTS === c));
  return measure(stack, engines, { ...w, sessions }, POLICIES[0]!, 1, null);
}

/** What a trace workload is (cluster_knee and cluster_replay lines). */
function traceLine(w: TraceWorkload): Record<string, unknown> {
  return {
    source: w.name === 'trace' ? TRACE_FILE : `generated (mixed-trace.ts, seed ${SEED + 5})`,
    requests: w.requests,
    native_rps: round(w.nativeRatePerS, 3),
    mean_input_tokens: w.stats.inputTokens.mean,
    p50_input_tokens: w.stats.inputTokens.p50,
    p90_input_tokens: w.stats.inputTokens.p90,
    p99_input_tokens: w.stats.inputTokens.p99,
    max_input_tokens: w.stats.inputTokens.max,
    prefix_reuse: round(w.stats.prefixReuse, 3),
    ids_mismatched: w.stats.idsMismatched,
  };
}

/**
 * `--trace_speed=X`: the trace's first requests (TRACE_SWEEP.windowS at X times its recorded rate)
 * replayed at their recorded times ÷ X, every sweep configuration once: `cluster_replay` lines.
 */
async function replayAtSpeed(stack: ClusterStack, engines: readonly ClusterEngine[], w: TraceWorkload, speed: number): Promise<void> {
  const rate = speed * w.nativeRatePerS;
  const n = Math.min(w.sessions.length, Math.max(TRACE_SWEEP.unloadedSessions, Math.ceil(rate * TRACE_SWEEP.windowS)));
  const sub = { ...w, sessions: w.sessions.slice(0, n) };
  const starts = traceStarts(w.arrivalsMs.slice(0, n), w.nativeRatePerS, rate);
  const results: RunResult[] = [];
  for (const { run, replicas } of SWEEP_RUNS) {
    const r = await measure(stack, engines, sub, run, replicas, starts);
    console.error(`[cluster] replay ${w.name} at ×${speed} (${round(rate, 2)} req/s, ${n} requests) ${run.label} routers=${replicas}: ${summaryLine(r)}`);
    results.push(r);
  }
  const rr = results.find((r) => r.policy === 'RR')!;
  for (const r of results) {
    emit({ kind: 'cluster_replay', ...r, trace_speed: speed, offered_rps: round(rate, 2), trace: traceLine(w), ttft_p90_vs_rr: round(rr.ttft_p90_ms / r.ttft_p90_ms, 2), quick: QUICK });
  }
}

function target(name: string, w: string, policy: string, routers: number, value: number, met: boolean, extra: Record<string, unknown> = {}): void {
  emit({ kind: 'cluster_target', target: name, workload: w, policy, routers, value: round(value, 4), met, ...extra });
}

/** A per-repetition series of a result (summarize fills them). */
function reps(r: RunResult, field: string): number[] {
  return r[field] as number[];
}

function targets(results: readonly RunResult[], sweep: readonly SweepResult[]): void {
  for (const w of ['multi_turn', 'agentic']) {
    const of = (policy: string, routers: number): RunResult | undefined => results.find((r) => r.workload === w && r.policy === policy && r.routers === routers);
    const rr = of('RR', 1);
    if (rr !== undefined) {
      // TTFT too (issue 27): its hit ratio against its own oracle and its 4-replica gaps.
      for (const car of ['CAR_0.5', 'CAR_0.8', 'TTFT']) {
        const oracle = of(oracleLabelFor(car), 0)!;
        for (const n of [1, REPLICAS]) {
          const r = of(car, n)!;
          const hitVsOracle = r.hit_ratio / oracle.hit_ratio;
          target('hit_ratio >= 0.95 * ORACLE', w, car, n, hitVsOracle, hitVsOracle >= 0.95, { oracle: oracle.policy, per_rep: perRepRatio(oracle, r, 'hit_ratio_reps') });
          if (w === 'multi_turn') {
            const speedup = rr.ttft_p90_ms / r.ttft_p90_ms;
            target('ttft_p90 >= 2x better than RR', w, car, n, speedup, speedup >= 2);
            // The same on the engines' own clock: without the client-side scheduling noise of a shared machine.
            const engineSpeedup = rr.engine_ttft_p90_ms / r.engine_ttft_p90_ms;
            target('engine ttft_p90 >= 2x better than RR', w, car, n, engineSpeedup, engineSpeedup >= 2);
          }
        }
        const one = of(car, 1)!;
        const four = of(car, REPLICAS)!;
        // Judged on the pooled repetitions; per_rep is the signed gap (4 − 1) / 1 per repetition, its mean and 95% interval.
        const gap = (field: string, of: (r: RunResult) => number): Record<string, unknown> => ({
          one: of(one),
          four: of(four),
          per_rep: perRepGap(one, four, field),
        });
        const hitRel = Math.abs(four.hit_ratio - one.hit_ratio) / one.hit_ratio;
        target('4 replicas hit_ratio within 2% of 1', w, car, REPLICAS, hitRel, hitRel <= 0.02, gap('hit_ratio_reps', (r) => r.hit_ratio));
        const ttftRel = Math.abs(four.ttft_p90_ms - one.ttft_p90_ms) / one.ttft_p90_ms;
        target('4 replicas ttft_p90 within 10% of 1', w, car, REPLICAS, ttftRel, ttftRel <= 0.1, { clock: 'client', ...gap('ttft_p90_reps_ms', (r) => r.ttft_p90_ms) });
        const engineRel = Math.abs(four.engine_ttft_p90_ms - one.engine_ttft_p90_ms) / one.engine_ttft_p90_ms;
        target('4 replicas engine ttft_p90 within 10% of 1', w, car, REPLICAS, engineRel, engineRel <= 0.1, { clock: 'engine', ...gap('engine_ttft_p90_reps_ms', (r) => r.engine_ttft_p90_ms) });
      }
    }
    for (const kv of SWEEP_KV) {
      const at90 = sweep.filter((r) => r.workload === w && r.kv === kv && r.load_fraction === 0.9);
      const rr90 = at90.find((r) => r.policy === 'RR');
      if (rr90 === undefined) continue;
      for (const r of at90) {
        // The ORACLE lines are the reference: what perfect knowledge with CAR's cost function reaches at this load.
        if (r.policy === 'RR') continue;
        const extra = { kv, warm: SWEEP_WARM, sessions_per_s: r.sessions_per_s, run_working_set_blocks: r.run_working_set_blocks, kv_capacity_blocks: r.kv_capacity_blocks };
        const speedup = rr90.ttft_p90_ms / r.ttft_p90_ms;
        target('ttft_p90 >= 10x better than RR at 90% load', w, r.policy, r.routers, speedup, speedup >= 10, extra);
        const engineSpeedup = rr90.engine_ttft_p90_ms / r.engine_ttft_p90_ms;
        target('engine ttft_p90 >= 10x better than RR at 90% load', w, r.policy, r.routers, engineSpeedup, engineSpeedup >= 10, extra);
      }
    }
  }
  ttftTargets(sweep);
}

/**
 * What the TTFT cost keeps of `car`'s hits with true queues and pools: ORACLE_TTFT's hit ratio over
 * `car`'s on the schedule the ORACLE ran (the first repetition's), so a reader of the TTFT hit line
 * sees how much of a shortfall the formula itself sets and how much the router's estimates add.
 */
function oracleHitVsCar(oracle: SweepResult | undefined, car: SweepResult): Record<string, number> {
  const carFirst = reps(car, 'hit_ratio_reps')[0];
  if (oracle === undefined || carFirst === undefined || carFirst <= 0) return {};
  return { oracle_ttft_hit_ratio: oracle.hit_ratio, oracle_ttft_hit_vs_car_first_schedule: round(oracle.hit_ratio / carFirst, 4) };
}

/** Per repetition b / a of a per-repetition series `field`: its mean and 95% interval (a target's `per_rep`). */
function perRepRatio(a: RunResult, b: RunResult, field: string): ReturnType<typeof confidence> {
  return confidence(ratios(reps(a, field), reps(b, field)));
}

/** Per repetition the signed gap (b − a) / a of a per-repetition series `field`: its mean and 95% interval. */
function perRepGap(a: RunResult, b: RunResult, field: string): ReturnType<typeof confidence> {
  return confidence(relativeGaps(reps(a, field), reps(b, field)));
}

/**
 * Issue 27's goals, on every swept workload at 90% of RR's knee, for 1 and REPLICAS routers: the
 * TTFT policy's TTFT p90 against the better CAR λ at the same router count (≥ 1.3× better on
 * mixed_length, no worse elsewhere; client and engine clocks), its hit ratio ≥ 0.95 of that
 * CAR's, and its REPLICAS routers within 10% of one. Judged on the sweepReps() repetitions
 * pooled; `per_rep` is the same comparison per repetition (repetition i of each configuration ran
 * back to back, on schedule i), its mean and 95% interval, which also meets "no worse" when it
 * reaches 1 (notMeasurablyWorse: a tie is not a loss).
 */
function ttftTargets(sweep: readonly SweepResult[]): void {
  const workloadsSwept = [...new Set(sweep.map((r) => r.workload))];
  for (const w of workloadsSwept) {
    for (const kv of SWEEP_KV) {
      const at90 = sweep.filter((r) => r.workload === w && r.kv === kv && r.load_fraction === 0.9);
      const of = (policy: string, routers: number): SweepResult | undefined => at90.find((r) => r.policy === policy && r.routers === routers);
      const goal = w === 'mixed_length' ? 1.3 : 1;
      const extra = (r: SweepResult): Record<string, unknown> => ({ kv, sessions_per_s: r.sessions_per_s, ...(r['trace_speed'] === undefined ? {} : { trace_speed: r['trace_speed'] }) });
      for (const n of [1, REPLICAS]) {
        const ttft = of('TTFT', n);
        const cars = ['CAR_0.5', 'CAR_0.8'].map((l) => of(l, n)).filter((r): r is SweepResult => r !== undefined);
        if (ttft === undefined || cars.length === 0) continue;
        const best = cars.reduce((a, b) => (b.ttft_p90_ms < a.ttft_p90_ms ? b : a));
        const name = goal > 1 ? `TTFT ttft_p90 >= ${goal}x better than best CAR at 90% load` : 'TTFT ttft_p90 no worse than best CAR at 90% load';
        // ≥ goal× on the pooled value; "no worse" (goal 1) also when not measurably worse (notMeasurablyWorse).
        const judged = (speedup: number, perRep: ReturnType<typeof confidence>): [boolean, Record<string, unknown>] =>
          goal > 1 ? [speedup >= goal, {}] : [notMeasurablyWorse(speedup, perRep), { pooled_met: speedup >= 1, judged_on: 'pooled >= 1 or per_rep ci95 reaching 1' }];
        const speedup = best.ttft_p90_ms / ttft.ttft_p90_ms;
        const perRep = perRepRatio(ttft, best, 'ttft_p90_reps_ms');
        const [met, how] = judged(speedup, perRep);
        target(name, w, 'TTFT', n, speedup, met, { clock: 'client', car: best.policy, ttft_p90_ms: ttft.ttft_p90_ms, car_ttft_p90_ms: best.ttft_p90_ms, per_rep: perRep, ...how, ...extra(ttft) });
        const bestEngine = cars.reduce((a, b) => (b.engine_ttft_p90_ms < a.engine_ttft_p90_ms ? b : a));
        const engineSpeedup = bestEngine.engine_ttft_p90_ms / ttft.engine_ttft_p90_ms;
        const enginePerRep = perRepRatio(ttft, bestEngine, 'engine_ttft_p90_reps_ms');
        const [engineMet, engineHow] = judged(engineSpeedup, enginePerRep);
        target(`engine ${name}`, w, 'TTFT', n, engineSpeedup, engineMet, { clock: 'engine', car: bestEngine.policy, ttft_p90_ms: ttft.engine_ttft_p90_ms, car_ttft_p90_ms: bestEngine.engine_ttft_p90_ms, per_rep: enginePerRep, ...engineHow, ...extra(ttft) });
        const hit = ttft.hit_ratio / best.hit_ratio;
        target('TTFT hit_ratio >= 0.95 * best CAR at 90% load', w, 'TTFT', n, hit, hit >= 0.95, { car: best.policy, ttft_hit_ratio: ttft.hit_ratio, car_hit_ratio: best.hit_ratio, max_car_hit_ratio: Math.max(...cars.map((c) => c.hit_ratio)), per_rep: perRepRatio(best, ttft, 'hit_ratio_reps'), ...oracleHitVsCar(of('ORACLE_TTFT', 0), best), ...extra(ttft) });
      }
      const one = of('TTFT', 1);
      const four = of('TTFT', REPLICAS);
      if (one === undefined || four === undefined) continue;
      const rel = Math.abs(four.ttft_p90_ms - one.ttft_p90_ms) / one.ttft_p90_ms;
      target('TTFT 4 replicas ttft_p90 within 10% of 1 at 90% load', w, 'TTFT', REPLICAS, rel, rel <= 0.1, { clock: 'client', one: one.ttft_p90_ms, four: four.ttft_p90_ms, per_rep: perRepGap(one, four, 'ttft_p90_reps_ms'), ...extra(four) });
      const engineRel = Math.abs(four.engine_ttft_p90_ms - one.engine_ttft_p90_ms) / one.engine_ttft_p90_ms;
      target('TTFT 4 replicas engine ttft_p90 within 10% of 1 at 90% load', w, 'TTFT', REPLICAS, engineRel, engineRel <= 0.1, { clock: 'engine', one: one.engine_ttft_p90_ms, four: four.engine_ttft_p90_ms, per_rep: perRepGap(one, four, 'engine_ttft_p90_reps_ms'), ...extra(four) });
    }
  }
}

async function main(): Promise<void> {
  const only = process.argv.find((a) => a.startsWith('--workload='))?.slice('--workload='.length);
  const noSweep = process.argv.includes('--no_sweep');
  const sweepOnly = process.argv.includes('--sweep_only');
  // Built even for --sweep_only: the pressured sweep sizes its cluster on the main workload of its name.
  const policyWorkloads = await workloads();
  const built = sweepOnly ? [] : policyWorkloads.filter((w) => only === undefined || w.name === only);
  const swept = noSweep ? [] : sweepWorkloads(only);
  const generated = swept.filter((w) => !w.trace);
  const traces = swept.filter((w) => w.trace);
  let stack: ClusterStack | null = null;
  // Ctrl-C / SIGTERM: the directory and etcd are children in their own process groups; stop them.
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void (stack?.close() ?? Promise.resolve()).finally(() => process.exit(130)));
  const results: RunResult[] = [];
  const sweep: SweepResult[] = [];
  try {
    if (built.length + generated.length > 0) {
      const s = (stack = await ClusterStack.start(BLOCK_SIZE));
      for (const w of built) results.push(...(await runWorkload(s, w)));
      for (const g of generated) {
        const w = await g.build();
        for (const kv of SWEEP_KV) sweep.push(...(await runSweep(s, w, kv === 'pressured' ? policyWorkloads.find((m) => m.name === w.name)! : w, kv)));
      }
      await s.close();
      stack = null;
    }
    // A trace has no policy-run workload of its own to size a pressured cluster on: it runs on
    // engines sized on its own population (what `ample` means for the generated workloads).
    if (traces.length > 0 && SWEEP_KV.includes('ample')) {
      const s = (stack = await ClusterStack.start(TRACE_BLOCK_SIZE));
      for (const t of traces) {
        const w = await t.build();
        sweep.push(...(await runSweep(s, w, w, 'ample')));
      }
    }
  } finally {
    await loadClient?.close();
    await stack?.close();
  }
  targets(results, sweep);
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    // A bad trace file is the user's input: its one line says where, no stack needed.
    console.error(e instanceof TraceFormatError ? e.message : e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exit(1);
  },
);
