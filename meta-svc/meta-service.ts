/**
 * Wires the MetaService (kvcm-meta): config → instance registry → RPC handlers → HTTP server.
 * The server listens first and answers `/health` 503 "starting" and `/api/*` SERVICE_NOT_READY
 * until startup (bootstrap instances, the parts' own startup work) is done (§1.4, §1.1).
 * `close()` is the §9.3 drain: health 503, new requests SERVICE_NOT_READY, in-flight requests
 * finish, the parts' close hooks run (flush statistics, stop timers), then the store closes.
 */
import { existsSync } from 'node:fs';
import type { Logger } from '../shared/log/logger.js';
import type { MetaConfig } from './config/meta-config.js';
import { checkStorageAvailability } from './config/storage-availability.js';
import { MetaHttpServer } from './http/meta-http-server.js';
import { createMetaMetrics } from './http/meta-metrics.js';
import type { MetaMetrics } from './http/meta-metrics.js';
import { InstanceRegistry } from './instances/instance-registry.js';
import { registerInstanceRpcs } from './rpc/instances.js';
import { registerReportEventRpc } from './rpc/report-event.js';
import { registerDataPathRpcs } from './rpc/data-path-rpcs.js';
import type { MetaStore } from './store/meta-store.js';
import { InstrumentedMetaStore } from './store/instrumented-meta-store.js';
import { RedisMetaStore } from './store/redis-meta-store.js';
import { createRedisCluster, type MetaCluster } from './cluster/redis-cluster.js';

/** What each MetaService part receives from the wiring. */
export interface MetaServiceDeps {
  readonly config: MetaConfig;
  readonly store: MetaStore;
  readonly logger: Logger;
  readonly metrics: MetaMetrics;
  readonly instances: InstanceRegistry;
  /** State shared with other replicas on the Redis store (§9.4); null on SQLite. */
  readonly cluster: MetaCluster | null;
  /** Clock in ms since epoch; tests inject it. */
  readonly nowMs: () => number;
  /**
   * reportEvent bodies of at least this many bytes are parsed and written by the report worker
   * (issue 28); null = never (undefined: the default size).
   */
  readonly reportOffloadMinBytes?: number | null;
  /**
   * Run `hook` during close, after in-flight requests finished and before the store closes
   * (§9.3 "statistics flush"). Hooks run in registration order; a failing hook is logged.
   */
  onClose(hook: () => void | Promise<void>): void;
}

export interface MetaServiceOptions {
  readonly config: MetaConfig;
  /** Owned by the service from here on: closed by `close()` (and on a failed start). */
  readonly store: MetaStore;
  readonly logger: Logger;
  readonly nowMs?: () => number;
  /** meta-svc `--internal_api_token` ('' or absent: /api/* open, as KVCM clients expect). */
  readonly internalApiToken?: string;
  /** A shared store's reachability (§9.4); absent = always reachable. */
  readonly storeAvailable?: () => boolean;
  /** Background lease TTL on the Redis store (tests shorten it; default 3 s). */
  readonly leaseTtlMs?: number;
  /** See MetaServiceDeps.reportOffloadMinBytes (tests force the worker with 0, or turn it off). */
  readonly reportOffloadMinBytes?: number | null;
  /**
   * prom-client's process metrics (`process_*`, `nodejs_*`: memory, CPU, event-loop lag) on
   * `/metrics`, as directory-svc has them; main turns them on, tests that start many services leave
   * them off (each registration adds a GC observer to the process). Default false.
   */
  readonly processMetrics?: boolean;
}

export interface MetaServiceHandle {
  /** The bound port (config `http.port`, or the OS's choice when it is 0). */
  readonly port: number;
  readonly server: MetaHttpServer;
  readonly deps: MetaServiceDeps;
  /** §9.3 drain, then the store closes. Idempotent. */
  close(): Promise<void>;
}

export async function startMetaService(opts: MetaServiceOptions): Promise<MetaServiceHandle> {
  const log = opts.logger;
  const availability = checkStorageAvailability(opts.config, existsSync);
  for (const w of availability.warnings) log.warn(w);
  const config = availability.config;

  const metrics = createMetaMetrics({ processMetrics: opts.processMetrics ?? false });
  const closeHooks: Array<() => void | Promise<void>> = [];
  // §9.3 kvcm_store_tx_duration_seconds{op}: every part reaches the store through this wrapper.
  const store = new InstrumentedMetaStore(opts.store, metrics.storeTxDurationSeconds);
  const redisStore = opts.store instanceof RedisMetaStore ? opts.store : null;
  const instances = new InstanceRegistry(store, config, log.child({ component: 'meta-instances' }), redisStore === null);
  const cluster = redisStore ? createRedisCluster(redisStore, config.nodeId, log, metrics.registry, instances, opts.leaseTtlMs) : null;
  // Bound once reportEvent is registered: every RPC first catches up with the other replicas.
  let catchUp: () => Promise<void> = () => Promise.resolve();
  const deps: MetaServiceDeps = {
    config,
    store,
    logger: log,
    metrics,
    instances,
    cluster,
    nowMs: opts.nowMs ?? Date.now,
    reportOffloadMinBytes: opts.reportOffloadMinBytes,
    onClose: (hook) => {
      closeHooks.push(hook);
    },
  };
  const server = new MetaHttpServer({
    host: config.http.host,
    port: config.http.port,
    maxBodyBytes: config.http.maxBodyBytes,
    logger: log.child({ component: 'meta-http' }),
    metrics,
    internalApiToken: opts.internalApiToken,
    storeAvailable: opts.storeAvailable ?? (redisStore ? () => redisStore.available : undefined),
    beforeRpc: cluster ? () => catchUp() : undefined,
  });

  let closing: Promise<void> | null = null;
  const close = (): Promise<void> => {
    closing ??= (async () => {
      await server.close();
      await cluster?.close().catch((err: unknown) => log.warn({ err }, 'background lease release failed'));
      for (const hook of closeHooks) {
        try {
          await hook();
        } catch (e) {
          log.warn({ err: e }, 'meta close hook failed');
        }
      }
      await opts.store.close();
      metrics.stopLoopMonitor();
      log.info('meta service stopped');
    })();
    return closing;
  };

  let port: number;
  try {
    port = await server.listen();
    await instances.bootstrap(config.bootstrapInstances);
    registerInstanceRpcs(server, deps);
    // ---- MetaService parts: each adds its one registration call here (may be async; it runs
    // before the service reports ready, so startup recovery such as §9.1's CLS_WRITING cleanup
    // belongs inside it). Drain work goes to server.onDrain, flushes to deps.onClose. ----
    // reportEvent first: its `visibility` (§7.10) is what the lookups filter event-report locations with.
    const reporting = registerReportEventRpc(server, deps);
    catchUp = () => reporting.sync.catchUp();
    // Data path (§5.2–§5.5, §6): deletes CLS_WRITING locations before serving (§9.1).
    await registerDataPathRpcs(server, deps, reporting.visibility);
    // ---- end of MetaService parts ----
  } catch (e) {
    await close().catch((err: unknown) => log.warn({ err }, 'meta close after failed start failed'));
    throw e;
  }
  server.markServing();
  log.info({ port, node_id: config.nodeId }, 'meta service serving');
  return { port, server, deps, close };
}
