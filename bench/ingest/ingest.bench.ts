/**
 * Ingest benchmark (kv-events §2, §3, §5, §7): how many blocks per second the directory decodes
 * and indexes from live ZeroMQ traffic, next to a baseline measured in the same run.
 *
 * What is measured, for 1 stream and for 16 streams (one JSON line each on stdout):
 *  - `blocks_per_s`: token-bearing blocks applied per second by real StreamSubscribers (one per
 *    stream, each SYNCHRONIZED before the clock starts), i.e. SUB receive → §2 framing checks →
 *    §3 decode → §7.1 seq rule → §5 apply (content-key XXH3-128 per block, record and key
 *    tables), all on this process's one event loop, as in directory-svc.
 *  - `baseline_blocks_per_s`: the very same messages through a bare zeromq SUB per stream
 *    (same receive loop shape, `await sub.receive()`) plus @msgpack/msgpack `decode` with
 *    useBigInt64: no checks, no indexing.
 *  - `ratio`: indexed / baseline blocks/s (the target: ≥ 0.5), the median over 5
 *    back-to-back pairs (1 with --quick) of each pair's ratio, since a pair shares the outside
 *    load of a busy machine; the rates are the medians of their runs, every run listed beside.
 *  - `blocks_per_cpu_s`, `baseline_blocks_per_cpu_s`, `cpu_ratio`: the same work per CPU second
 *    of this process (process.cpuUsage over the timed window, libzmq's receive I/O thread
 *    included, the publisher process excluded): the cost view, steady even when other
 *    processes take the cores and the wall-clock rates swing.
 *
 * Load (ingest-load.ts): array batches of one map-form BlockStored with 16 blocks × 128 token ids
 * (~8.7 KB payloads), chained into 64-block prompts; every 4th batch also carries a Host replica
 * notice, and every prompt's first batch evicts an old prompt from both tiers, so each index
 * stays at ≤ 10,320 entries (§9 default max_blocks_per_stream 262144). Only stored token-bearing
 * blocks (16 per batch) are counted; the removals and replica notices are extra work. Fixed seed.
 *
 * How: each phase forks a publisher process (ingest-publisher.ts) so encoding and sending never
 * share the measured event loop; its XPUBs are NODROP with a large SNDHWM, so a slow subscriber
 * slows the publisher down instead of losing batches. All payloads are encoded before the clock
 * starts. The clock runs from the moment the first `warm-up` batches per stream (10%) have
 * been handled to the last batch; the warm-up is dropped. Every phase is checked: each
 * subscriber must end SYNCHRONIZED at sequence messages − 1 with every batch applied and no
 * loss of sync, and the baseline must count every message; otherwise the run fails (exit 1).
 * Reconciliation is off (resync_interval_ms 0) so no snapshot exchange runs while measuring.
 *
 * Run: node --import tsx bench/ingest/ingest.bench.ts [--quick] [--streams=1|16]
 *      [--only=indexed|baseline]   (full run ≈ 1–1.5 min, 20 phases; --quick ≈ 10 s)
 * Profile: node --cpu-prof --import tsx bench/ingest/ingest.bench.ts --streams=1 --only=indexed
 */
import { dirname, join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { fileURLToPath } from 'node:url';
import { Decoder } from '@msgpack/msgpack';
import * as zmq from 'zeromq';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { StreamObservers } from '../../directory-svc/subscription/stream-observer.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import type { StreamLimits } from '../../shared/config/kv-events-config.js';
import { emitResult, isQuickRun, median } from '../lib/bench-kit.js';
import { ForkedPublisher } from '../lib/forked-publisher.js';
import { INGEST_LOAD_SHAPE, buildIngestLoad } from './ingest-load.js';

const QUICK = isQuickRun();
const ONLY = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);
const STREAMS_ARG = process.argv.find((a) => a.startsWith('--streams='))?.slice('--streams='.length);
const STREAM_COUNTS = STREAMS_ARG === undefined ? [1, 16] : [Number(STREAMS_ARG)];
/** Batches per stream, chosen so each timed phase runs a few seconds on an idle core. */
const MESSAGES_PER_STREAM: Record<number, number> = QUICK ? { 1: 3000, 16: 300 } : { 1: 12_000, 16: 1000 };
/** Back-to-back baseline/indexed pairs per stream count; medians are reported. */
const RUNS = QUICK ? 1 : 5;
const SEED = 0x1e57;
const TOPIC = 'xllm-kv';
/** A phase that cannot finish in this long is reported as a failure, never as a number. */
const PHASE_TIMEOUT_MS = 120_000;

const LIMITS: StreamLimits = {
  maxBlocksPerStream: 262_144,
  maxMessageBytes: 8 * 1024 * 1024,
  maxBufferedBytes: 16 * 1024 * 1024,
  replayTimeoutMs: 2000,
  resyncIntervalMs: 0,
};

const publisherFile = join(dirname(fileURLToPath(import.meta.url)), 'ingest-publisher.ts');

interface PhaseResult {
  blocksPerS: number;
  /** Blocks per CPU second of this process (user + system, incl. libzmq's I/O thread). */
  blocksPerCpuS: number;
  seconds: number;
  timedBatches: number;
}

interface ReadyMessage {
  type: 'ready';
  streams: { endpoint: string; replayEndpoint: string }[];
}

/** The forked publisher (`--streams`, `--messages`): wait for its IPC messages with `next`. */
function forkPublisher(streams: number, messages: number): ForkedPublisher {
  return new ForkedPublisher(publisherFile, [`--streams=${streams}`, `--messages=${messages}`, `--seed=${SEED}`, `--topic=${TOPIC}`]);
}

/**
 * Counts handled batches across all streams and stamps the clock when the warm-up count and the
 * final count are reached. Called once per batch: no allocation.
 */
class BatchClock {
  handled = 0;
  startMs = 0;
  endMs = 0;
  private startCpu: NodeJS.CpuUsage = { user: 0, system: 0 };
  private cpu: NodeJS.CpuUsage = { user: 0, system: 0 };
  readonly done: Promise<void>;
  private finish!: () => void;

  constructor(
    private readonly warmupBatches: number,
    private readonly totalBatches: number,
  ) {
    this.done = new Promise<void>((r) => (this.finish = r));
  }

  tick(): void {
    const n = ++this.handled;
    if (n === this.warmupBatches) {
      this.startMs = performance.now();
      this.startCpu = process.cpuUsage();
    }
    if (n === this.totalBatches) {
      this.endMs = performance.now();
      this.cpu = process.cpuUsage(this.startCpu);
      this.finish();
    }
  }

  result(blocksPerBatch: number): PhaseResult {
    const timedBatches = this.totalBatches - this.warmupBatches;
    const seconds = (this.endMs - this.startMs) / 1000;
    const cpuSeconds = (this.cpu.user + this.cpu.system) / 1e6;
    const blocks = timedBatches * blocksPerBatch;
    return { blocksPerS: blocks / seconds, blocksPerCpuS: blocks / cpuSeconds, seconds, timedBatches };
  }
}

function withTimeout<T>(p: Promise<T>, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not finished within ${PHASE_TIMEOUT_MS} ms`)), PHASE_TIMEOUT_MS);
  });
  return Promise.race([p, timeout]).finally(() => clearTimeout(timer));
}

/** Indexed phase: one StreamSubscriber per stream, SYNCHRONIZED before the clock starts. */
async function runIndexed(streams: number, messages: number, blocksPerBatch: number): Promise<PhaseResult> {
  const pub = forkPublisher(streams, messages);
  const subs: StreamSubscriber[] = [];
  try {
    const ready = await pub.next<ReadyMessage>('ready');
    const subscribed = pub.next('subscribed');
    // As in directory-svc: every stream mirrors its residency into one shared group index.
    const residencyGroups = new ResidencyGroups();
    for (let i = 0; i < streams; i++) {
      const sub = await StreamSubscriber.create(
        {
          instanceName: `bench-${String(i).padStart(2, '0')}`,
          dpRank: 0,
          blockSize: INGEST_LOAD_SHAPE.blockSize,
          endpoint: ready.streams[i].endpoint,
          replayEndpoint: ready.streams[i].replayEndpoint,
          topic: TOPIC,
          hashSeed: 1024n,
        },
        LIMITS,
        { residencyGroups },
      );
      subs.push(sub);
    }
    // One observer per stream: synchronized once, then every applied batch ticks the clock.
    let tick: (() => void) | null = null;
    const synced = Promise.all(subs.map((s) => new Promise<void>((resolve) => {
      s.observe(new StreamObservers([{
        stateChanged: (state) => {
          if (state === 'SYNCHRONIZED') resolve();
        },
        batchApplied: () => tick?.(),
        indexReplaced: () => tick?.(),
      }]));
    })));
    for (const s of subs) s.start();
    await withTimeout(Promise.all([synced, subscribed]), 'subscribers synchronized');
    const clock = new BatchClock(Math.ceil(messages / 10) * streams, messages * streams);
    tick = () => clock.tick();
    pub.send({ type: 'go' });
    await withTimeout(clock.done, `indexed ${streams} stream(s)`);
    for (const s of subs) {
      const bad =
        s.state !== 'SYNCHRONIZED' ||
        s.sequence !== BigInt(messages - 1) ||
        s.counters.batchesApplied !== messages ||
        Object.keys(s.counters.syncLost).length > 0;
      if (bad) {
        throw new Error(
          `${s.config.instanceName}: ${s.state} at ${s.sequence} (${s.error}), applied ${s.counters.batchesApplied}/${messages}, sync_lost ${JSON.stringify(s.counters.syncLost)}`,
        );
      }
    }
    const entries = subs[0].index?.entryCount ?? 0;
    process.stderr.write(`[ingest] indexed ${streams} stream(s): ${messages} batches each, ${entries} entries in stream 0's index\n`);
    return clock.result(blocksPerBatch);
  } finally {
    await Promise.all(subs.map((s) => s.close()));
    await pub.stop();
  }
}

/** Baseline phase: bare SUB receive + @msgpack/msgpack decode of the same messages. */
async function runBaseline(streams: number, messages: number, blocksPerBatch: number): Promise<PhaseResult> {
  const pub = forkPublisher(streams, messages);
  const socks: zmq.Subscriber[] = [];
  try {
    const ready = await pub.next<ReadyMessage>('ready');
    const subscribed = pub.next('subscribed');
    const clock = new BatchClock(Math.ceil(messages / 10) * streams, messages * streams);
    let decodedEvents = 0;
    const loops: Promise<void>[] = [];
    for (let i = 0; i < streams; i++) {
      const sock = new zmq.Subscriber({ linger: 0 });
      sock.subscribe(Buffer.from(TOPIC, 'utf8'));
      sock.connect(ready.streams[i].endpoint);
      socks.push(sock);
      const decoder = new Decoder({ useBigInt64: true });
      loops.push(
        (async () => {
          for (let n = 0; n < messages; n++) {
            const frames = await sock.receive();
            // Use the result so the decode cannot be skipped: [ts, events, dp_rank].
            const batch = decoder.decode(frames[2]) as unknown[];
            decodedEvents += (batch[1] as unknown[]).length;
            clock.tick();
          }
        })(),
      );
    }
    await withTimeout(subscribed, 'baseline subscribed');
    pub.send({ type: 'go' });
    await withTimeout(clock.done, `baseline ${streams} stream(s)`);
    await Promise.all(loops);
    if (clock.handled !== messages * streams) throw new Error(`baseline counted ${clock.handled} of ${messages * streams} messages`);
    process.stderr.write(`[ingest] baseline ${streams} stream(s): ${clock.handled} messages, ${decodedEvents} events decoded\n`);
    return clock.result(blocksPerBatch);
  } finally {
    for (const s of socks) s.close();
    await pub.stop();
  }
}

async function main(): Promise<void> {
  // Built here only to learn the per-batch block count and payload size; the publisher builds its own.
  const load = buildIngestLoad({ ...INGEST_LOAD_SHAPE, seed: SEED, dpRank: 0 });
  const blocksPerBatch = load.storedBlocksPerBatch;
  const avgPayloadBytes = Math.round(load.payloads.reduce((a, p) => a + p.length, 0) / load.payloads.length);
  for (const streams of STREAM_COUNTS) {
    const messages = MESSAGES_PER_STREAM[streams] ?? Math.max(300, Math.round(20_000 / streams));
    const baseline: PhaseResult[] = [];
    const indexed: PhaseResult[] = [];
    // Phases alternate so load from other processes on a shared machine hits both alike.
    for (let run = 0; run < RUNS; run++) {
      if (ONLY !== 'indexed') baseline.push(await runBaseline(streams, messages, blocksPerBatch));
      if (ONLY !== 'baseline') indexed.push(await runIndexed(streams, messages, blocksPerBatch));
    }
    const indexedRate = indexed.length === 0 ? null : median(indexed.map((r) => r.blocksPerS));
    const baselineRate = baseline.length === 0 ? null : median(baseline.map((r) => r.blocksPerS));
    // Each pair ran back to back under the same outside load, so its ratio is steadier than
    // the ratio of the two medians on a shared machine.
    const pairRatios = indexed.length === baseline.length ? indexed.map((r, i) => r.blocksPerS / baseline[i].blocksPerS) : [];
    const indexedCpuRate = indexed.length === 0 ? null : median(indexed.map((r) => r.blocksPerCpuS));
    const baselineCpuRate = baseline.length === 0 ? null : median(baseline.map((r) => r.blocksPerCpuS));
    const line = {
      name: 'ingest',
      streams,
      blocks_per_s: indexedRate === null ? null : Math.round(indexedRate),
      baseline_blocks_per_s: baselineRate === null ? null : Math.round(baselineRate),
      ratio: pairRatios.length === 0 ? null : Number(median(pairRatios).toFixed(3)),
      ratio_runs: pairRatios.map((r) => Number(r.toFixed(3))),
      blocks_per_cpu_s: indexedCpuRate === null ? null : Math.round(indexedCpuRate),
      baseline_blocks_per_cpu_s: baselineCpuRate === null ? null : Math.round(baselineCpuRate),
      cpu_ratio: indexedCpuRate === null || baselineCpuRate === null ? null : Number((indexedCpuRate / baselineCpuRate).toFixed(3)),
      runs: RUNS,
      blocks_per_s_runs: indexed.map((r) => Math.round(r.blocksPerS)),
      baseline_blocks_per_s_runs: baseline.map((r) => Math.round(r.blocksPerS)),
      batches_per_stream: messages,
      timed_batches: (indexed[0] ?? baseline[0])?.timedBatches ?? 0,
      blocks_per_batch: blocksPerBatch,
      block_size: INGEST_LOAD_SHAPE.blockSize,
      avg_payload_bytes: avgPayloadBytes,
      quick: QUICK,
    };
    emitResult(line);
  }
}

main().catch((e: unknown) => {
  process.stderr.write(`[ingest] failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}\n`);
  process.exit(1);
});
