/**
 * View propagation benchmark (architecture.md "The view stream"): how long a KV event takes from
 * the engine's publish to being visible in a router's applied view, and what the view stream costs
 * per watcher.
 *
 * Three threads, so no measured loop is starved by another part:
 *   worker "engine":  RankPublisher (engine simulator) publishing ~50k block events/s over ZeroMQ;
 *                     it writes each batch's publish time into a SharedArrayBuffer before sending.
 *   main "directory": StreamSubscriber → StreamIndex → ViewPublisher → gRPC WatchView server.
 *   worker "router":  a grpc-js WatchView client applying snapshot + deltas to a per-stream
 *                     Map<key low64, tiers>; a batch is visible when the key of its first block is.
 *
 * Load shape: one stream, block_size 32, hash_seed 1024; batch s stores a fresh root chain of
 * 32 blocks (hashes s·32+1 …) and removes the chain of batch s−256, so the index stays at ~8k keys
 * and every batch is 64 block events (32 adds + 32 removes). Rate 50k block events/s
 * (≈780 batches/s) for 10 s (3 s with --quick); the first 20% of batches are warm-up and dropped.
 * Deterministic token ids (no randomness needed).
 *
 * Results (one JSON line each):
 *  - `propagation_latency`: p50/p99/max ms publish → visible in the router's applied view.
 *  - `index_latency` (baseline, same run): publish → applied to the directory's index ('view'
 *    event), so the view stream's own share is the difference.
 *  - `view_stream_bytes`: bytes/s the stream costs per watcher, deltas/s, key changes per delta.
 *
 * Run: node --import tsx bench/propagation/propagation.bench.ts [--quick]
 */
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, workerData } from 'node:worker_threads';
import * as grpc from '@grpc/grpc-js';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { DEFAULT_STREAM_LIMITS } from '../../shared/config/kv-events-config.js';
import { Directory } from '../../directory-svc/directory.js';
import { DirectoryGrpcServer } from '../../directory-svc/grpc/directory-grpc-server.js';
import { pickFreePorts } from '../../shared/net/loopback-ports.js';
import { loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import { StreamSubscriber } from '../../directory-svc/subscription/stream-subscriber.js';
import { ViewPublisher } from '../../directory-svc/view/view-publisher.js';
import { RankPublisher } from '../../tools/engine-sim/rank-publisher.js';
import type { WireEvent } from '../../tools/engine-sim/wire-types.js';
import { emitResult, isQuickRun, percentile } from '../lib/bench-kit.js';
import { nextMessage as next, tsWorker } from '../lib/ts-worker.js';

const QUICK = isQuickRun() || (workerData as { quick?: boolean } | null)?.quick === true;
const BLOCK_SIZE = 32;
const BLOCKS_PER_BATCH = 32;
const KEEP_BATCHES = 256;
const EVENTS_PER_S = 50_000;
const BATCHES_PER_S = EVENTS_PER_S / (2 * BLOCKS_PER_BATCH);
const DURATION_S = QUICK ? 3 : 10;
const MAX_BATCHES = Math.ceil(BATCHES_PER_S * DURATION_S);
const WARMUP_BATCHES = Math.floor(MAX_BATCHES * 0.2);
const TICK_MS = 5;

interface WorkerInit {
  role: 'engine' | 'router';
  quick: boolean;
  eventPort: number;
  replayPort: number;
  grpcPort: number;
  /** Float64Array over it: publish time (performance.timeOrigin + now) per batch seq. */
  pubTimes: SharedArrayBuffer;
}

const nowMs = (): number => performance.timeOrigin + performance.now();

function batchTokens(seq: number): number[] {
  const out = new Array<number>(BLOCK_SIZE * BLOCKS_PER_BATCH);
  const base = seq * BLOCKS_PER_BATCH * BLOCK_SIZE;
  for (let i = 0; i < out.length; i++) out[i] = base + i + 1;
  return out;
}

function batchHashes(seq: number): number[] {
  const out: number[] = [];
  for (let j = 0; j < BLOCKS_PER_BATCH; j++) out.push(seq * BLOCKS_PER_BATCH + j + 1);
  return out;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

// ---- engine worker ---------------------------------------------------------------------------

async function runEngine(init: WorkerInit): Promise<void> {
  const pubTimes = new Float64Array(init.pubTimes);
  const pub = await RankPublisher.start({
    eventPort: init.eventPort,
    replayPort: init.replayPort,
    dpRank: 0,
    blockSize: BLOCK_SIZE,
    sendHighWaterMark: 1_000_000,
  });
  parentPort!.postMessage({ kind: 'engine-ready' });
  await new Promise<void>((resolve) => parentPort!.once('message', () => resolve())); // 'go'
  await pub.waitForSubscribers(1, 10_000);
  const events: WireEvent[] = [];
  const start = nowMs();
  let seq = 0;
  while (seq < MAX_BATCHES) {
    const due = Math.min(MAX_BATCHES, Math.floor(((nowMs() - start) / 1000) * BATCHES_PER_S) + 1);
    const sends: Promise<bigint>[] = [];
    for (; seq < due; seq++) {
      events.length = 0;
      events.push({ type: 'BlockStored', block_hashes: batchHashes(seq), parent_block_hash: null, token_ids: batchTokens(seq), block_size: BLOCK_SIZE, medium: 'gpu' });
      if (seq >= KEEP_BATCHES) events.push({ type: 'BlockRemoved', block_hashes: batchHashes(seq - KEEP_BATCHES), medium: 'gpu' });
      pubTimes[seq] = nowMs();
      sends.push(pub.publish(events));
    }
    await Promise.all(sends);
    await new Promise((r) => setTimeout(r, TICK_MS));
  }
  const elapsedS = (nowMs() - start) / 1000;
  parentPort!.postMessage({ kind: 'engine-done', batches: seq, elapsedS });
  await new Promise<void>((resolve) => parentPort!.once('message', () => resolve())); // 'close'
  await pub.close();
}

// ---- router worker ---------------------------------------------------------------------------

interface Residency {
  stream_id: number;
  keys: Buffer;
  tiers: Buffer;
}

interface Update {
  body: string;
  snapshot?: { streams: Residency[] };
  delta?: { stream_resets: Residency[]; residency: Residency[]; stream_removals: number[] };
}

async function runRouter(init: WorkerInit): Promise<void> {
  const pubTimes = new Float64Array(init.pubTimes);
  const hasher = await ContentKeyHasher.forSeed(1024n);
  // low64 of each batch's first-block key → batch seq (built before anything is timed).
  const firstKey = new Map<bigint, number>();
  for (let s = 0; s < MAX_BATCHES; s++) {
    const key = hasher.chain(batchTokens(s).slice(0, BLOCK_SIZE), BLOCK_SIZE);
    firstKey.set(Buffer.from(key.buffer, key.byteOffset, 16).readBigUInt64LE(0), s);
  }
  const latencies = new Float64Array(MAX_BATCHES).fill(NaN);
  let seen = 0;
  const view = new Map<number, Map<bigint, number>>();
  const apply = (r: Residency, into: Map<bigint, number>, at: number): void => {
    for (let i = 0; i < r.tiers.length; i++) {
      const k = r.keys.readBigUInt64LE(i * 16);
      const t = r.tiers[i]!;
      if (t === 0) {
        into.delete(k);
        continue;
      }
      into.set(k, t);
      const s = firstKey.get(k);
      if (s !== undefined && Number.isNaN(latencies[s]!)) {
        latencies[s] = at - pubTimes[s]!;
        seen++;
      }
    }
  };
  const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as { kvdirectory: { v1: { KvDirectory: grpc.ServiceClientConstructor } } };
  const client = new loaded.kvdirectory.v1.KvDirectory(`127.0.0.1:${init.grpcPort}`, grpc.credentials.createInsecure(), {
    'grpc.max_receive_message_length': -1,
  }) as unknown as grpc.Client & { WatchView(req: object): grpc.ClientReadableStream<Update> };
  const call = client.WatchView({ router_id: 'bench-router', epoch: '', version: '0' });
  let resets = 0;
  call.on('data', (u: Update) => {
    const at = nowMs();
    if (u.body === 'snapshot') {
      view.clear();
      for (const s of u.snapshot!.streams) {
        const m = new Map<bigint, number>();
        view.set(s.stream_id, m);
        apply(s, m, at);
      }
    } else if (u.body === 'delta') {
      const d = u.delta!;
      for (const id of d.stream_removals) view.delete(id);
      for (const s of d.stream_resets) {
        const m = new Map<bigint, number>();
        view.set(s.stream_id, m);
        apply(s, m, at);
        resets++;
      }
      for (const r of d.residency) apply(r, view.get(r.stream_id) ?? new Map(), at);
    }
  });
  call.on('error', () => undefined);
  parentPort!.postMessage({ kind: 'router-ready' });
  const msg = await new Promise<{ batches: number }>((resolve) => parentPort!.once('message', resolve));
  const deadline = nowMs() + 10_000;
  while (seen < msg.batches && nowMs() < deadline) await new Promise((r) => setTimeout(r, 20));
  call.cancel();
  client.close();
  parentPort!.postMessage({ kind: 'router-done', latencies, seen, resets });
}

// ---- main: the directory ---------------------------------------------------------------------

async function main(): Promise<void> {
  // The publisher binds both later, in its worker: neither may be the other.
  const eventPort = await pickFreePorts();
  const init: Omit<WorkerInit, 'role'> = {
    quick: QUICK,
    eventPort,
    replayPort: await pickFreePorts(1, new Set([eventPort])),
    grpcPort: 0,
    pubTimes: new SharedArrayBuffer(8 * MAX_BATCHES),
  };
  const self = fileURLToPath(import.meta.url);
  const engine = tsWorker(self, { ...init, role: 'engine' });
  await next(engine, 'engine-ready');

  const view = new ViewPublisher();
  const pubTimes = new Float64Array(init.pubTimes);
  const indexLatencies = new Float64Array(MAX_BATCHES).fill(NaN);
  let sub: StreamSubscriber | null = null;
  const directory = new Directory({
    enabled: true,
    streamSource: 'static',
    maxStreams: 1,
    limits: { ...DEFAULT_STREAM_LIMITS, resyncIntervalMs: 0 },
    createStream: async (cfg, limits) => {
      const s = await StreamSubscriber.create(cfg, limits);
      sub = s;
      return s;
    },
    trackers: [view, { streamOpened: () => {
      const indexed = (sequence: bigint): void => {
        const seq = Number(sequence);
        if (seq >= 0 && seq < MAX_BATCHES && Number.isNaN(indexLatencies[seq]!)) indexLatencies[seq] = nowMs() - pubTimes[seq]!;
      };
      return { batchApplied: indexed, indexReplaced: indexed };
    } }],
  });
  await directory.addStream({
    instanceName: 'bench-engine:8000',
    dpRank: 0,
    blockSize: BLOCK_SIZE,
    endpoint: `tcp://127.0.0.1:${init.eventPort}`,
    replayEndpoint: `tcp://127.0.0.1:${init.replayPort}`,
    topic: '',
    hashSeed: 1024n,
  });
  const server = await DirectoryGrpcServer.start({ port: 0, host: '127.0.0.1', directory, view });
  const router = tsWorker(self, { ...init, grpcPort: server.port, role: 'router' });
  await next(router, 'router-ready');
  const deadline = performance.now() + 10_000;
  while ((sub === null || (sub as StreamSubscriber).state !== 'SYNCHRONIZED' || view.watcherCount === 0) && performance.now() < deadline) {
    await new Promise((r) => setTimeout(r, 20));
  }

  const statsBefore = view.stats();
  const t0 = nowMs();
  engine.postMessage('go');
  const done = await next<{ batches: number; elapsedS: number }>(engine, 'engine-done');
  router.postMessage({ batches: done.batches });
  const routerDone = await next<{ latencies: Float64Array; seen: number; resets: number }>(router, 'router-done');
  const elapsedS = (nowMs() - t0) / 1000;
  const statsAfter = view.stats();

  const measured = (arr: Float64Array): Float64Array => {
    const out: number[] = [];
    for (let s = WARMUP_BATCHES; s < done.batches; s++) if (!Number.isNaN(arr[s]!)) out.push(arr[s]!);
    return Float64Array.from(out).sort();
  };
  const prop = measured(routerDone.latencies);
  const idx = measured(indexLatencies);
  const shape = { events_per_s: Math.round((done.batches * 2 * BLOCKS_PER_BATCH) / done.elapsedS), batches: done.batches, block_size: BLOCK_SIZE, quick: QUICK };
  emitResult({
    name: 'propagation_latency',
    ...shape,
    samples: prop.length,
    missing: done.batches - routerDone.seen,
    stream_resets_seen: routerDone.resets,
    p50_ms: round(percentile(prop, 0.5)),
    p99_ms: round(percentile(prop, 0.99)),
    max_ms: round(prop.length > 0 ? prop[prop.length - 1]! : NaN),
  });
  emitResult({
    name: 'index_latency',
    baseline_for: 'propagation_latency',
    ...shape,
    samples: idx.length,
    p50_ms: round(percentile(idx, 0.5)),
    p99_ms: round(percentile(idx, 0.99)),
    max_ms: round(idx.length > 0 ? idx[idx.length - 1]! : NaN),
  });
  const deltas = statsAfter.deltasPublished - statsBefore.deltasPublished;
  const keyChanges = statsAfter.keyChangesPublished - statsBefore.keyChangesPublished;
  emitResult({
    name: 'view_stream_bytes',
    ...shape,
    watchers: 1,
    bytes_per_s_per_watcher: Math.round((statsAfter.bytesSent - statsBefore.bytesSent) / elapsedS),
    deltas_per_s: round(deltas / elapsedS),
    key_changes_per_delta: round(deltas === 0 ? 0 : keyChanges / deltas),
    bytes_per_key_change: round(keyChanges === 0 ? 0 : (statsAfter.bytesSent - statsBefore.bytesSent) / keyChanges),
  });

  view.close();
  await server.close(500);
  await directory.close();
  engine.postMessage('close');
  await Promise.all([new Promise((r) => engine.once('exit', r)), new Promise((r) => router.once('exit', r))]);
}

if (isMainThread) {
  main().catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
} else {
  const init = workerData as WorkerInit;
  (init.role === 'engine' ? runEngine(init) : runRouter(init)).catch((e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
