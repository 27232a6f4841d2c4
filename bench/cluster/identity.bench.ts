/**
 * Cluster benchmark, mixed cache identities (issue 26; cache-identity §1–§6): in a fleet serving
 * two base models, a LoRA adapter and two salted tenants, does each identity get the cache hits an
 * omniscient router would give it, and does every request land on an engine serving its model?
 *
 * Setup (all real parts, cluster-stack.ts): etcd and directory-svc as processes; 8 simulated
 * engines (identity-workload.ts FLEET): 5 serve qwen3 (2 of them also the adapter sql-lora),
 * 3 serve llama-3.1, each strict (a model it does not serve is vLLM's 404, counted), registered
 * in etcd with its `models`, tokenizing with its model's tokenizer (Qwen3, Llama 3.1), keying its
 * pool by identity as vLLM does, with the same prefill cost model and Device 50% + Host 20% of its
 * model's working set as cluster.bench.ts. Router replicas (RouterService in this process) with
 * per-model tokenizers (what `--models_file` loads) proxy the clients' OpenAI bodies.
 *
 * Workload (identity-workload.ts): multi-turn sessions of five identities (qwen3, sql-lora over
 * completions, qwen3 salted tenant-a and tenant-b, llama-3.1), all sharing the same system prompt
 * texts; closed loop through the load client's thread (load-client.ts). Quick: 12 users per
 * identity × 4 turns; full: 32 × 6.
 *
 * Policies: RR, CAR λ 0.5 and 0.8 on 1 and 4 routers (round-robin over the replicas), ORACLE_0.5
 * and ORACLE_0.8 (oracle.ts with the request's identity: only engines that would serve the model,
 * each pool read under that engine's keys for it); full adds SLO_AWARE. CAR and ORACLE runs are
 * repeated (--reps, quick 5, full 8; interleaved), RR and SLO_AWARE run once. Every run
 * starts from empty caches and settled views; the first 10% of each run's requests are warm-up.
 *
 * Lines: one `cluster_identity` per (identity, policy, routers): hit_ratio = cached / prompt
 * tokens from the engines' own accounting (usage.prompt_tokens_details.cached_tokens) over the
 * pooled repetitions, its oracle's, and wrong_model_requests (answers from an engine that does not
 * list the identity's model); `cluster_target` lines: per identity, CAR's hit ratio ≥ 0.95 × its
 * ORACLE's; per (policy, routers), requests on an engine not serving their model (its 404s plus
 * such answers) == 0.
 *
 * Run: node --import tsx bench/cluster/identity.bench.ts [--quick] [--reps=N]
 */
import { performance } from 'node:perf_hooks';
import type { RouterService } from '../../router-svc/router-service.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { ModelTokenizers } from '../../shared/tokenize/model-tokenizers.js';
import type { PrefillCostOptions } from '../../tools/engine-sim/prefill-cost-model.js';
import { ClusterStack, untilSettled, type ClusterEngine } from './cluster-stack.js';
import { FLEET, IDENTITIES, LLAMA, QWEN, buildIdentityWorkload, type IdentityShape, type IdentityWorkload } from './identity-workload.js';
import { LoadClient, type ClientTarget, type OracleChooser, type Sample } from './load-client.js';
import { OmniscientRouter } from './oracle.js';
import { confidence, ratios } from './rep-stats.js';

const QUICK = process.argv.includes('--quick');
const SEED = 0x1d26;
const BLOCK_SIZE = 16;
const REPLICAS = 4;
const WARMUP_FRACTION = 0.1;
/**
 * Repetitions of every CAR and ORACLE run (interleaved): one identity's share of a quick run is
 * ~40 measured requests, and at λ 0.5 a single run's hit ratio moves by ±0.1 between identical
 * runs (the ORACLE's too: load-driven splits), so targets are judged on the pooled samples, with
 * the per-repetition ratio's 95% interval beside them.
 */
const REPS = numberArg('--reps', QUICK ? 5 : 8);
/** cluster.bench.ts's engines: Device 50% + Host 20% of the working set, the same prefill costs. */
const DEVICE_SHARE = 0.5;
const HOST_SHARE = 0.2;
const HEARTBEAT_MS = 500;
const PREFILL: PrefillCostOptions = { baseUs: 1000, usPerToken: 80, hostUsPerToken: 20, concurrency: 1 };
const SHAPE: IdentityShape = {
  usersPerIdentity: QUICK ? 12 : 32,
  turns: QUICK ? 4 : 6,
  systemPrompts: 4,
  systemPromptTokens: 384,
  messageTokens: [32, 96],
  thinkMs: QUICK ? 100 : 400,
  rampMs: QUICK ? 200 : 1500,
};
const HIT_TARGET = 0.95;

function numberArg(name: string, fallback: number): number {
  const a = process.argv.find((x) => x.startsWith(`${name}=`));
  return a === undefined ? fallback : Number(a.slice(name.length + 1));
}

interface PolicyRun {
  readonly label: string;
  readonly policy: 'RR' | 'SLO_AWARE' | 'CAR' | 'ORACLE';
  readonly lambda: number;
  /** 0: the ORACLE (no router). */
  readonly routers: number;
}

const CONFIGS: readonly PolicyRun[] = [
  { label: 'RR', policy: 'RR', lambda: 0.5, routers: 1 },
  ...(QUICK ? [] : [{ label: 'SLO_AWARE', policy: 'SLO_AWARE', lambda: 0.5, routers: 1 } as const]),
  { label: 'CAR_0.5', policy: 'CAR', lambda: 0.5, routers: 1 },
  { label: 'CAR_0.5', policy: 'CAR', lambda: 0.5, routers: REPLICAS },
  { label: 'ORACLE_0.5', policy: 'ORACLE', lambda: 0.5, routers: 0 },
  { label: 'CAR_0.8', policy: 'CAR', lambda: 0.8, routers: 1 },
  { label: 'CAR_0.8', policy: 'CAR', lambda: 0.8, routers: REPLICAS },
  { label: 'ORACLE_0.8', policy: 'ORACLE', lambda: 0.8, routers: 0 },
];

/** One pass: its samples (send order) and the requests engines refused for a model they do not serve. */
interface Run {
  readonly samples: readonly Sample[];
  readonly refused: number;
}

/** A run the client could not finish: an engine refused a request (the client wants 200s), or another failure. */
class FailedRun extends Error {
  constructor(
    readonly config: PolicyRun,
    readonly refused: number,
    cause: unknown,
  ) {
    super(`${config.label} routers=${config.routers}: ${refused} requests refused for their model; ${cause instanceof Error ? cause.message : String(cause)}`);
  }
}

const round = (x: number, digits = 4): number => Number(x.toFixed(digits));

function emit(obj: Record<string, unknown>): void {
  process.stdout.write(JSON.stringify({ bench: 'cluster_identity', ...obj }) + '\n');
}

function loadTokenizers(): ModelTokenizers {
  return ModelTokenizers.load({
    models: [
      { model: QWEN, tokenizer: bundledQwen3TokenizerDir(), chatTemplate: '' },
      { model: LLAMA, tokenizer: bundledLlama31TokenizerDir(), chatTemplate: '' },
    ],
    modelsFile: '(identity bench)',
    defaultDir: '',
    defaultTemplate: '',
    // The machine's two cores are the engines', the routers' and the client's: chats on the caller's thread.
    renderThreads: 0,
  });
}

/** The engines of FLEET, each group sized on its base model's working set over that model's engines. */
async function startFleet(stack: ClusterStack, w: IdentityWorkload, tokenizers: ModelTokenizers): Promise<ClusterEngine[]> {
  const enginesOf = (base: string): number => FLEET.filter((g) => g.servedModels[0] === base).reduce((n, g) => n + g.engines, 0);
  const engines: ClusterEngine[] = [];
  try {
    for (const g of FLEET) {
      const base = g.servedModels[0]!;
      const perEngine = w.workingSetBlocks.get(base)! / enginesOf(base);
      const shape = {
        blockSize: BLOCK_SIZE,
        deviceCapacityBlocks: Math.max(1, Math.round(perEngine * DEVICE_SHARE)),
        hostCapacityBlocks: Math.round(perEngine * HOST_SHARE),
        prefill: PREFILL,
        heartbeatIntervalMs: HEARTBEAT_MS,
        servedModels: g.servedModels,
        tokenizer: tokenizers.forModel(base, null)!,
      };
      console.error(`[identity] ${g.engines} engines serving ${g.servedModels.join(', ')}: Device ${shape.deviceCapacityBlocks} + Host ${shape.hostCapacityBlocks} blocks each`);
      engines.push(...(await stack.startEngines(g.engines, shape)));
    }
  } catch (e) {
    for (const e2 of engines) await e2.close();
    throw e;
  }
  return engines;
}

let loadClient: LoadClient | null = null;

/** One run of `w` under `p`: fresh routers (none for the ORACLE), empty caches, settled views, then every session. */
async function runOnce(stack: ClusterStack, engines: readonly ClusterEngine[], tokenizers: ModelTokenizers, w: IdentityWorkload, p: PolicyRun): Promise<Run> {
  const routers: RouterService[] = [];
  try {
    for (let i = 0; i < Math.max(1, p.routers); i++) routers.push(await stack.startRouter(p.policy === 'ORACLE' ? 'RR' : p.policy, p.lambda, true, true, tokenizers));
    for (const e of engines) await e.reset();
    for (const r of routers) await untilSettled(r, engines);
    let target: ClientTarget = { kind: 'routers', urls: routers.map((r) => `http://127.0.0.1:${r.port}`) };
    let oracle: OracleChooser | null = null;
    if (p.policy === 'ORACLE') {
      const omniscient = new OmniscientRouter(engines, p.lambda);
      target = { kind: 'oracle' };
      oracle = (si, k) => omniscient.choose(w.sessions[si]![k]!.tokenIds, IDENTITIES[w.identityOf[si]!]!);
    }
    const refusedBefore = engines.reduce((n, e) => n + e.endpoint.modelNotFound, 0);
    loadClient ??= await LoadClient.start();
    let samples: Sample[] = [];
    let error: unknown = null;
    try {
      samples = (await loadClient.drive(w.sessions, target, null, oracle)).samples;
    } catch (e) {
      error = e;
    }
    const refused = engines.reduce((n, e) => n + e.endpoint.modelNotFound, 0) - refusedBefore;
    // A refused request fails the client's run (it wants 200s): say how many, then stop.
    if (error !== null) throw new FailedRun(p, refused, error);
    return { samples, refused };
  } finally {
    for (const r of routers) await r.close();
  }
}

interface IdentityResult {
  identity: string;
  model: string;
  salted: boolean;
  policy: string;
  routers: number;
  requests: number;
  hit_ratio: number;
  device_hit_ratio: number;
  host_hit_ratio: number;
  hit_ratio_reps: number[];
  engines_used: number;
  wrong_model_requests: number;
}

/** Per identity of the workload, over the runs' measured samples (each run drops its own warm-up). */
function summarize(w: IdentityWorkload, p: PolicyRun, runs: readonly Run[], servesOf: ReadonlyMap<string, ReadonlySet<string>>): IdentityResult[] {
  const measured = runs.map((r) => r.samples.slice(Math.floor(r.samples.length * WARMUP_FRACTION)));
  return IDENTITIES.map((identity, k) => {
    const mine = (s: Sample): boolean => w.identityOf[s.session] === k;
    const wrongEngine = (s: Sample): boolean => !(servesOf.get(s.instance)?.has(identity.model) ?? false);
    let prompt = 0;
    let cached = 0;
    let device = 0;
    let host = 0;
    let requests = 0;
    let wrong = 0;
    const used = new Set<string>();
    const perRep: number[] = [];
    for (const m of measured) {
      let repPrompt = 0;
      let repCached = 0;
      for (const s of m) {
        if (!mine(s)) continue;
        requests++;
        repPrompt += s.promptTokens;
        repCached += s.cachedTokens;
        device += s.deviceHitTokens;
        host += s.hostHitTokens;
        used.add(s.instance);
        if (wrongEngine(s)) wrong++;
      }
      prompt += repPrompt;
      cached += repCached;
      perRep.push(round(repCached / repPrompt));
    }
    // Warm-up requests count for the wrong-model rule too: none may land on the wrong engine.
    for (const r of runs) for (const s of r.samples.slice(0, Math.floor(r.samples.length * WARMUP_FRACTION))) if (mine(s) && wrongEngine(s)) wrong++;
    return {
      identity: identity.label,
      model: identity.model,
      salted: identity.cacheSalt !== null,
      policy: p.label,
      routers: p.routers,
      requests,
      hit_ratio: round(cached / prompt),
      device_hit_ratio: round(device / prompt),
      host_hit_ratio: round(host / prompt),
      hit_ratio_reps: perRep,
      engines_used: used.size,
      wrong_model_requests: wrong,
    };
  });
}

async function main(): Promise<void> {
  const t0 = performance.now();
  const tokenizers = loadTokenizers();
  const w = await buildIdentityWorkload(SEED, BLOCK_SIZE, SHAPE, (m) => tokenizers.forModel(m, null)!);
  console.error(`[identity] ${w.sessions.length} sessions, ${w.requests} requests, ${w.promptTokens} prompt tokens; working set ${[...w.workingSetBlocks].map(([m, n]) => `${m} ${n}`).join(', ')} blocks`);
  const stack = await ClusterStack.start(BLOCK_SIZE);
  for (const sig of ['SIGINT', 'SIGTERM'] as const) process.once(sig, () => void stack.close().finally(() => process.exit(130)));
  const runs = new Map<PolicyRun, Run[]>(CONFIGS.map((c) => [c, []]));
  let engines: ClusterEngine[] = [];
  try {
    engines = await startFleet(stack, w, tokenizers);
    const servesOf = new Map(engines.map((e) => [e.name, new Set(e.endpoint.models.list().map((m) => m.name))]));
    // Warm-up, dropped: an RR pass over a quarter of the sessions (JIT, the directory's first-use paths).
    const quarter = Math.ceil(w.sessions.length / 4);
    await runOnce(stack, engines, tokenizers, { ...w, sessions: w.sessions.slice(0, quarter), identityOf: w.identityOf.slice(0, quarter) }, CONFIGS[0]!);
    for (let rep = 0; rep < REPS; rep++) {
      for (const c of CONFIGS) {
        if (rep > 0 && c.policy !== 'CAR' && c.policy !== 'ORACLE') continue;
        const run = await runOnce(stack, engines, tokenizers, w, c);
        runs.get(c)!.push(run);
        const line = summarize(w, c, [run], servesOf)
          .map((r) => `${r.identity} ${r.hit_ratio}`)
          .join(', ');
        console.error(`[identity] ${c.label} routers=${c.routers} rep ${rep + 1}: hit ${line}; refused ${run.refused}`);
      }
    }
    report(w, runs, servesOf);
  } catch (e) {
    if (e instanceof FailedRun) {
      emit({ kind: 'cluster_target', target: 'requests on an engine not serving their model == 0', policy: e.config.label, routers: e.config.routers, value: e.refused, met: false, error: e.message, quick: QUICK });
    }
    throw e;
  } finally {
    for (const e of engines) await e.close();
    await loadClient?.close();
    await tokenizers.close();
    await stack.close();
  }
  console.error(`[identity] done in ${round((performance.now() - t0) / 1000, 1)} s`);
}

function report(w: IdentityWorkload, runs: ReadonlyMap<PolicyRun, Run[]>, servesOf: ReadonlyMap<string, ReadonlySet<string>>): void {
  const results = new Map<PolicyRun, IdentityResult[]>();
  for (const [c, rs] of runs) results.set(c, summarize(w, c, rs, servesOf));
  // CAR and ORACLE against the ORACLE of their λ; RR and SLO_AWARE against CAR's default λ's.
  const oracleOf = (c: PolicyRun): PolicyRun => CONFIGS.find((o) => o.policy === 'ORACLE' && o.lambda === (c.policy === 'CAR' || c.policy === 'ORACLE' ? c.lambda : 0.5))!;
  for (const [c, rs] of results) {
    const oracle = results.get(oracleOf(c))!;
    for (const r of rs) {
      const o = oracle.find((x) => x.identity === r.identity)!;
      emit({ kind: 'cluster_identity', ...r, reps: runs.get(c)!.length, oracle: oracleOf(c).label, oracle_hit_ratio: o.hit_ratio, hit_vs_oracle: round(r.hit_ratio / o.hit_ratio, 3), quick: QUICK });
    }
  }
  for (const [c, rs] of results) {
    if (c.policy === 'CAR') {
      const oracle = results.get(oracleOf(c))!;
      for (const r of rs) {
        const o = oracle.find((x) => x.identity === r.identity)!;
        const value = r.hit_ratio / o.hit_ratio;
        // Judged on the pooled repetitions; per_rep: the paired per-repetition ratio's mean and 95% interval.
        const perRep = confidence(ratios(o.hit_ratio_reps, r.hit_ratio_reps), 3);
        emit({ kind: 'cluster_target', target: `hit_ratio >= ${HIT_TARGET} * ORACLE per identity`, identity: r.identity, policy: c.label, routers: c.routers, oracle: oracleOf(c).label, value: round(value, 3), met: value >= HIT_TARGET, per_rep: perRep, quick: QUICK });
      }
    }
    const wrong = rs.reduce((n, r) => n + r.wrong_model_requests, 0) + runs.get(c)!.reduce((n, r) => n + r.refused, 0);
    emit({ kind: 'cluster_target', target: 'requests on an engine not serving their model == 0', policy: c.label, routers: c.routers, value: wrong, met: wrong === 0, quick: QUICK });
  }
}

main().then(
  () => process.exit(0),
  (e: unknown) => {
    console.error(e instanceof Error ? (e.stack ?? e.message) : String(e));
    process.exit(1);
  },
);
