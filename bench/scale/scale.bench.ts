/**
 * Scale benchmark: one directory process holding 128 streams × 262,144 blocks (kv-events §9
 * defaults max_streams and max_blocks_per_stream, both at their limit), fed over real ZeroMQ.
 *
 * What is measured (one JSON line per result on stdout), in this order:
 *  1. `ingest_baseline` (baseline): blocks/s of bare zeromq SUBs (one per stream, `await
 *     receive()`) plus @msgpack/msgpack decode (useBigInt64) of the very messages of the first
 *     quarter of the fill: no checks, no indexing. The publishers then forget it all (seq 0,
 *     empty state) before the directory side connects.
 *  2. `ingest` per quarter and overall: blocks/s applied by 128 real StreamSubscribers (one
 *     event loop, as in directory-svc: §2 framing, §3 decode, §7.1 seq rule, §5 apply with one
 *     XXH3-128 per block) while every stream fills live from empty to full, in four steps.
 *  3. `memory` after each quarter: heap + arrayBuffers (process.memoryUsage after global.gc,
 *     relative to the synchronized empty subscribers) per indexed block, the marginal bytes per
 *     block of that quarter, the indexes' own typed-array estimate (approxBytes) and RSS;
 *     `memory_linearity` sums it up (max / min of the four bytes-per-block points).
 *  3b. `router_view_memory`: a router's view cache of the same full view (the shared group index
 *     only), built in-process from the streams' residency, per block and the RSS it adds.
 *  3c. `snapshot_build`: a router joins the full view (scale-snapshot.ts): the directory's
 *     event-loop delay (max, p99) while the view snapshot is built and sent, the messages and
 *     their largest size, and the router's longest synchronous step applying them.
 *  4. `snapshot_fetch_baseline` (baseline): one full rank's §6 reply fetched by a bare DEALER
 *     and decoded with @msgpack/msgpack: the transfer and decode alone.
 *  5. `recovery_one_stream`: a publisher rank restarts keeping its cache (seq back to 0, one
 *     empty batch, §7.1 seq_reset); time from the stream leaving SYNCHRONIZED to SYNCHRONIZED
 *     again with the full index rebuilt from the snapshot (§7.2), and from the restart order.
 *  6. `recovery_all_streams`: every rank restarts at once; time until all are SYNCHRONIZED, with
 *     the count of exchanges that hit replay_timeout_ms and were retried (§7.4). The
 *     subscribers share one RecoveryAdmission of `max_concurrent_recoveries` slots (default 8
 *     as in directory-svc; 0 = no cap, every stream requests its snapshot at once).
 *  7. `prefix_match_latency` p50/p99 of StreamQuery over all full streams for 1k/8k/32k-token
 *     prompts, next to the baseline `key_chain_latency` (§4 key chain alone, same prompts).
 *
 * Load (scale-load.ts): per rank, 32k-token prompts (256 blocks × 128 tokens) stored in 64-block
 * map-form BlockStored batches; documents shared by 1–4 rank classes; token ids < 151,643;
 * uint64 engine hashes. Generated from a fixed seed in forked publisher processes (4 owning 32
 * ranks each; 2 with --quick) that hold two numbers per rank, never the blocks. Flow control
 * (scale-publisher.ts) keeps at most a small window of batches, and one snapshot reply per
 * publisher process, in flight, so the memory measured is the index's, not queued messages.
 * All query prompts are built before timing; warm-up rounds and batches are dropped. Each
 * phase checks its outcome (every stream SYNCHRONIZED with every block) or the run fails.
 * replay_timeout_ms is set to its §9 maximum (60000): one full rank's reply is ~180 MB.
 *
 * Run: node --expose-gc --max-old-space-size=16384 --import tsx bench/scale/scale.bench.ts
 *      [--quick] [--streams=N] [--blocks=B] [--max_concurrent_recoveries=C]
 * Full: 128 × 262,144 (~33.5M blocks): ~14 min on a shared 2-core host, a third of it the
 * all-stream recovery; 1.4 GiB RSS once filled, 1.9 GiB peak while all streams recover (measured
 * 2026-12-01 with the group key ids, bench/results/scale-full-issue13.jsonl). --quick: 16 ×
 * 16,384, ~15 s.
 */
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Decoder } from '@msgpack/msgpack';
import * as zmq from 'zeromq';
import { DEFAULT_MAX_CONCURRENT_RECOVERIES } from '../../shared/config/kv-events-config.js';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { RecoveryAdmission } from '../../directory-svc/recovery/recovery-admission.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { StreamObservers } from '../../directory-svc/subscription/stream-observer.js';
import { ViewCache } from '../../router-svc/viewcache/view-cache.js';
import type { DecodedViewStream, RouterInstance, StreamId } from '../../router-svc/viewcache/view-update.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';
import type { StreamState } from '../../directory-svc/subscription/stream-state.js';
import { emitResult, hasExposedGc, isQuickRun, median, percentile, retainedBytes } from '../lib/bench-kit.js';
import { ForkedPublisher } from '../lib/forked-publisher.js';
import { seededRandom } from '../lib/seeded-random.js';
import type { ServedResidency } from '../../directory-svc/index/served-residency.js';
import { ViewTap, measureSnapshotBuild } from './scale-snapshot.js';
import { SCALE_MAX_MESSAGE_BYTES, batchesPerRank, buildPrompt, documentCount, scaleShape } from './scale-load.js';

const QUICK = isQuickRun();
function numArg(name: string, fallback: number): number {
  const hit = process.argv.find((a) => a.startsWith(`--${name}=`));
  return hit === undefined ? fallback : Number(hit.slice(name.length + 3));
}
const STREAMS = numArg('streams', QUICK ? 16 : 128);
const BLOCKS = numArg('blocks', QUICK ? 16_384 : 262_144);
const PUBLISHERS = Math.min(STREAMS, QUICK ? 2 : 4);
/** Directory-wide snapshot exchanges at once; 0 runs the subscribers without admission. */
const MAX_CONCURRENT_RECOVERIES = numArg('max_concurrent_recoveries', DEFAULT_MAX_CONCURRENT_RECOVERIES);
const SHAPE = scaleShape(BLOCKS);
const BATCHES = batchesPerRank(SHAPE);
const SEED = 0x5ca1e;
const TOPIC = 'xllm-kv';
/** Batches of one publisher process in flight (sent, not yet applied); ~43 KB each. */
const WINDOW = 8 * Math.ceil(STREAMS / PUBLISHERS);
/** Credit is returned to a publisher in steps of this many applied batches. */
const CREDIT_STEP = 16;
const RECOVERY_RUNS = QUICK ? 5 : 3;
const QUERIES = QUICK ? 100 : 300;
const QUERY_WARMUP = QUICK ? 10 : 30;
const PROMPT_TOKENS = [1024, 8192, 32768];
/** A phase that cannot finish in this long fails the run instead of hanging it. */
const PHASE_TIMEOUT_MS = QUICK ? 120_000 : 1_200_000;

const LIMITS: StreamLimits = {
  maxBlocksPerStream: Math.max(262_144, BLOCKS),
  maxMessageBytes: SCALE_MAX_MESSAGE_BYTES,
  maxBufferedBytes: 16 * 1024 * 1024,
  replayTimeoutMs: 60_000,
  resyncIntervalMs: 0,
};

const publisherFile = join(dirname(fileURLToPath(import.meta.url)), 'scale-publisher.ts');

interface ReadyMessage {
  type: 'ready';
  ranks: { endpoint: string; replayEndpoint: string }[];
}

/** One forked publisher process, its ranks [firstRank, firstRank + ranks), and its credit. */
class PublisherProcess extends ForkedPublisher {
  /** Applied batches not yet returned as credit. */
  private owed = 0;

  constructor(
    readonly firstRank: number,
    readonly ranks: number,
  ) {
    super(publisherFile, [`--first-rank=${firstRank}`, `--ranks=${ranks}`, `--blocks=${BLOCKS}`, `--seed=${SEED}`, `--topic=${TOPIC}`, `--window=${WINDOW}`]);
  }

  /** One batch of this process was handled by the directory side (hot: once per batch). */
  applied(): void {
    if (++this.owed >= CREDIT_STEP) {
      this.send({ type: 'credit', n: this.owed });
      this.owed = 0;
    }
  }

  resetCredit(): void {
    this.owed = 0;
  }
}

// ---- helpers ------------------------------------------------------------------------------------

function emit(line: Record<string, unknown>): void {
  emitResult({ bench: 'scale', quick: QUICK, ...line });
}

function log(msg: string): void {
  process.stderr.write(`[scale] ${msg}\n`);
}

function withTimeout<T>(p: Promise<T>, what: string, ms = PHASE_TIMEOUT_MS): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not finished within ${ms} ms`)), ms);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

const round1 = (x: number): number => Math.round(x * 10) / 10;

/** Resolves when `count()` reaches `target`, re-checked by `poke()` (called from hot handlers). */
class Counter {
  value = 0;
  private target = Number.POSITIVE_INFINITY;
  private resolve: (() => void) | null = null;

  until(target: number): Promise<void> {
    if (this.value >= target) return Promise.resolve();
    this.target = target;
    return new Promise<void>((r) => (this.resolve = r));
  }

  add(): void {
    if (++this.value >= this.target && this.resolve !== null) {
      const r = this.resolve;
      this.resolve = null;
      this.target = Number.POSITIVE_INFINITY;
      r();
    }
  }
}

function publisherOf(pubs: PublisherProcess[], rank: number): PublisherProcess {
  return pubs.find((p) => rank >= p.firstRank && rank < p.firstRank + p.ranks)!;
}

// ---- phases -------------------------------------------------------------------------------------

/**
 * `router_view_memory`: what a router holds for the same full view (router-svc/viewcache: the
 * group residency index, no per-stream tables), built in this process from the streams' exported
 * residency as one snapshot, then released. heap + arrayBuffers after gc relative to before, per
 * indexed block, and the RSS it adds, next to this (directory) process's RSS.
 */
async function measureRouterView(subs: StreamSubscriber[], indexed: number): Promise<void> {
  const rssBefore = process.memoryUsage().rss;
  const before = retainedBytes();
  const view = new ViewCache({ staleAfterMs: 3_600_000 });
  await view.hashers.ensure([1024n]);
  const instances = new Map<string, RouterInstance>();
  const streams: DecodedViewStream[] = subs.map((sub, i) => {
    const name = sub.config.instanceName;
    if (!instances.has(name)) {
      instances.set(name, {
        name, type: 'DEFAULT', currentRole: '', incarnationId: `inc-${name}`, registerTsMs: 1, dpSize: 4, state: 'ACTIVE', schedulable: true,
        load: { waitingRequestsNum: 0, gpuCacheUsagePerc: 0, recentMaxTtftMs: 0, recentMaxTbtMs: 0, reportedAtMs: 1 },
        ttftProfile: [], tpotProfile: [], generation: 1n, inflight: [], models: null, source: '',
      });
    }
    const { keys, tiers } = (sub.index as NonNullable<typeof sub.index>).exportResidency();
    return {
      streamId: (i + 1) as StreamId, instanceName: name, dpRank: sub.config.dpRank, blockSize: SHAPE.blockSize, hashSeed: 1024n,
      incarnationId: `inc-${name}`, generation: 1n, synchronized: true, sequence: 1n, error: '', engineKind: 'xllm', keys, tiers,
    };
  });
  const t0 = performance.now();
  view.applyUpdate({ kind: 'snapshot', epoch: 'scale', version: 1n, sentAtMs: 0, instances: [...instances.values()], streams }, 0);
  const applyMs = performance.now() - t0;
  streams.length = 0;
  const bytes = retainedBytes() - before;
  const rss = process.memoryUsage().rss;
  emit({
    metric: 'router_view_memory',
    streams: subs.length,
    indexed_blocks: indexed,
    heap_plus_array_buffers_bytes: bytes,
    bytes_per_block: round1(bytes / indexed),
    rss_added_mib: Math.round((rss - rssBefore) / 2 ** 20),
    process_rss_mib: Math.round(rss / 2 ** 20),
    snapshot_apply_ms: Math.round(applyMs),
  });
  // The view must hold every stream (and stays alive until measured, released on return).
  if (view.streams().length !== subs.length) throw new Error(`router view holds ${view.streams().length} of ${subs.length} streams`);
}

async function runIngestBaseline(pubs: PublisherProcess[], endpoints: string[], batches: number): Promise<number> {
  const socks: zmq.Subscriber[] = [];
  const counter = new Counter();
  const total = batches * STREAMS;
  const warmup = Math.ceil(total / 20);
  let decodedEvents = 0;
  const loops: Promise<void>[] = [];
  for (let s = 0; s < STREAMS; s++) {
    const sock = new zmq.Subscriber({ linger: 0 });
    sock.subscribe(Buffer.from(TOPIC, 'utf8'));
    sock.connect(endpoints[s]);
    socks.push(sock);
    const decoder = new Decoder({ useBigInt64: true });
    const pub = publisherOf(pubs, s);
    loops.push(
      (async () => {
        for (let n = 0; n < batches; n++) {
          const frames = await sock.receive();
          const batch = decoder.decode(frames[2]) as unknown[];
          decodedEvents += (batch[1] as unknown[]).length;
          pub.applied();
          counter.add();
        }
      })(),
    );
  }
  for (const p of pubs) p.send({ type: 'waitSubscribed' });
  await withTimeout(Promise.all(pubs.map((p) => p.next('subscribed'))), 'baseline subscribed');
  for (const p of pubs) p.send({ type: 'fill', upTo: batches });
  await withTimeout(counter.until(warmup), 'baseline warm-up');
  const t0 = performance.now();
  await withTimeout(counter.until(total), 'baseline ingest');
  const seconds = (performance.now() - t0) / 1000;
  await Promise.all(loops);
  for (const s of socks) s.close();
  if (decodedEvents !== total) throw new Error(`baseline decoded ${decodedEvents} of ${total} batches`);
  const rate = ((total - warmup) * SHAPE.blocksPerBatch) / seconds;
  emit({ metric: 'ingest_baseline', baseline: true, streams: STREAMS, blocks: total * SHAPE.blocksPerBatch, seconds: round1(seconds), blocks_per_s: Math.round(rate) });
  for (const p of pubs) {
    p.send({ type: 'forget' });
    p.resetCredit();
  }
  return rate;
}

async function fetchSnapshotRaw(endpoint: string): Promise<{ ms: number; blocks: number; chunks: number }> {
  const dealer = new zmq.Dealer({ linger: 0 });
  const decoder = new Decoder({ useBigInt64: true });
  const t0 = process.hrtime.bigint();
  dealer.connect(endpoint);
  await dealer.send([new Uint8Array(0), new Uint8Array(8)]);
  let blocks = 0;
  let chunks = 0;
  for (;;) {
    const frames = await dealer.receive();
    if (frames[2].length === 0) break;
    const chunk = decoder.decode(frames[2]) as { blocks: unknown[] };
    blocks += chunk.blocks.length;
    chunks++;
  }
  const ms = Number(process.hrtime.bigint() - t0) / 1e6;
  dealer.close();
  return { ms, blocks, chunks };
}

async function main(): Promise<void> {
  if (!hasExposedGc()) throw new Error('run node with --expose-gc (memory per block is measured after gc)');
  log(`${STREAMS} streams × ${BLOCKS} blocks (${BATCHES} batches of ${SHAPE.blocksPerBatch} per stream), ${PUBLISHERS} publisher processes`);
  emit({
    metric: 'config',
    streams: STREAMS,
    blocks_per_stream: BLOCKS,
    total_blocks: STREAMS * BLOCKS,
    block_size: SHAPE.blockSize,
    blocks_per_batch: SHAPE.blocksPerBatch,
    publishers: PUBLISHERS,
    max_blocks_per_stream: LIMITS.maxBlocksPerStream,
    replay_timeout_ms: LIMITS.replayTimeoutMs,
    max_concurrent_recoveries: MAX_CONCURRENT_RECOVERIES,
  });

  const pubs: PublisherProcess[] = [];
  const perPub = Math.ceil(STREAMS / PUBLISHERS);
  for (let first = 0; first < STREAMS; first += perPub) pubs.push(new PublisherProcess(first, Math.min(perPub, STREAMS - first)));
  const subs: StreamSubscriber[] = [];
  const samplers: NodeJS.Timeout[] = [];
  try {
    const endpoints: { endpoint: string; replayEndpoint: string }[] = [];
    for (const p of pubs) endpoints.push(...(await withTimeout(p.next<ReadyMessage>('ready'), 'publisher ready')).ranks);

    // 1. Baseline: bare receive + decode of the first quarter's messages.
    const baselineRate = await runIngestBaseline(pubs, endpoints.map((e) => e.endpoint), BATCHES / 4);

    // 2. The directory side: one real StreamSubscriber per rank.
    const applied = new Counter();
    const syncedAt = new Map<StreamSubscriber, number>();
    const leftAt = new Map<StreamSubscriber, number>();
    let stateWaiter: (() => void) | null = null;
    const recoveryAdmission = MAX_CONCURRENT_RECOVERIES > 0 ? new RecoveryAdmission(MAX_CONCURRENT_RECOVERIES) : undefined;
    // As in directory-svc: one shared residency group index for every stream (the query view).
    const residencyGroups = new ResidencyGroups();
    const viewTaps: ViewTap[] = [];
    for (let s = 0; s < STREAMS; s++) {
      const sub = await StreamSubscriber.create(
        {
          instanceName: `engine-${String(s >> 2).padStart(3, '0')}`,
          dpRank: s % 4,
          blockSize: SHAPE.blockSize,
          endpoint: endpoints[s].endpoint,
          replayEndpoint: endpoints[s].replayEndpoint,
          topic: TOPIC,
          hashSeed: 1024n,
        },
        LIMITS,
        { recoveryAdmission, residencyGroups },
      );
      const pub = publisherOf(pubs, s);
      // `observe` tells the current state (CONNECTING) first: not a move, so not timed.
      let told = false;
      const tap = new ViewTap();
      viewTaps.push(tap);
      sub.observe(new StreamObservers([{
        batchApplied: () => {
          pub.applied();
          applied.add();
        },
        stateChanged: (state: StreamState) => {
          if (!told) {
            told = true;
            return;
          }
          const now = performance.now();
          if (state === 'SYNCHRONIZED') syncedAt.set(sub, now);
          else if (!leftAt.has(sub)) leftAt.set(sub, now);
          // The publisher serves its next queued snapshot once this one has ended either way.
          if (state === 'SYNCHRONIZED' || state === 'UNSYNCHRONIZED') pub.send({ type: 'release', rank: s });
          stateWaiter?.();
        },
      }, tap]));
      subs.push(sub);
    }
    const allSynced = (): boolean => subs.every((x) => x.state === 'SYNCHRONIZED');
    const untilAllSynced = (what: string): Promise<void> =>
      withTimeout(
        new Promise<void>((resolve) => {
          const check = (): void => {
            if (!allSynced()) return;
            stateWaiter = null;
            resolve();
          };
          stateWaiter = check;
          check();
        }),
        what,
      );
    for (const p of pubs) p.send({ type: 'waitSubscribed' });
    const subscribed = Promise.all(pubs.map((p) => p.next('subscribed')));
    for (const s of subs) s.start();
    await untilAllSynced('subscribers synchronized (empty)');
    await withTimeout(subscribed, 'subscribers attached');
    const empty = retainedBytes();

    // 3. Fill in four live steps, memory after each.
    const quarterRates: number[] = [];
    const memPoints: number[] = [];
    let timedBlocks = 0;
    let timedSeconds = 0;
    let prevBytes = empty;
    let prevBlocks = 0;
    for (let q = 1; q <= 4; q++) {
      const upTo = (BATCHES * q) / 4;
      const target = upTo * STREAMS;
      const quarterBatches = (BATCHES / 4) * STREAMS;
      // Warm-up dropped: the first 5% of the first quarter's batches are not timed.
      const warm = q === 1 ? Math.ceil(quarterBatches / 20) : 0;
      for (const p of pubs) p.send({ type: 'fill', upTo });
      if (warm > 0) await withTimeout(applied.until(warm), 'ingest warm-up');
      const cpu0 = process.cpuUsage();
      const t0 = performance.now();
      await withTimeout(applied.until(target), `ingest quarter ${q}`);
      const seconds = (performance.now() - t0) / 1000;
      const cpu = process.cpuUsage(cpu0);
      const blocks = (quarterBatches - warm) * SHAPE.blocksPerBatch;
      timedBlocks += blocks;
      timedSeconds += seconds;
      quarterRates.push(blocks / seconds);
      emit({
        metric: 'ingest',
        fraction: q / 4,
        streams: STREAMS,
        timed_blocks: blocks,
        seconds: round1(seconds),
        blocks_per_s: Math.round(blocks / seconds),
        blocks_per_cpu_s: Math.round(blocks / ((cpu.user + cpu.system) / 1e6)),
      });
      const bytes = retainedBytes();
      const indexed = subs.reduce((a, x) => a + (x.index?.deviceBlocks ?? 0), 0);
      // The streams' own arrays plus the group index they share (keys, holder sets).
      const approx = subs.reduce((a, x) => a + (x.index?.approxBytes() ?? 0), 0) + residencyGroups.all.reduce((a, g) => a + g.approxBytes(), 0);
      const perBlock = (bytes - empty) / indexed;
      memPoints.push(perBlock);
      emit({
        metric: 'memory',
        fraction: q / 4,
        indexed_blocks: indexed,
        heap_plus_array_buffers_bytes: bytes - empty,
        bytes_per_block: round1(perBlock),
        marginal_bytes_per_block: round1((bytes - prevBytes) / (indexed - prevBlocks)),
        approx_bytes_per_block: round1(approx / indexed),
        rss_mib: Math.round(process.memoryUsage().rss / 2 ** 20),
      });
      prevBytes = bytes;
      prevBlocks = indexed;
    }
    for (const s of subs) {
      const ix = s.index;
      if (s.state !== 'SYNCHRONIZED' || s.sequence !== BigInt(BATCHES - 1) || ix === null || ix.deviceBlocks !== BLOCKS || ix.entryCount !== BLOCKS) {
        throw new Error(`${s.config.instanceName}/${s.config.dpRank}: ${s.state} at ${s.sequence} (${s.error}), ${ix?.deviceBlocks} blocks, ${ix?.entryCount} entries`);
      }
    }
    const fullRate = timedBlocks / timedSeconds;
    emit({
      metric: 'ingest',
      fraction: 'all',
      streams: STREAMS,
      timed_blocks: timedBlocks,
      seconds: round1(timedSeconds),
      blocks_per_s: Math.round(fullRate),
      baseline_blocks_per_s: Math.round(baselineRate),
      ratio_vs_baseline: Math.round((fullRate / baselineRate) * 1000) / 1000,
      last_quarter_over_first: Math.round((quarterRates[3] / quarterRates[0]) * 1000) / 1000,
    });
    await measureRouterView(subs, prevBlocks);
    // 3c. A router joins the full view: the directory's event loop while its snapshot is built and sent.
    emit(await measureSnapshotBuild(subs, viewTaps, (sub) => sub.toQueryable().residency as ServedResidency));
    const maxOverMin = Math.max(...memPoints) / Math.min(...memPoints);
    emit({
      metric: 'memory_linearity',
      bytes_per_block: memPoints.map(round1),
      max_over_min: Math.round(maxOverMin * 1000) / 1000,
      // Linear: the per-block cost at every quarter is within 25% of every other.
      linear: maxOverMin <= 1.25,
    });

    // 4. Baseline for recovery: one full rank's reply over a bare DEALER, decoded.
    const fetches: number[] = [];
    let fetched = { ms: 0, blocks: 0, chunks: 0 };
    for (let i = 0; i < RECOVERY_RUNS + 1; i++) {
      fetched = await withTimeout(fetchSnapshotRaw(endpoints[0].replayEndpoint), 'raw snapshot fetch');
      pubs[0].send({ type: 'release', rank: 0 });
      if (fetched.blocks !== BLOCKS) throw new Error(`raw snapshot fetch got ${fetched.blocks} of ${BLOCKS} blocks`);
      if (i > 0) fetches.push(fetched.ms);
    }
    emit({ metric: 'snapshot_fetch_baseline', baseline: true, blocks: fetched.blocks, chunks: fetched.chunks, median_ms: round1(median(fetches)), runs_ms: fetches.map(round1) });

    // 5. One stream restarts (seq reset, cache kept): snapshot recovery of one full stream.
    const recoveries: number[] = [];
    const fromOrder: number[] = [];
    for (let i = 0; i < RECOVERY_RUNS + 1; i++) {
      const rank = (i * 37 + 5) % STREAMS;
      const sub = subs[rank];
      leftAt.delete(sub);
      syncedAt.delete(sub);
      const t0 = performance.now();
      publisherOf(pubs, rank).send({ type: 'seqReset', ranks: [rank] });
      await withTimeout(
        new Promise<void>((resolve) => {
          const check = (): void => {
            if (!syncedAt.has(sub)) return;
            stateWaiter = null;
            resolve();
          };
          stateWaiter = check;
        }),
        'one-stream recovery',
      );
      const ix = sub.index;
      if (ix === null || ix.deviceBlocks !== BLOCKS || sub.sequence !== 0n) throw new Error(`recovered ${sub.config.instanceName}: ${ix?.deviceBlocks} blocks at ${sub.sequence}`);
      if (i === 0) continue;
      recoveries.push(syncedAt.get(sub)! - leftAt.get(sub)!);
      fromOrder.push(syncedAt.get(sub)! - t0);
    }
    emit({
      metric: 'recovery_one_stream',
      blocks: BLOCKS,
      median_ms: round1(median(recoveries)),
      blocks_per_s: Math.round(BLOCKS / (median(recoveries) / 1000)),
      over_raw_fetch: Math.round((median(recoveries) / median(fetches)) * 100) / 100,
      runs_ms: recoveries.map(round1),
      from_restart_ms: fromOrder.map(round1),
    });

    // 6. Every rank restarts at once.
    const timeoutsBefore = subs.reduce((a, x) => a + (x.counters.syncLost.timeout ?? 0), 0);
    const failedBefore = subs.reduce((a, x) => a + x.counters.recoveriesFailed, 0);
    leftAt.clear();
    syncedAt.clear();
    let peakRss = process.memoryUsage().rss;
    samplers.push(setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 250));
    const tAll = performance.now();
    for (const p of pubs) p.send({ type: 'seqReset', ranks: Array.from({ length: p.ranks }, (_, i) => p.firstRank + i) });
    // Wait until every stream has left SYNCHRONIZED once and is back.
    await withTimeout(
      new Promise<void>((resolve) => {
        stateWaiter = (): void => {
          if (syncedAt.size < STREAMS || !allSynced()) return;
          stateWaiter = null;
          resolve();
        };
      }),
      'all-stream recovery',
    );
    const allSeconds = (performance.now() - tAll) / 1000;
    clearInterval(samplers.pop());
    for (const s of subs) {
      const ix = s.index;
      if (ix === null || ix.deviceBlocks !== BLOCKS) throw new Error(`after all-stream recovery ${s.config.instanceName}/${s.config.dpRank}: ${ix?.deviceBlocks} blocks`);
    }
    const finish = [...syncedAt.values()].map((t) => t - tAll).sort((a, b) => a - b);
    emit({
      metric: 'recovery_all_streams',
      streams: STREAMS,
      blocks: STREAMS * BLOCKS,
      seconds: round1(allSeconds),
      blocks_per_s: Math.round((STREAMS * BLOCKS) / allSeconds),
      first_stream_ms: round1(finish[0]),
      median_stream_ms: round1(percentile(finish, 0.5)),
      timeouts: subs.reduce((a, x) => a + (x.counters.syncLost.timeout ?? 0), 0) - timeoutsBefore,
      recoveries_failed: subs.reduce((a, x) => a + x.counters.recoveriesFailed, 0) - failedBefore,
      peak_rss_mib: Math.round(peakRss / 2 ** 20),
      concurrent_replies: PUBLISHERS,
      max_concurrent_recoveries: MAX_CONCURRENT_RECOVERIES,
    });

    // 7. Queries over every full stream; the key chain alone is the baseline.
    const hasher = await ContentKeyHasher.forSeed(1024);
    const queryable = subs.map((s) => s.toQueryable());
    const query = new StreamQuery();
    const chainOut = new Uint8Array((32768 / SHAPE.blockSize) * 16);
    for (const tokens of PROMPT_TOKENS) {
      const r = seededRandom(SEED ^ tokens);
      const docs = documentCount(SHAPE);
      const prompts = Array.from({ length: QUERIES + QUERY_WARMUP }, (_, i) =>
        buildPrompt(SEED, SHAPE, Math.floor(r() * docs), tokens, 0.5 + 0.5 * r(), 10_000_000 + i),
      );
      const querySamples: number[] = [];
      const queryCpuSamples: number[] = [];
      const chainSamples: number[] = [];
      let hitStreams = 0;
      let hitBlocks = 0;
      for (let i = 0; i < prompts.length; i++) {
        const cpu0 = process.cpuUsage();
        const a = process.hrtime.bigint();
        const res = query.query(prompts[i], queryable);
        const b = process.hrtime.bigint();
        const cpu = process.cpuUsage(cpu0);
        hasher.chain(prompts[i], SHAPE.blockSize, chainOut);
        const c = process.hrtime.bigint();
        if (i < QUERY_WARMUP) continue;
        querySamples.push(Number(b - a));
        queryCpuSamples.push((cpu.user + cpu.system) * 1000);
        chainSamples.push(Number(c - b));
        for (const m of res.matches) {
          if (m.reusable_prefix_tokens > 0) hitStreams++;
          hitBlocks += m.reusable_prefix_tokens / SHAPE.blockSize;
        }
      }
      const q = Float64Array.from(querySamples).sort();
      const qc = Float64Array.from(queryCpuSamples).sort();
      const k = Float64Array.from(chainSamples).sort();
      const us = (ns: number): number => Math.round(ns / 10) / 100;
      emit({
        metric: 'prefix_match_latency',
        prompt_tokens: tokens,
        streams: STREAMS,
        blocks_per_stream: BLOCKS,
        n: QUERIES,
        p50_us: us(percentile(q, 0.5)),
        p99_us: us(percentile(q, 0.99)),
        // Process CPU time per query (no traffic runs meanwhile): steadier than wall time when
        // other processes take the cores; includes any GC the query triggers.
        cpu_p50_us: us(percentile(qc, 0.5)),
        cpu_p99_us: us(percentile(qc, 0.99)),
        mean_streams_hit: round1(hitStreams / QUERIES),
        mean_blocks_matched_per_stream: round1(hitBlocks / (QUERIES * STREAMS)),
      });
      emit({
        metric: 'key_chain_latency',
        baseline: true,
        prompt_tokens: tokens,
        n: QUERIES,
        p50_us: us(percentile(k, 0.5)),
        p99_us: us(percentile(k, 0.99)),
        query_over_chain_p50: Math.round((percentile(q, 0.5) / percentile(k, 0.5)) * 100) / 100,
      });
    }
    log(`done; heap ${Math.round(process.memoryUsage().heapUsed / 2 ** 20)} MiB`);
  } finally {
    for (const t of samplers) clearInterval(t);
    await Promise.all(subs.map((s) => s.close()));
    await Promise.all(pubs.map((p) => p.stop()));
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`[scale] failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
