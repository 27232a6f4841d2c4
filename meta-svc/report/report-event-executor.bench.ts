/**
 * Micro-benchmark of the reportEvent delta path (kvcm-meta §7.5; target ≥ 100,000 ADD events/s
 * with 2,000 blocks per request on SQLite). Measures `ReportEventExecutor.execute` over requests
 * of 2,000 new-key ADDs (one spec each) against a real SQLite file, and as a baseline the bare
 * store work the same requests need (one apply of the same mutations), so the executor's own
 * overhead (planning, folding, the gate) reads as the difference.
 *
 * Run: `node --import tsx meta-svc/report/report-event-executor.bench.ts [--quick]`
 * Inputs are deterministic (sequential keys), built before timing; the first 5 requests of each
 * series are warm-up and dropped. One JSON line per series.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { silentLogger } from '../../shared/log/logger.js';
import { SqliteMetaStore } from '../store/sqlite-meta-store.js';
import type { StoreMutation } from '../store/meta-store.js';
import { createEventReporting } from './event-reporting.js';
import type { DecodedEvent } from './report-events.js';
import { appendSVersion, formatReportLocationId } from './report-location-id.js';
import { planReport } from './report-plan.js';

const quick = process.argv.includes('--quick');
const BLOCKS_PER_REQUEST = 2000;
const WARMUP = 5;
const REQUESTS = quick ? 15 : 55;

function buildRequests(firstKey: number): DecodedEvent[][] {
  const out: DecodedEvent[][] = [];
  let k = firstKey;
  for (let r = 0; r < REQUESTS; r++) {
    const events: DecodedEvent[] = new Array(BLOCKS_PER_REQUEST);
    for (let i = 0; i < BLOCKS_PER_REQUEST; i++, k++) {
      events[i] = { eventType: 2, memberOk: true, blockKey: String(k), medium: 'gpu', specs: [{ name: 'tp0', uri: `event_report://10.0.0.1:8000/${k}/tp0` }] };
    }
    out.push(events);
  }
  return out;
}

function report(series: string, msPerRequest: number[]): void {
  const timed = msPerRequest.slice(WARMUP).sort((a, b) => a - b);
  const total = timed.reduce((a, b) => a + b, 0);
  const pick = (q: number): number => timed[Math.min(timed.length - 1, Math.floor(q * timed.length))] ?? 0;
  console.log(
    JSON.stringify({
      name: `report_event_${series}`,
      blocks_per_request: BLOCKS_PER_REQUEST,
      requests: timed.length,
      events_per_s: Math.round((timed.length * BLOCKS_PER_REQUEST) / (total / 1000)),
      p50_ms: +pick(0.5).toFixed(2),
      p99_ms: +pick(0.99).toFixed(2),
    }),
  );
}

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcm-report-bench-'));
  const store = SqliteMetaStore.open(join(dir, 'kvcm.db'));
  try {
    const reporting = createEventReporting({ store, logger: silentLogger, nowMs: Date.now });
    reporting.lifecycle.stop();
    const target = { instanceId: 'bench', storageType: 8 as const, hostIpPort: '10.0.0.1:8000', storageName: 'event_report_l2' };

    // Baseline: the store work alone.
    const token = '0123456789abcdef0123456789abcdef';
    const locationId = formatReportLocationId(8, 'gpu', target.hostIpPort);
    const baseline: number[] = [];
    for (const events of buildRequests(1)) {
      const mutations: StoreMutation[] = [];
      for (const e of events) {
        const ev = e as Extract<DecodedEvent, { eventType: 2 }>;
        const blockKey = BigInt(ev.blockKey);
        const uri = appendSVersion((ev.specs[0] as { uri: string }).uri, token);
        mutations.push({ op: 'putLocation', instanceId: 'baseline', blockKey, location: { locationId, storageName: 'event_report_l2', type: 8, status: 3, createTimeUs: 1n, specs: [{ name: 'tp0', uri }] } });
      }
      const t0 = performance.now();
      await store.apply(mutations);
      baseline.push(performance.now() - t0);
    }
    report('store_baseline', baseline);

    const executor: number[] = [];
    for (const events of buildRequests(1)) {
      const t0 = performance.now();
      const o = await reporting.executor.execute(target, planReport(events, 100000));
      executor.push(performance.now() - t0);
      if (o.code !== 'OK') throw new Error(`bench request failed: ${o.code}`);
    }
    report('add_executor', executor);
    await reporting.close();
  } finally {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

await main();
