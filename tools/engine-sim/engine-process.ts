/**
 * A simulated engine as a process, run by `cli.ts` (`node dist/tools/engine-sim/cli.js`): the
 * publisher ranks (EngineSimulator), the control side (EngineControl: leased etcd registration
 * with an incarnation, heartbeats, /health) and the OpenAI endpoint, all on the instance's one
 * business HTTP port. The only module of the simulator that reads process.argv. Test suites that
 * need extra routes on that port (the chaos suite reads true residency) pass `wrapRoutes` rather
 * than copying this file.
 *
 * Readiness: the JSON log line `"msg":"engine simulator ready"` once the sockets are bound, the
 * HTTP port listens and the etcd key is written. Exit codes: 0 after SIGINT/SIGTERM (the lease is
 * revoked so the directory drops the instance at once), 2 for a bad flag (one stderr line), 1 when
 * a socket or etcd cannot be reached at start.
 */
import { createLogger, type Logger } from '../../shared/log/logger.js';
import { ServiceShutdown, configOrExit, type Stoppable } from '../../shared/process/service-main.js';
import { EngineControl, type EngineHttpRoutes } from './engine-control.js';
import { EngineSimulator } from './engine-simulator.js';
import { engineSimHelp, parseEngineSimArgs, type EngineSimConfig } from './engine-sim-flags.js';
import { MetricsRoute, processIdentity } from './metrics-route.js';
import { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { kvEventSourcesAnswer, OpenAiEndpoint, OpenAiServer } from './openai-server.js';
import { RankDispatcher } from './rank-dispatcher.js';
import { ServedModelRegistry } from './served-model-registry.js';

/** A stop that hangs (etcd unreachable for the revoke) must not keep the process alive. */
const STOP_DEADLINE_MS = 5000;

/** What an extra-routes hook gets: the running simulator and the routes it wraps. */
export interface EngineRoutesContext {
  readonly sim: EngineSimulator;
  /** The registered incarnation ("" until registered, or without etcd); vllm/sglang: the exported process start time. */
  incarnationId(): string;
  /** The OpenAI endpoint: delegate to it for every path the hook does not serve. */
  readonly inner: EngineHttpRoutes;
}

export interface EngineProcessOptions {
  /** Routes served on the business HTTP port instead of the plain OpenAI endpoint. */
  readonly wrapRoutes?: (ctx: EngineRoutesContext) => EngineHttpRoutes;
}

async function start(cfg: EngineSimConfig, tokenizer: PromptTokenizer | null, log: Logger, started: Stoppable[], opts: EngineProcessOptions): Promise<void> {
  const sim = await EngineSimulator.start({
    instanceName: cfg.instanceName,
    dpSize: cfg.dpSize,
    blockSize: cfg.blockSize,
    eventPortBase: cfg.eventPortBase,
    replayPortBase: cfg.replayPortBase,
    topic: cfg.topic,
    deviceCapacityBlocks: cfg.deviceCapacityBlocks,
    hostCapacityBlocks: cfg.hostCapacityBlocks,
    host: cfg.host,
    maxMessageBytes: cfg.maxMessageBytes,
    offloadMode: cfg.offloadMode,
    engineKind: cfg.engineKind,
    batchForm: cfg.batchForm,
    replayBufferSteps: cfg.replayBufferSteps,
    replayLayout: cfg.replayLayout,
    slidingWindowTokens: cfg.hybridSlidingWindow,
    logger: log,
  });
  started.push({ name: 'publisher', close: () => sim.close() });

  const dispatcher = new RankDispatcher(sim, cfg.deviceCapacityBlocks, cfg.dropEveryNBatches);
  // cache-identity §6: what /v1/models lists; a request's longest cacheable prompt is one rank's Device.
  const models = new ServedModelRegistry({ ...cfg.servedModels, ownedBy: cfg.engineKind, maxModelLen: cfg.deviceCapacityBlocks * cfg.blockSize });
  // engines.md §6: vLLM/SGLang kinds say where each rank publishes, unless --no_kv_event_sources.
  const sources = cfg.engineKind !== 'xllm' && cfg.kvEventSources ? kvEventSourcesAnswer(sim.eventEndpoints, sim.replayEndpoints, cfg.topic) : null;
  const endpoint = new OpenAiEndpoint({
    engine: dispatcher,
    models,
    tokenizer,
    tokenIntervalMs: cfg.tokenIntervalMs,
    kvEventSources: sources === null ? null : () => sources,
    logger: log.child({ component: 'openai' }),
  });

  let control: EngineControl | null = null;
  const kind = cfg.engineKind;
  const fileIncarnation = kind !== 'xllm' && cfg.processMetrics ? processIdentity() : '';
  // engines.md §5: vLLM and SGLang engines expose their load as /metrics, and never touch etcd.
  const served: EngineHttpRoutes = kind === 'xllm' ? endpoint : new MetricsRoute(kind, dispatcher, cfg.processMetrics, endpoint, models.baseModel);
  const routes: EngineHttpRoutes =
    opts.wrapRoutes === undefined ? served : opts.wrapRoutes({ sim, incarnationId: () => control?.incarnationId ?? fileIncarnation, inner: served });
  if (kind === 'xllm' && cfg.etcdHosts.length > 0) {
    control = await EngineControl.start({
      etcdHosts: cfg.etcdHosts,
      etcdNamespace: cfg.etcdNamespace,
      host: cfg.host,
      httpPort: cfg.httpPort,
      type: cfg.type,
      dpSize: cfg.dpSize,
      directoryUrl: cfg.directoryUrl,
      internalApiToken: cfg.internalApiToken,
      heartbeatIntervalMs: cfg.heartbeatIntervalMs,
      leaseTtlS: cfg.leaseTtlS,
      currentRole: cfg.currentRole,
      incarnationId: cfg.incarnationId ?? undefined,
      httpRoutes: routes,
      // cache-identity §1: an explicit --served_models is registered as `models`; without it the
      // engine serves any name, which is what an absent field (unknown list) says.
      servedModels: models.strict ? () => models.list().map((m) => m.name) : undefined,
      logger: log.child({ component: 'control' }),
    });
    const ctl = control;
    started.push({ name: 'control', close: () => ctl.close() });
    // An adapter loaded or unloaded at run time: the key is written again with the new list.
    if (models.strict) {
      models.onChange(() => {
        ctl.reregister().catch((e: unknown) => log.warn({ err: e instanceof Error ? e.message : String(e) }, 'served models changed; etcd registration not rewritten'));
      });
    }
  } else {
    // No etcd: nobody discovers this engine, but its API and event sockets still serve tests.
    const server = await OpenAiServer.listen({ port: cfg.httpPort, host: cfg.host, endpoint, routes });
    started.push({ name: 'http', close: () => server.close() });
  }

  // Heartbeats carry the load as of their send time: refresh it whenever it changes.
  const refreshLoad = (): void => control?.setLoad(dispatcher.load());
  endpoint.on('request', () => {
    dispatcher.requestStarted();
    refreshLoad();
  });
  for (const ended of ['complete', 'abort'] as const) {
    endpoint.on(ended, () => {
      dispatcher.requestEnded();
      refreshLoad();
    });
  }
  refreshLoad();

  log.info(
    {
      instance: cfg.instanceName,
      engine_kind: kind,
      type: cfg.type,
      incarnation_id: control?.incarnationId ?? null,
      dp_size: cfg.dpSize,
      block_size: cfg.blockSize,
      event_endpoints: sim.eventEndpoints,
      replay_endpoints: sim.replayEndpoints,
      registered: control !== null,
      heartbeats_to: control !== null ? cfg.directoryUrl : null,
      drop_every_n_batches: cfg.dropEveryNBatches,
      served_models: models.list().map((m) => m.name),
      hybrid_sliding_window: cfg.hybridSlidingWindow,
    },
    'engine simulator ready',
  );
}

/** Parses process.argv and runs the engine until SIGINT/SIGTERM. */
export async function runEngineProcess(opts: EngineProcessOptions = {}): Promise<void> {
  const cfg: EngineSimConfig | 'help' = configOrExit(() => parseEngineSimArgs(process.argv.slice(2)));
  if (cfg === 'help') {
    process.stdout.write(engineSimHelp());
    return;
  }
  // Loaded before anything starts: a missing or unparsable tokenizer file is one line and exit 2.
  const tokenizer = configOrExit(() => (cfg.tokenizerDir === '' ? null : PromptTokenizer.load(cfg.tokenizerDir, cfg.chatTemplateFile)));
  const log = createLogger('engine-sim', cfg.logLevel);
  const shutdown = new ServiceShutdown(log, STOP_DEADLINE_MS);
  try {
    await start(cfg, tokenizer, log, shutdown.started, opts);
  } catch (e) {
    console.error(`engine-sim ${cfg.instanceName}: start failed: ${e instanceof Error ? e.message : String(e)}`);
    await shutdown.failStart(e, { instance: cfg.instanceName });
  }
}

