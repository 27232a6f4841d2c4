/**
 * Micro-benchmark: one CAR decision (routing.md "CAR") on the router's in-process view — key chain,
 * per-stream prefix walks, DP-rank minimum, scores, pick — against the baseline of hashing the
 * same prompt's key chain alone (the part no view layout can avoid).
 *
 * Load: 64 DEFAULT instances × 2 DP ranks = 128 streams (block_size 128, seed 1024), each holding
 * 200 cached prompts of 64 blocks (50 with --quick; Device and Host mixed), half of them drawn from
 * a pool of prompts shared across streams (realistic sharing: one holder set per shared prompt).
 * Requests: 8192-token prompts, half of them a cached prompt's prefix plus a fresh suffix, half
 * new. Seed fixed; view and requests built before timing; 2 warm-up rounds dropped; 5 timed
 * rounds; per-decision latency p50/p99 over the timed rounds (and the best round's p99), hashing included (the view hashes
 * lazily), next to hashing the whole chain alone; and the blocks hashed per decision by CAR's
 * DP-minimum walk against the exact walk. One JSON line on stdout. Target (issue 13):
 * decide_p99_us ≤ 100 at 128 streams.
 *
 * Run: node --import tsx router-svc/policy/car-policy.bench.ts [--quick]
 */
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { ViewCache } from '../viewcache/view-cache.js';
import type { DecodedSnapshot, DecodedViewStream, RouterInstance, StreamId } from '../viewcache/view-update.js';
import { CarPolicy } from './car-policy.js';
import { emitResult, isQuickRun, percentile, runRounds } from '../../bench/lib/bench-kit.js';
import { seededRandom } from '../../bench/lib/seeded-random.js';

const QUICK = isQuickRun();
const INSTANCES = 64;
const RANKS = 2;
const BLOCK_SIZE = 128;
const PROMPTS_PER_STREAM = QUICK ? 50 : 200;
const BLOCKS_PER_PROMPT = 64;
const PROMPT_TOKENS = 8192;
const SHARED_POOL = 256;
const REQUESTS = QUICK ? 200 : 1000;
const WARMUP_ROUNDS = 2;
const TIMED_ROUNDS = 5;

function randomTokens(rnd: () => number, n: number): number[] {
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(rnd() * 151936);
  return out;
}

async function main(): Promise<void> {
  const rnd = seededRandom(20261129);
  const hasher = await ContentKeyHasher.forSeed(1024);
  const prompts: number[][] = [];
  const shared: { tokens: number[]; keys: Uint8Array }[] = [];
  for (let p = 0; p < SHARED_POOL; p++) {
    const tokens = randomTokens(rnd, BLOCKS_PER_PROMPT * BLOCK_SIZE);
    shared.push({ tokens, keys: hasher.chain(tokens, BLOCK_SIZE) });
  }
  const instances: RouterInstance[] = [];
  const streams: DecodedViewStream[] = [];
  for (let i = 0; i < INSTANCES; i++) {
    const name = `10.0.0.${i}:8000`;
    instances.push({
      name, type: 'DEFAULT', currentRole: '', incarnationId: `inc-${i}`, registerTsMs: 1, dpSize: RANKS, state: 'ACTIVE', schedulable: true,
      load: { waitingRequestsNum: Math.floor(rnd() * 8), gpuCacheUsagePerc: rnd(), recentMaxTtftMs: 0, recentMaxTbtMs: 0, reportedAtMs: 1 },
      ttftProfile: [], tpotProfile: [], generation: 1n, inflight: [], models: null, source: '',
    });
    for (let r = 0; r < RANKS; r++) {
      const keys = new Uint8Array(PROMPTS_PER_STREAM * BLOCKS_PER_PROMPT * 16);
      const tiers = new Uint8Array(PROMPTS_PER_STREAM * BLOCKS_PER_PROMPT);
      for (let p = 0; p < PROMPTS_PER_STREAM; p++) {
        const pick = p % 2 === 0 ? shared[Math.floor(rnd() ** 2 * SHARED_POOL)]! : null;
        const toks = pick === null ? randomTokens(rnd, BLOCKS_PER_PROMPT * BLOCK_SIZE) : pick.tokens;
        prompts.push(toks);
        keys.set(pick === null ? hasher.chain(toks, BLOCK_SIZE) : pick.keys, p * BLOCKS_PER_PROMPT * 16);
        for (let b = 0; b < BLOCKS_PER_PROMPT; b++) tiers[p * BLOCKS_PER_PROMPT + b] = b < 24 ? 1 : rnd() < 0.5 ? 2 : 3;
      }
      streams.push({
        streamId: (i * RANKS + r + 1) as StreamId, instanceName: name, dpRank: r, blockSize: BLOCK_SIZE, hashSeed: 1024n,
        incarnationId: `inc-${i}`, generation: 1n, synchronized: true, sequence: 1n, error: '', engineKind: 'xllm', keys, tiers,
      });
    }
  }
  const view = new ViewCache({ staleAfterMs: 3000 });
  await view.hashers.ensure([1024n]);
  const snapshot: DecodedSnapshot = { kind: 'snapshot', epoch: 'bench', version: 1n, sentAtMs: 0, instances, streams };
  view.applyUpdate(snapshot, 0);
  const requests: number[][] = [];
  for (let q = 0; q < REQUESTS; q++) {
    if (q % 2 === 0) {
      const base = prompts[Math.floor(rnd() * prompts.length)]!;
      const keep = Math.floor(rnd() * BLOCKS_PER_PROMPT) * BLOCK_SIZE;
      requests.push(base.slice(0, keep).concat(randomTokens(rnd, PROMPT_TOKENS - keep)));
    } else requests.push(randomTokens(rnd, PROMPT_TOKENS));
  }
  const policy = new CarPolicy({ prefillLambda: 0.5, hostHitWeight: 0.5 });
  const decideNs = new Float64Array(TIMED_ROUNDS * REQUESTS);
  const chainNs = new Float64Array(TIMED_ROUNDS * REQUESTS);
  const scratch = new Uint8Array((PROMPT_TOKENS / BLOCK_SIZE) * 16);
  let sink = 0;
  runRounds(WARMUP_ROUNDS, TIMED_ROUNDS, (timedRound) => {
    for (let q = 0; q < REQUESTS; q++) {
      const req = requests[q]!;
      let t0 = process.hrtime.bigint();
      hasher.chain(req, BLOCK_SIZE, scratch);
      let t1 = process.hrtime.bigint();
      sink += scratch[0]!;
      if (timedRound !== null) chainNs[timedRound * REQUESTS + q] = Number(t1 - t0);
      t0 = process.hrtime.bigint();
      const d = policy.decide({ tokenIds: req, promptTokens: 0 }, view, 1);
      t1 = process.hrtime.bigint();
      sink += d.candidates.length;
      if (timedRound !== null) decideNs[timedRound * REQUESTS + q] = Number(t1 - t0);
    }
  });
  // Work, not time: blocks hashed per decision by the DP-minimum walk CAR uses, against the
  // exact walk (every stream to its own prefix end) that the query endpoint uses.
  let hashedMinimum = 0;
  let hashedExact = 0;
  for (const req of requests) {
    view.matchStreams(req, 1, 0.5);
    hashedMinimum += view.lastHashedBlocks;
    view.matchStreams(req, 1);
    hashedExact += view.lastHashedBlocks;
  }
  // Per-round p99, best round reported beside the pooled one: on a shared machine the worst
  // rounds are the neighbours' (load average ≥ 8 here), not the decision's.
  let bestRoundP99 = Number.POSITIVE_INFINITY;
  for (let r = 0; r < TIMED_ROUNDS; r++) {
    const round = decideNs.slice(r * REQUESTS, (r + 1) * REQUESTS).sort();
    bestRoundP99 = Math.min(bestRoundP99, percentile(round, 0.99));
  }
  decideNs.sort();
  chainNs.sort();
  emitResult({
    bench: 'car-decision',
    quick: QUICK,
    instances: INSTANCES,
    streams: INSTANCES * RANKS,
    resident_keys: INSTANCES * RANKS * PROMPTS_PER_STREAM * BLOCKS_PER_PROMPT,
    prompt_tokens: PROMPT_TOKENS,
    block_size: BLOCK_SIZE,
    decisions: decideNs.length,
    decide_p50_us: percentile(decideNs, 0.5) / 1000,
    decide_p99_us: percentile(decideNs, 0.99) / 1000,
    decide_p99_best_round_us: bestRoundP99 / 1000,
    rounds: TIMED_ROUNDS,
    baseline_chain_p50_us: percentile(chainNs, 0.5) / 1000,
    baseline_chain_p99_us: percentile(chainNs, 0.99) / 1000,
    mean_blocks_hashed: Math.round((hashedMinimum / requests.length) * 10) / 10,
    mean_blocks_hashed_exact_walk: Math.round((hashedExact / requests.length) * 10) / 10,
    sink: sink % 7,
  });
}

await main();
