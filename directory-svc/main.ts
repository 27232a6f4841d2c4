/**
 * directory-svc entry point (`node dist/directory-svc/main.js`, or without a build
 * `node --import tsx directory-svc/main.ts`). The only module that reads process.argv and
 * process.env, and the only one that wires the parts together (architecture.md):
 *
 *   flags → kv-events config → engines file → Directory (static stream subscribers) → discovery
 *   (etcd watch, engines-file scrapers, instance table, stream reconciler) → gRPC (KvDirectory,
 *   health, reflection) → HTTP (heartbeat, health, metrics). The MetaService is meta-svc's, a
 *   process of its own.
 *
 * Exit codes: 0 after a clean SIGINT/SIGTERM stop; 2 for a bad flag or config file, with exactly
 * one line on stderr naming the field; 1 when a listener cannot start or a stop hangs.
 */
import { ConfigError, isConfigError } from '../shared/config/config-error.js';
import { directoryHelp, parseDirectoryFlags, type DirectoryFlags } from '../shared/config/directory-flags.js';
import {
  DEFAULT_MAX_CONCURRENT_RECOVERIES,
  DEFAULT_STREAM_LIMITS,
  readKvEventsConfigFile,
  validateKvEventsConfig,
  type KvEventsConfig,
} from '../shared/config/kv-events-config.js';
import { EnginesSource } from './engines/engines-source.js';
import { createLogger, type Logger } from '../shared/log/logger.js';
import { createMetricsRegistry } from '../shared/metrics/metrics-registry.js';
import { ServiceShutdown, configOrExit } from '../shared/process/service-main.js';
import type { GrpcServerTls } from '../shared/security/grpc-tls.js';
import { readServerTls } from '../shared/security/tls-files.js';
import { Directory, type DirectoryStreamFactory } from './directory.js';
import { DirectoryGrpcServer } from './grpc/directory-grpc-server.js';
import { DiscoveryService } from './discovery/discovery-service.js';
import { InflightService } from './inflight/inflight-service.js';
import { DirectoryHttpServer } from './http/directory-http-server.js';
import { StreamMetrics } from './metrics/stream-metrics.js';
import { RecoveryAdmission } from './recovery/recovery-admission.js';
import { StreamSubscriber } from './subscription/stream-subscriber.js';
import { ResidencyGroups } from '../shared/index/residency-groups.js';
import { InstanceListing } from './view/instance-listing.js';
import { ViewPublisher } from './view/view-publisher.js';
import { registerViewMetrics } from './view/view-metrics.js';

/** A stop that takes longer than this exits 1 rather than hanging (kvcm-meta §9.3: within 10 s). */
const STOP_DEADLINE_MS = 10000;


/** Flags and config, or the one line to print before exiting 2. */
function loadStartupConfig(
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): { flags: DirectoryFlags; kvEvents: KvEventsConfig | null; engines: EnginesSource | null; grpcTls: GrpcServerTls | null } | 'help' {
  const parsed = parseDirectoryFlags(argv, env);
  if (parsed.kind === 'help') return 'help';
  const flags = parsed.flags;
  let kvEvents: KvEventsConfig | null;
  try {
    kvEvents = readKvEventsConfigFile(flags.kvEventsConfigFile);
  } catch (e) {
    if (!isConfigError(e)) throw e;
    // One line naming both the flag and the field: `invalid --kv_events_config_file: streams[2].endpoint: ...`.
    throw new ConfigError('--kv_events_config_file', e.message, `invalid --kv_events_config_file: ${e.message}`);
  }
  let engines: EnginesSource | null = null;
  if (flags.enginesFile !== '') {
    try {
      engines = EnginesSource.open({
        path: flags.enginesFile,
        refreshIntervalMs: flags.enginesRefreshIntervalMs,
        failedProbesToSuspect: flags.instanceDeleteProbeAttempts,
        requestTimeoutMs: flags.instanceDeleteProbeTimeoutMs,
        modelsRefreshMs: flags.enginesModelsRefreshMs,
        dnsRefreshMs: flags.enginesDnsRefreshMs,
        dnsServer: flags.enginesDnsServer === '' ? null : flags.enginesDnsServer,
        reservedNames: new Set((kvEvents?.streams ?? []).map((s) => s.instanceName)),
      });
    } catch (e) {
      if (!isConfigError(e)) throw e;
      throw new ConfigError('--engines_file', e.message, `invalid --engines_file: ${e.message}`);
    }
    // engines.md §4: the file works without a kv-events config; its streams then use the §9 defaults.
    kvEvents ??= validateKvEventsConfig({});
  }
  // The PEM files are read (and loaded once) now, so a bad path or pair is exit 2, not a failed bind.
  return { flags, kvEvents, engines, grpcTls: readServerTls(flags) };
}

/** `discovered`: streams come from etcd discovery or the engines file (not from static entries). */
function buildDirectory(kvEvents: KvEventsConfig | null, discovered: boolean, log: Logger, view: ViewPublisher, metrics: StreamMetrics): Directory {
  // Who is told about every stream, in this order, from its opening to its close: the view
  // stream (architecture.md "The view stream": every change the subscriber pushes becomes a
  // delta) and the §10 metrics (its series; values are read at scrape time).
  const trackers = [view, metrics];
  // One admission instance for all streams: max_concurrent_recoveries is a directory-wide cap.
  const recoveryAdmission = new RecoveryAdmission(kvEvents?.maxConcurrentRecoveries ?? DEFAULT_MAX_CONCURRENT_RECOVERIES);
  // One residency group per (block_size, hash_seed) for all streams: the §8 query view.
  const residencyGroups = new ResidencyGroups();
  const createStream: DirectoryStreamFactory = (cfg, limits) =>
    StreamSubscriber.create(cfg, limits, {
      logger: log.child({ component: 'stream', instance: cfg.instanceName, dp_rank: cfg.dpRank }),
      recoveryAdmission,
      residencyGroups,
    });
  if (kvEvents === null) {
    // routing.md: no directory means zero hit ratios, with one warning at startup.
    log.warn('--kv_events_config_file is empty: directory disabled, Query answers zero matches and routers get no cache credit');
    return Directory.disabled(createStream, DEFAULT_STREAM_LIMITS, log.child({ component: 'directory' }), trackers);
  }
  return new Directory({
    enabled: true,
    streamSource: discovered ? 'discovery' : 'static',
    maxStreams: kvEvents.maxStreams,
    limits: kvEvents.limits,
    createStream,
    trackers,
    logger: log.child({ component: 'directory' }),
  });
}

async function run(): Promise<void> {
  const startup = configOrExit(() => loadStartupConfig(process.argv.slice(2), process.env));
  if (startup === 'help') {
    process.stdout.write(directoryHelp());
    return;
  }
  const { flags, kvEvents, engines, grpcTls } = startup;
  const log = createLogger('directory-svc', flags.logLevel);
  if (flags.internalApiToken !== '' && grpcTls === null) {
    log.warn('--internal_api_token is set but gRPC is plaintext: the token crosses the network readable; set --grpc_tls_cert/--grpc_tls_key');
  }
  const shutdown = new ServiceShutdown(log, STOP_DEADLINE_MS);
  const started = shutdown.started;

  try {
    // One registry for GET /metrics on --http_port: process, discovery and per-stream metrics.
    const registry = createMetricsRegistry();
    const viewPublisher = new ViewPublisher({ logger: log.child({ component: 'view' }) });
    const discovered = kvEvents?.discovery != null || engines !== null;
    const directory = buildDirectory(kvEvents, discovered, log, viewPublisher, new StreamMetrics(registry));
    started.push({ name: 'directory', close: () => directory.close() });
    if (kvEvents !== null) {
      for (const s of kvEvents.streams) await directory.addStream(s);
    }
    // discovery.md: the etcd watch and the instance table always run (instances and load matter
    // for routing even without KV streams); streams are planned only with discovery.enabled.
    const discovery = DiscoveryService.start({
      flags,
      discovery: kvEvents?.discovery ?? null,
      maxStreams: kvEvents?.maxStreams ?? 0,
      streams: kvEvents?.discovery?.enabled === true || engines !== null ? directory : null,
      ...(engines !== null ? { engines: { identity: (name: string) => engines.identity(name), refreshIntervalMs: flags.enginesRefreshIntervalMs } } : {}),
      registry,
      logger: log.child({ component: 'discovery' }),
    });
    started.push({ name: 'discovery', close: () => discovery.close() });
    if (engines !== null) {
      engines.registerMetrics(registry);
      engines.start(discovery.enginesSink(), log.child({ component: 'engines' }));
      // Closed before discovery (started closes in reverse): no scrape lands in a closed table.
      started.push({ name: 'engines', close: () => engines.close() });
    }
    viewPublisher.attachInstanceTable(discovery);
    // routing.md "In-flight load": routers' decisions folded into the view per instance.
    const inflight = new InflightService(discovery);
    started.push({ name: 'inflight', close: async () => inflight.close() });
    viewPublisher.attachInflight(inflight);
    // ListInstances reads the table and shares at call time; the view publisher is not involved.
    const instanceListing = new InstanceListing(discovery, inflight);
    registerViewMetrics(registry, viewPublisher);

    const grpcServer = await DirectoryGrpcServer.start({
      port: flags.grpcPort,
      directory,
      view: viewPublisher,
      instances: instanceListing,
      inflight,
      // cache-identity §2: Query's `model` is resolved against the table's served-model lists.
      servedModels: () => discovery.instances(),
      internalApiToken: flags.internalApiToken,
      tls: grpcTls,
      logger: log.child({ component: 'grpc' }),
    });
    started.push({ name: 'grpc', close: () => grpcServer.close() });
    // Pushed after grpc so it closes first: ending the WatchView streams lets the gRPC shutdown be graceful.
    started.push({ name: 'view', close: async () => viewPublisher.close() });

    // Heartbeats, /health and /metrics (discovery.md "Heartbeats").
    const httpServer = await DirectoryHttpServer.start({
      port: flags.httpPort,
      internalApiToken: flags.internalApiToken,
      heartbeats: discovery,
      registry,
      logger: log.child({ component: 'http' }),
      health: () => ({ etcd_connected: discovery.etcdConnected, etcd_enabled: discovery.etcdEnabled, instances: discovery.instances().length }),
    });
    started.push({ name: 'http', close: () => httpServer.close() });

    log.info(
      {
        grpc_port: grpcServer.port,
        http_port: httpServer.port,
        directory_enabled: directory.enabled,
        streams: directory.streamCount,
        stream_source: kvEvents === null ? '' : discovered ? 'discovery' : 'static',
        engines_file: engines === null ? '' : flags.enginesFile,
        etcd: flags.etcdAddr.length === 0 ? 'not used' : flags.etcdAddr.map((h) => `${h.host}:${h.port}`).join(','),
      },
      'directory-svc started',
    );
  } catch (e) {
    await shutdown.failStart(e);
  }
}

void run();
