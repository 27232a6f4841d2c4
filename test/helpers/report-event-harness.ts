/**
 * A real MetaService HTTP edge serving reportEvent over a real SQLite file (wrapped in a
 * FaultyMetaStore) with an injected clock, for the kvcm-meta §7 suites. Instances are given
 * directly as ReportInstance records (registration is another suite's concern).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MetaHttpServer } from '../../meta-svc/http/meta-http-server.js';
import { createMetaMetrics, type MetaMetrics } from '../../meta-svc/http/meta-metrics.js';
import { SqliteMetaStore } from '../../meta-svc/store/sqlite-meta-store.js';
import { RedisMetaStore } from '../../meta-svc/store/redis-meta-store.js';
import { RedisReporterSync } from '../../meta-svc/cluster/redis-reporter-sync.js';
import type { MetaStore } from '../../meta-svc/store/meta-store.js';
import type { ReporterSync } from '../../meta-svc/report/reporter-sync.js';
import type { ReporterRegistry } from '../../meta-svc/report/reporter-registry.js';
import type { RedisServer } from './redis-server.js';
import type { StoredLocation } from '../../meta-svc/store/meta-store.js';
import { createEventReporting, type EventReporting } from '../../meta-svc/report/event-reporting.js';
import { DEFAULT_EVENT_REPORT_TIMINGS, type EventReportTimings } from '../../meta-svc/config/event-report-timings.js';
import { registerReportEventHandler, type ReportInstance } from '../../meta-svc/rpc/report-event.js';
import { silentLogger } from '../../shared/log/logger.js';
import { FaultyMetaStore } from './faulty-meta-store.js';
import { ReportOffload } from '../../meta-svc/report/offload/report-offload.js';
import type { SnapshotStages } from '../../meta-svc/report/offloaded-writes.js';

export const L1P5 = 7;
export const L2 = 8;

export const DEFAULT_INSTANCES: Record<string, ReportInstance> = {
  test_instance: {
    eventReportStorages: new Map([
      [L1P5, 'event_report_l1p5'],
      [L2, 'event_report_l2'],
    ]),
    extraInfo: '{"a":1}',
  },
  other_instance: {
    eventReportStorages: new Map([
      [L1P5, 'event_report_l1p5'],
      [L2, 'event_report_l2'],
    ]),
    extraInfo: '',
  },
  l1p5_only: {
    eventReportStorages: new Map([[L1P5, 'event_report_l1p5']]),
    extraInfo: '',
  },
};

export class FakeClock {
  constructor(public ms = 1_700_000_000_000) {}
  readonly now = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface ReportResponse {
  header: { status: { code: string; message: string }; request_id: string; tracer_result: string };
  item_results: string[];
  committed_snapshot_version: string;
  retry_after_ms: string;
  snapshot_required: boolean;
  extra_info: string;
}

export interface HarnessOptions {
  readonly dir?: string;
  readonly clock?: FakeClock;
  readonly timings?: Partial<EventReportTimings>;
  /** Run on the Redis store with shared reporter state (§9.4) instead of SQLite. */
  readonly redis?: RedisServer;
  /** Bodies of at least this many bytes go to the report worker (issue 28); absent: no worker. */
  readonly offloadMinBytes?: number;
}

let redisNamespaceSeq = 0;

export class ReportHarness {
  private constructor(
    readonly dir: string,
    readonly ownsDir: boolean,
    readonly clock: FakeClock,
    readonly store: FaultyMetaStore,
    readonly reporting: EventReporting,
    readonly server: MetaHttpServer,
    readonly metrics: MetaMetrics,
    readonly url: string,
    readonly offload?: ReportOffload,
  ) {}

  /** `dir` reuses a data directory (restart scenarios); otherwise a fresh temp dir. */
  static async start(opts: HarnessOptions = {}): Promise<ReportHarness> {
    const ownsDir = opts.dir === undefined;
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'kvcm-report-'));
    const clock = opts.clock ?? new FakeClock();
    const timings: EventReportTimings = { ...DEFAULT_EVENT_REPORT_TIMINGS, ...opts.timings };
    let inner: MetaStore;
    let sync: ((registry: ReporterRegistry) => ReporterSync) | undefined;
    let stages: SnapshotStages | undefined;
    if (opts.redis) {
      const redisStore = await RedisMetaStore.open({ host: '127.0.0.1', port: opts.redis.port, db: 0, namespace: `report-${process.pid}-${++redisNamespaceSeq}` });
      inner = redisStore;
      stages = redisStore;
      sync = (registry) =>
        new RedisReporterSync({ redis: redisStore.redis, prefix: redisStore.keyPrefix, registry, holder: 'harness', backgroundHolder: () => true, logger: silentLogger });
    } else {
      inner = SqliteMetaStore.open(join(dir, 'kvcm.db'));
    }
    const store = new FaultyMetaStore(inner);
    const metrics = createMetaMetrics();
    const location = inner.workerLocation();
    const offload =
      opts.offloadMinBytes === undefined || location === null
        ? undefined
        : new ReportOffload({ store, location, logger: silentLogger, maxBodyBytes: 64 * 1024 * 1024, maxEventsPerRequest: 100000, minBodyBytes: opts.offloadMinBytes });
    const reporting = createEventReporting({ store, logger: silentLogger, nowMs: clock.now, timingsFor: () => timings, allTimings: [timings], metrics, sync, offload, stages });
    // Tests drive the checker with tick(); no background interval.
    reporting.lifecycle.stop();
    const server = new MetaHttpServer({
      host: '127.0.0.1',
      port: 0,
      maxBodyBytes: 64 * 1024 * 1024,
      logger: silentLogger,
      metrics,
      beforeRpc: opts.redis ? () => reporting.sync.catchUp() : undefined,
    });
    registerReportEventHandler(server, { reporting, metrics, resolveInstance: async (id) => DEFAULT_INSTANCES[id] ?? null }, offload);
    server.onDrain(() => reporting.drain());
    server.markServing();
    const port = await server.listen();
    return new ReportHarness(dir, ownsDir, clock, store, reporting, server, metrics, `http://127.0.0.1:${port}`, offload);
  }

  async close(): Promise<void> {
    await this.server.close();
    await this.reporting.close();
    await this.offload?.close();
    await this.store.close();
    this.metrics.stopLoopMonitor();
  }

  removeDir(): void {
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  async post(body: unknown): Promise<ReportResponse> {
    const res = await fetch(`${this.url}/api/reportEvent`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`HTTP ${res.status}`);
    return (await res.json()) as ReportResponse;
  }

  /** reportEvent for `host` on test_instance with the given storage type. */
  report(events: unknown[], host = '10.0.0.1:8000', storageType: number | string = 'ST_EVENT_REPORT_L2', instanceId = 'test_instance'): Promise<ReportResponse> {
    return this.post({ instance_id: instanceId, host_ip_port: host, storage_type: storageType, events });
  }

  async locations(key: bigint, instanceId = 'test_instance'): Promise<StoredLocation[]> {
    const blocks = await this.store.inner.getBlocks(instanceId, [key]);
    return [...(blocks.get(key)?.locations ?? [])];
  }

  /** §7.10 visible event-report locations of a key, now. */
  async visible(key: bigint, instanceId = 'test_instance'): Promise<StoredLocation[]> {
    const locs = await this.locations(key, instanceId);
    return locs.filter((l) => this.reporting.visibility.isVisible(instanceId, l, this.clock.now()));
  }
}

export const spec = (name: string, uri = `x://h/${name}`): { name: string; uri: string } => ({ name, uri });
export const add = (key: string | number, specs: Array<{ name: string; uri: string }>, medium = 'gpu'): unknown => ({
  event_type: 'EVENT_BLOCK_ADD',
  block_add: { block_key: String(key), medium, specs },
});
export const del = (key: string | number, specNames: string[], medium = 'gpu'): unknown => ({
  event_type: 'EVENT_BLOCK_DELETE',
  block_delete: { block_key: String(key), medium, spec_names: specNames },
});
export const register = (mediums: string[] = ['gpu']): unknown => ({ event_type: 'EVENT_NODE_REGISTER', node_register: { mediums } });
export const heartbeat = (): unknown => ({ event_type: 'EVENT_HEARTBEAT', heartbeat: {} });
export const hostDown = (): unknown => ({ event_type: 'EVENT_HOST_DOWN', host_down: {} });
export const snapshot = (blocks: Array<{ key: string | number; medium?: string; specs: Array<{ name: string; uri: string }> }>): unknown => ({
  event_type: 'EVENT_BLOCK_SNAPSHOT',
  block_snapshot: { blocks: blocks.map((b) => ({ block_key: String(b.key), medium: b.medium ?? 'gpu', specs: b.specs })) },
});

export const HEX32 = /^[0-9a-f]{32}$/;
