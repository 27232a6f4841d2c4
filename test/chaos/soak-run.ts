/**
 * Soak: continuous churn through two CAR routers (many prompt families against small pools, so
 * every engine keeps evicting Device blocks and offloading them to Host, and dropping Host ones),
 * while the heap and RSS of the directory and of router-1 are sampled every `sampleMs`: heap from
 * their /metrics (`nodejs_heap_size_used_bytes`), RSS from /proc/<pid>/status (VmRSS).
 *
 * Memory is judged once the index is full (every stream holding at least 90% of its engine's
 * Device + Host capacity): a least-squares slope over the second half of the samples taken after
 * that, in KiB/s, for each series. Flat memory means a slope near zero; the bound is the caller's.
 *
 * Run: `npm run soak` (SOAK_SECONDS, default 1800), or `runSoak()` from a test.
 */
import { readFileSync } from 'node:fs';
import { waitFor } from '../helpers/ports.js';
import { ChaosCluster } from './chaos-cluster.js';
import { Workload } from './workload.js';

export interface SoakOptions {
  readonly seconds: number;
  readonly sampleMs: number;
  readonly seed: number;
  readonly log?: (line: string) => void;
}

export interface MemorySample {
  readonly t: number;
  readonly directoryHeap: number;
  readonly directoryRss: number;
  readonly routerHeap: number;
  readonly routerRss: number;
}

export type SeriesName = 'directoryHeap' | 'directoryRss' | 'routerHeap' | 'routerRss';
export const SERIES: readonly SeriesName[] = ['directoryHeap', 'directoryRss', 'routerHeap', 'routerRss'];

export interface SoakReport {
  readonly seconds: number;
  readonly requests: number;
  readonly failed: number;
  readonly samples: readonly MemorySample[];
  /** Seconds from the start of the load until the index was full (null: never). */
  readonly fullAfterS: number | null;
  /** Samples the slope was fitted over (second half after full). */
  readonly fittedSamples: number;
  /** KiB/s per series over the fitted samples. */
  readonly slopeKiBs: Readonly<Record<SeriesName, number>>;
  /** MiB at the first and last fitted sample. */
  readonly firstMiB: Readonly<Record<SeriesName, number>>;
  readonly lastMiB: Readonly<Record<SeriesName, number>>;
  /** Per stream at the end: Device and Host content keys the routers show. */
  readonly streams: readonly { readonly instance: string; readonly deviceBlocks: number; readonly hostBlocks: number; readonly synchronized: boolean }[];
}

const BLOCK_SIZE = 16;
const DEVICE_BLOCKS = 128;
const HOST_BLOCKS = 128;

function heapUsed(metricsText: string): number {
  const m = /^(?:\w+_)?nodejs_heap_size_used_bytes(?:\{[^}]*\})? (\S+)$/m.exec(metricsText);
  return m === null ? NaN : Number(m[1]);
}

function rssBytes(pid: number): number {
  try {
    const m = /^VmRSS:\s+(\d+) kB$/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m === null ? NaN : Number(m[1]) * 1024;
  } catch {
    return NaN;
  }
}

async function metricsText(url: string): Promise<string> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(3000) });
    return await res.text();
  } catch {
    return '';
  }
}

/** Least-squares slope of y over t (ms), in units per second. */
export function slopePerSecond(points: readonly { t: number; y: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const mt = points.reduce((a, p) => a + p.t, 0) / n;
  const my = points.reduce((a, p) => a + p.y, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.t - mt) * (p.y - my);
    den += (p.t - mt) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 1000;
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

export async function runSoak(opts: SoakOptions): Promise<SoakReport> {
  const log = opts.log ?? ((l: string) => process.stderr.write(`${l}\n`));
  const cluster = new ChaosCluster({
    blockSize: BLOCK_SIZE,
    engineDpSizes: [1, 1, 1],
    deviceCapacityBlocks: DEVICE_BLOCKS,
    hostCapacityBlocks: HOST_BLOCKS,
    maxBlocksPerStream: 262144,
    viewStaleAfterMs: 3000,
  });
  // 300 families × 4 variants of 6 blocks: far more distinct blocks than 256 per engine, and
  // shared prefixes, so CAR keeps finding hits while the pools churn.
  const workload = new Workload({
    routerUrls: () => cluster.routers.map((r) => r.url),
    blockSize: BLOCK_SIZE,
    seed: opts.seed,
    salt: 21,
    families: 300,
    variants: 4,
    prefixBlocks: 4,
    suffixBlocks: 2,
    concurrency: 2,
    pauseMs: 10,
    maxRequests: Number.MAX_SAFE_INTEGER,
    proxyShare: 0.8,
    timeoutMs: 10000,
  });
  const samples: MemorySample[] = [];
  let fullAt: number | null = null;
  let loadStart = 0;
  try {
    await cluster.start();
    const router = cluster.routers[0]!;
    workload.start();
    loadStart = Date.now();
    const endAt = loadStart + opts.seconds * 1000;
    while (Date.now() < endAt) {
      const [dirText, routerText] = await Promise.all([metricsText(`${cluster.directoryHttpUrl}/metrics`), metricsText(`${router.url}/metrics`)]);
      samples.push({
        t: Date.now(),
        directoryHeap: heapUsed(dirText),
        directoryRss: rssBytes(cluster.directory.pid),
        routerHeap: heapUsed(routerText),
        routerRss: rssBytes(router.proc.pid),
      });
      if (fullAt === null) {
        const q = await cluster.query(router, []);
        if (q !== null && q.matches.length === cluster.streamCount && q.matches.every((m) => m.synchronized && m.device_blocks + m.host_blocks >= 0.9 * (DEVICE_BLOCKS + HOST_BLOCKS))) {
          fullAt = Date.now();
          log(`index full after ${((fullAt - loadStart) / 1000).toFixed(1)} s`);
        }
      }
      const last = samples[samples.length - 1]!;
      log(`soak t=${((last.t - loadStart) / 1000).toFixed(0)}s requests=${workload.records.length} dir heap/rss ${(last.directoryHeap / 2 ** 20).toFixed(1)}/${(last.directoryRss / 2 ** 20).toFixed(1)} MiB router ${(last.routerHeap / 2 ** 20).toFixed(1)}/${(last.routerRss / 2 ** 20).toFixed(1)} MiB`);
      await sleep(Math.max(0, Math.min(opts.sampleMs, endAt - Date.now())));
    }
    await workload.stop();
    // The load stopped: every stream must settle synchronized (churn never left one behind).
    await waitFor(async () => (await cluster.allSynchronized()) === null, 30000, 'every stream synchronized after the soak');
    const end = await cluster.query(router, []);
    const after = fullAt === null ? [] : samples.filter((s) => s.t >= fullAt!);
    const fitted = after.slice(Math.floor(after.length / 2));
    const slopeKiBs = {} as Record<SeriesName, number>;
    const firstMiB = {} as Record<SeriesName, number>;
    const lastMiB = {} as Record<SeriesName, number>;
    for (const k of SERIES) {
      slopeKiBs[k] = round(slopePerSecond(fitted.map((s) => ({ t: s.t, y: s[k] }))) / 1024, 2);
      firstMiB[k] = fitted.length > 0 ? round(fitted[0]![k] / 2 ** 20, 1) : NaN;
      lastMiB[k] = fitted.length > 0 ? round(fitted[fitted.length - 1]![k] / 2 ** 20, 1) : NaN;
    }
    return {
      seconds: opts.seconds,
      requests: workload.records.length,
      failed: workload.records.filter((r) => !r.ok).length,
      samples,
      fullAfterS: fullAt === null ? null : round((fullAt - loadStart) / 1000, 1),
      fittedSamples: fitted.length,
      slopeKiBs,
      firstMiB,
      lastMiB,
      streams: (end?.matches ?? []).map((m) => ({ instance: `${m.instance_name}#${m.dp_rank}`, deviceBlocks: m.device_blocks, hostBlocks: m.host_blocks, synchronized: m.synchronized })),
    };
  } finally {
    await workload.stop();
    await cluster.stop();
  }
}

function round(x: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export function soakSummary(r: SoakReport): string {
  const lines = [
    `soak ${r.seconds} s: ${r.requests} requests, ${r.failed} failed; index full after ${r.fullAfterS ?? 'never'} s; slope fitted over ${r.fittedSamples} samples`,
    '| series | first MiB | last MiB | slope KiB/s |',
    '|---|---:|---:|---:|',
    ...SERIES.map((k) => `| ${k} | ${r.firstMiB[k]} | ${r.lastMiB[k]} | ${r.slopeKiBs[k]} |`),
    `streams at the end: ${r.streams.map((s) => `${s.instance} device=${s.deviceBlocks} host=${s.hostBlocks}${s.synchronized ? '' : ' UNSYNCHRONIZED'}`).join('; ')}`,
  ];
  return lines.join('\n');
}
