/**
 * The real parts the cluster benchmark routes over (architecture.md):
 *
 *   ClusterEngine ×8 (in process): EngineSimulator (BlockPool, KV events over ZeroMQ)
 *     + PrefillQueue (prefill-cost-model.ts) + OpenAiEndpoint + EngineControl (etcd lease, heartbeats)
 *   etcd (test/helpers/etcd-server.ts) and directory-svc/main.ts as child processes
 *   RouterService replicas (in process, each with its own WatchView stream and view cache)
 *
 * Engines and routers share the benchmark's event loop (starting 4 router processes per policy
 * would cost more than the quick form's whole budget on two cores); the directory, which ingests
 * every KV event, runs in its own process.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseRouterFlags } from '../../shared/config/router-flags.js';
import { silentLogger } from '../../shared/log/logger.js';
import { RouterService } from '../../router-svc/router-service.js';
import { isCandidate } from '../../router-svc/policy/candidates.js';
import { EtcdServer } from '../../test/helpers/etcd-server.js';
import { freePort, freePortRange, waitFor } from '../../test/helpers/ports.js';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { EngineControl } from '../../tools/engine-sim/engine-control.js';
import { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { OpenAiEndpoint } from '../../tools/engine-sim/openai-server.js';
import { benchTokenizer } from './workloads.js';
import { PrefillQueue, type PrefillCostOptions } from '../../tools/engine-sim/prefill-cost-model.js';
import { ServedModelRegistry } from '../../tools/engine-sim/served-model-registry.js';
import type { ModelTokenizers } from '../../shared/tokenize/model-tokenizers.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const NAMESPACE = 'bench-cluster';
const EVENT_PORT_OFFSET = 1;
const REPLAY_PORT_OFFSET = 2;

export interface EngineShape {
  readonly blockSize: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly prefill: PrefillCostOptions;
  readonly heartbeatIntervalMs: number;
  /**
   * cache-identity §1, §6: what the engine serves (base model first, then its adapters), strict
   * (another model is vLLM's 404) and registered in etcd as the instance's `models`; absent: the
   * lenient default (any model, an unknown list), as before.
   */
  readonly servedModels?: readonly string[];
  /** Its model's tokenizer; absent: the bench's Qwen3 (`benchTokenizer`). */
  readonly tokenizer?: PromptTokenizer;
}

/** One simulated engine with the prefill cost model on, registered and heartbeating. */
export class ClusterEngine {
  /** Requests accepted and not answered yet (queued, in prefill, or decoding): the heartbeat's waiting. */
  inFlight = 0;
  private closed = false;

  private constructor(
    readonly sim: EngineSimulator,
    readonly queue: PrefillQueue,
    readonly endpoint: OpenAiEndpoint,
    readonly control: EngineControl,
    /** The engine's prefill cost model (the TTFT oracle reads its true costs). */
    readonly prefill: PrefillCostOptions,
  ) {}

  static async start(etcdAddress: string, directoryHttpUrl: string, shape: EngineShape): Promise<ClusterEngine> {
    const p = await freePortRange(3);
    const sim = await EngineSimulator.start({
      instanceName: `127.0.0.1:${p}`,
      blockSize: shape.blockSize,
      eventPortBase: p + EVENT_PORT_OFFSET,
      replayPortBase: p + REPLAY_PORT_OFFSET,
      deviceCapacityBlocks: shape.deviceCapacityBlocks,
      hostCapacityBlocks: shape.hostCapacityBlocks,
    });
    const queue = new PrefillQueue(shape.prefill);
    // The engines tokenize chat text with the routers' tokenizer, as real engines share the model's.
    const models = shape.servedModels === undefined ? undefined : new ServedModelRegistry({ names: shape.servedModels, strict: true });
    const endpoint = new OpenAiEndpoint({ engine: sim, tokenizer: shape.tokenizer ?? benchTokenizer(), tokenIntervalMs: 0, prefill: queue, ...(models === undefined ? {} : { models }) });
    let control: EngineControl;
    try {
      control = await EngineControl.start({
        etcdHosts: [etcdAddress],
        etcdNamespace: NAMESPACE,
        httpPort: p,
        type: 'DEFAULT',
        directoryUrl: directoryHttpUrl,
        heartbeatIntervalMs: shape.heartbeatIntervalMs,
        leaseTtlS: 10,
        httpRoutes: endpoint,
        ...(models === undefined ? {} : { servedModels: () => models.list().map((m) => m.name) }),
      });
    } catch (e) {
      await sim.close();
      throw e;
    }
    const engine = new ClusterEngine(sim, queue, endpoint, control, shape.prefill);
    // Heartbeats carry the load as of their send time (as the engine CLI does). A request a
    // failed run left behind may end after close(): its load no longer goes anywhere.
    const refresh = (): void => {
      if (engine.closed) return;
      control.setLoad({ waiting_requests_num: engine.inFlight, gpu_cache_usage_perc: sim.rank(0).pool.deviceBlocks / shape.deviceCapacityBlocks });
    };
    endpoint.on('request', () => {
      engine.inFlight++;
      refresh();
    });
    for (const ended of ['complete', 'abort'] as const) {
      endpoint.on(ended, () => {
        engine.inFlight--;
        refresh();
      });
    }
    refresh();
    return engine;
  }

  get name(): string {
    return this.control.name;
  }

  get url(): string {
    return `http://${this.control.name}`;
  }

  /** Both tiers emptied (published as AllBlocksCleared, so every view follows) and counters zeroed. */
  async reset(): Promise<void> {
    await this.sim.rank(0).clear();
    this.queue.resetCounters();
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.control.close();
    await this.sim.close();
  }
}

export class ClusterStack {
  private routersStarted = 0;

  private constructor(
    private readonly etcd: EtcdServer,
    private readonly directory: ServiceProcess,
    private readonly tmp: string,
    readonly directoryGrpc: string,
    readonly directoryHttpUrl: string,
  ) {}

  static async start(blockSize: number): Promise<ClusterStack> {
    const etcd = await EtcdServer.start();
    const tmp = mkdtempSync(join(tmpdir(), 'bench-cluster-'));
    const configFile = join(tmp, 'kv-events.json');
    const discovery = { enabled: true, block_size: blockSize, topic: '', event_port_offset: EVENT_PORT_OFFSET, replay_port_offset: REPLAY_PORT_OFFSET, refresh_interval_ms: 50 };
    writeFileSync(configFile, JSON.stringify({ discovery, replay_timeout_ms: 1000 }));
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const directory = ServiceProcess.spawn({
      name: 'directory',
      entry: 'directory-svc/main.ts',
      cwd: ROOT,
      args: [
        `--etcd_addr=${etcd.address}`,
        `--etcd_namespace=${NAMESPACE}`,
        `--kv_events_config_file=${configFile}`,
        `--grpc_port=${grpcPort}`,
        `--http_port=${httpPort}`,
        '--log_level=warn',
      ],
    });
    const stack = new ClusterStack(etcd, directory, tmp, `127.0.0.1:${grpcPort}`, `http://127.0.0.1:${httpPort}`);
    try {
      await directory.waitForHttp(`${stack.directoryHttpUrl}/health`, 30000);
    } catch (e) {
      await stack.close();
      throw e;
    }
    return stack;
  }

  get etcdAddress(): string {
    return this.etcd.address;
  }

  startEngines(count: number, shape: EngineShape): Promise<ClusterEngine[]> {
    return Promise.all(Array.from({ length: count }, () => ClusterEngine.start(this.etcd.address, this.directoryHttpUrl, shape)));
  }

  /**
   * A router replica with `policy` (and CAR's lambda), HTTP on a free port, with `tokenizers` and
   * `extraFlags` (the TTFT policy's prior, say). Each gets its own router id: replicas share this process, and
   * in-flight load tells routers apart by id.
   */
  async startRouter(
    policy: 'RR' | 'SLO_AWARE' | 'CAR' | 'TTFT',
    lambda = 0.5,
    inflightLoad = true,
    pendingPrefix = true,
    tokenizers?: ModelTokenizers,
    extraFlags: readonly string[] = [],
  ): Promise<RouterService> {
    const parsed = parseRouterFlags([
      `--directory_addr=${this.directoryGrpc}`,
      `--load_balance_policy=${policy}`,
      `--car_prefill_lambda=${lambda}`,
      `--car_inflight_load=${inflightLoad}`,
      `--car_pending_prefix=${pendingPrefix}`,
      ...extraFlags,
    ]);
    if (parsed.kind !== 'flags') throw new Error('unexpected --help');
    const routerId = `bench-router-${++this.routersStarted}`;
    // `tokenizers`: per-model tokenizers (cache-identity §5, what --models_file loads); default one Qwen3 for every model.
    return RouterService.start({ flags: parsed.flags, tokenizer: benchTokenizer(), ...(tokenizers === undefined ? {} : { tokenizers }), logger: silentLogger, host: '127.0.0.1', httpPort: 0, routerId });
  }

  async close(): Promise<void> {
    await this.directory.stop(5000);
    await this.etcd.destroy();
    rmSync(this.tmp, { recursive: true, force: true });
  }
}

/**
 * Until `router`'s view has exactly `engines` as candidates, each stream synchronized, with
 * nothing resident (after a reset; `emptyCaches: false` skips that, and waits for the view's
 * residency to match each engine's pool instead) and no engine reporting waiting requests: the
 * state a run must start from, so no policy inherits the previous run's cache or queues.
 */
export async function untilSettled(router: RouterService, engines: readonly ClusterEngine[], opts: { emptyCaches?: boolean; timeoutMs?: number } = {}): Promise<void> {
  const emptyCaches = opts.emptyCaches ?? true;
  const timeoutMs = opts.timeoutMs ?? 20000;
  const want = engines.map((e) => e.name).sort().join(',');
  await waitFor(
    () => {
      const view = router.view;
      const candidates = view.instances().filter(isCandidate);
      if (candidates.map((i) => i.name).sort().join(',') !== want) return false;
      if (candidates.some((i) => i.load === null || i.load.waitingRequestsNum !== 0)) return false;
      // No decision of an earlier run's routers still in flight: each run starts alone (and a lone
      // router does not take them for other replicas about: claim-order.ts).
      if (candidates.some((i) => i.inflight.length !== 0)) return false;
      for (const e of engines) {
        const streams = view.streamsOf(e.name);
        if (streams.length === 0 || streams.some((s) => !s.synchronized)) return false;
        const pool = e.sim.rank(0).pool;
        const resident = emptyCaches ? 0 : pool.deviceBlocks + pool.hostBlocks;
        if (streams.reduce((n, s) => n + s.deviceBlocks + s.hostBlocks, 0) !== resident) return false;
      }
      return true;
    },
    timeoutMs,
    `router view settled on [${want}] with ${emptyCaches ? 'empty caches' : 'the engines’ residency'} and idle queues`,
  );
}
