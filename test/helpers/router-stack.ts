/**
 * The parts a router test runs against, all real: directory-svc as a child process (discovery over
 * a real etcd, heartbeats on its HTTP port, WatchView/Query on gRPC) and simulated engines in
 * process (EngineSimulator publishing KV events over ZeroMQ, EngineControl registering in etcd and
 * heartbeating, the OpenAI endpoint on the engine's one HTTP port).
 *
 *   EngineControl ──lease PUT──▶ etcd ──watch──▶ directory-svc ──WatchView──▶ router
 *   EngineSimulator ──ZMQ PUB/ROUTER──▶ directory-svc                           │
 *   OpenAiEndpoint (engine HTTP port) ◀────────── proxied /v1/completions ───────┘
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import type { ProtoGrpcType } from '../../proto/generated/kvdirectory.js';
import type { KvDirectoryClient } from '../../proto/generated/kvdirectory/v1/KvDirectory.js';
import { isCandidate } from '../../router-svc/policy/candidates.js';
import type { ViewCache } from '../../router-svc/viewcache/view-cache.js';
import { EngineControl, type EngineType } from '../../tools/engine-sim/engine-control.js';
import { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { OpenAiEndpoint } from '../../tools/engine-sim/openai-server.js';
import { PrefillQueue, type PrefillCostOptions } from '../../tools/engine-sim/prefill-cost-model.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { EtcdServer } from './etcd-server.js';
import { freePort, freePortRange, startOnFreePorts, waitFor } from './ports.js';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));

/** Small blocks and offsets: one free range of 3 ports holds HTTP (p), events (p+1), replay (p+2). */
export const STACK_DISCOVERY = {
  enabled: true,
  block_size: 4,
  topic: '',
  event_port_offset: 1,
  replay_port_offset: 2,
  refresh_interval_ms: 50,
} as const;

/** `node --import tsx <entry>` from the repository root. */
export function spawnService(name: string, entry: string, args: readonly string[]): ServiceProcess {
  return ServiceProcess.spawn({ name, entry, args, cwd: ROOT });
}

interface DirectoryProcessOptions {
  readonly etcdAddress: string;
  readonly namespace: string;
  readonly internalApiToken?: string;
}

/** directory-svc with discovery on a real etcd namespace; MetaService off. */
export class DirectoryProcess {
  private constructor(
    readonly proc: ServiceProcess,
    readonly grpcPort: number,
    readonly httpPort: number,
    private readonly tmp: string,
  ) {}

  static async start(opts: DirectoryProcessOptions): Promise<DirectoryProcess> {
    return startOnFreePorts(() => DirectoryProcess.startOn(opts));
  }

  private static async startOn(opts: DirectoryProcessOptions): Promise<DirectoryProcess> {
    const tmp = mkdtempSync(join(tmpdir(), 'router-stack-'));
    const configFile = join(tmp, 'kv-events.json');
    writeFileSync(configFile, JSON.stringify({ discovery: STACK_DISCOVERY, replay_timeout_ms: 1000 }));
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const proc = spawnService('directory-svc', 'directory-svc/main.ts', [
      `--etcd_addr=${opts.etcdAddress}`,
      `--etcd_namespace=${opts.namespace}`,
      `--kv_events_config_file=${configFile}`,
      `--grpc_port=${grpcPort}`,
      `--http_port=${httpPort}`,
      `--internal_api_token=${opts.internalApiToken ?? ''}`,
      '--lease_lost_heartbeat_timeout_ms=1000',
      '--log_level=warn',
    ]);
    const dir = new DirectoryProcess(proc, grpcPort, httpPort, tmp);
    try {
      await proc.waitForHttp(`${dir.httpUrl}/health`, 20000);
    } catch (e) {
      await dir.close();
      throw e;
    }
    return dir;
  }

  get address(): string {
    return `127.0.0.1:${this.grpcPort}`;
  }

  get httpUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  async close(): Promise<void> {
    await this.proc.stop();
    rmSync(this.tmp, { recursive: true, force: true });
  }
}

/** router-svc as a real process on a free port; `start` resolves once `GET /ready` answers 200. */
export class RouterProcess {
  protected constructor(
    readonly proc: ServiceProcess,
    readonly url: string,
  ) {}

  /** `args` go after `--directory_addr` and `--http_port`. */
  static async start(directoryAddr: string, args: readonly string[] = [], opts: { name?: string; readyTimeoutMs?: number } = {}): Promise<RouterProcess> {
    return startOnFreePorts(async () => {
      const router = await RouterProcess.spawn(directoryAddr, args, opts.name);
      await router.proc.waitForHttp(`${router.url}/ready`, opts.readyTimeoutMs ?? 30000);
      return router;
    });
  }

  /** The process started, not waited for (a test that watches it come up). */
  static async spawn(directoryAddr: string, args: readonly string[] = [], name = 'router-svc'): Promise<RouterProcess> {
    const port = await freePort();
    const proc = spawnService(name, 'router-svc/main.ts', [`--directory_addr=${directoryAddr}`, `--http_port=${port}`, ...args]);
    return new RouterProcess(proc, `http://127.0.0.1:${port}`);
  }

  async stop(): Promise<number | null> {
    return (await this.proc.stop()).code;
  }
}

/** A heartbeat period no test outlasts: `startQuietEngines`' loads stay as first reported. */
const QUIET_HEARTBEAT_MS = 3_600_000;

/**
 * What every router suite starts first: a real etcd and a directory-svc discovering engines in
 * one etcd namespace; engines and routers join it with `startEngine` / `startRouter`.
 */
export class RouterTestStack {
  private constructor(
    readonly etcd: EtcdServer,
    readonly directory: DirectoryProcess,
    readonly namespace: string,
  ) {}

  static async start(namespace: string, opts: { internalApiToken?: string } = {}): Promise<RouterTestStack> {
    const etcd = await EtcdServer.start();
    try {
      const directory = await DirectoryProcess.start({ etcdAddress: etcd.address, namespace, internalApiToken: opts.internalApiToken });
      return new RouterTestStack(etcd, directory, namespace);
    } catch (e) {
      await etcd.destroy();
      throw e;
    }
  }

  /** A simulated engine registered in this stack's namespace, heartbeating to its directory. */
  startEngine(opts: Omit<SimEngineOptions, 'etcdAddress' | 'namespace' | 'directoryHttpUrl'> = {}): Promise<SimEngine> {
    return SimEngine.start({ ...opts, etcdAddress: this.etcd.address, namespace: this.namespace, directoryHttpUrl: this.directory.httpUrl });
  }

  /**
   * Engines whose one accepted heartbeat fixes their reported load for the test's length (they
   * heartbeat again only far out), so every router sees the same, stale queues.
   */
  async startQuietEngines(opts: readonly Omit<SimEngineOptions, 'etcdAddress' | 'namespace' | 'directoryHttpUrl' | 'heartbeatIntervalMs'>[]): Promise<SimEngine[]> {
    const engines: SimEngine[] = [];
    for (const o of opts) engines.push(await this.startEngine({ ...o, heartbeatIntervalMs: QUIET_HEARTBEAT_MS }));
    // One accepted heartbeat each (the first may precede the directory seeing the etcd key).
    for (const e of engines) await waitFor(async () => (await e.control.heartbeatNow()) === 200, 20000, `${e.name} heartbeat accepted`);
    return engines;
  }

  /** `count` router processes with the same `args`, each waited for until `ready` holds (failing at once if one exits). */
  async spawnRouters(count: number, args: readonly string[], ready: (router: RouterProcess) => Promise<boolean>, what: string): Promise<RouterProcess[]> {
    const routers: RouterProcess[] = [];
    for (let i = 0; i < count; i++) routers.push(await RouterProcess.spawn(this.directory.address, args, `router-${i + 1}`));
    for (const r of routers) {
      await waitFor(
        async () => {
          if (!r.proc.isRunning) throw new Error(`router exited:\n${r.proc.tail()}`);
          return ready(r);
        },
        30000,
        what,
      );
    }
    return routers;
  }

  /** A router-svc process watching this stack's directory, once `/ready`. */
  startRouter(args: readonly string[] = [], opts: { name?: string; readyTimeoutMs?: number } = {}): Promise<RouterProcess> {
    return RouterProcess.start(this.directory.address, args, opts);
  }

  async close(): Promise<void> {
    await this.directory.close();
    await this.etcd.destroy();
  }
}

export interface SimEngineOptions {
  etcdAddress: string;
  namespace: string;
  directoryHttpUrl: string;
  internalApiToken?: string;
  type?: EngineType;
  tokenIntervalMs?: number;
  waiting?: number;
  /** Default 100 ms; a test that needs loads to stay put sets it far out and calls heartbeatNow. */
  heartbeatIntervalMs?: number;
  /** The model's tokenizer (tokenization.md §3: the same code and files as the router's). */
  tokenizer?: PromptTokenizer | null;
  /** A FIFO prefill queue with this cost model (prefill-cost-model.ts); absent: admitted at once. */
  prefill?: PrefillCostOptions;
}

/** One simulated engine: KV ranks, control side and OpenAI endpoint on one port range. */
export class SimEngine {
  private constructor(
    readonly sim: EngineSimulator,
    readonly control: EngineControl,
    readonly openai: OpenAiEndpoint,
  ) {}

  static async start(opts: SimEngineOptions): Promise<SimEngine> {
    const p = await freePortRange(3);
    const name = `127.0.0.1:${p}`;
    const sim = await EngineSimulator.start({
      instanceName: name,
      blockSize: STACK_DISCOVERY.block_size,
      eventPortBase: p + STACK_DISCOVERY.event_port_offset,
      replayPortBase: p + STACK_DISCOVERY.replay_port_offset,
      deviceCapacityBlocks: 4096,
    });
    const openai = new OpenAiEndpoint({
      engine: sim,
      tokenizer: opts.tokenizer ?? null,
      tokenIntervalMs: opts.tokenIntervalMs ?? 1,
      prefill: opts.prefill === undefined ? null : new PrefillQueue(opts.prefill),
    });
    let control: EngineControl;
    try {
      control = await EngineControl.start({
        etcdHosts: [opts.etcdAddress],
        etcdNamespace: opts.namespace,
        httpPort: p,
        type: opts.type ?? 'DEFAULT',
        directoryUrl: opts.directoryHttpUrl,
        internalApiToken: opts.internalApiToken,
        heartbeatIntervalMs: opts.heartbeatIntervalMs ?? 100,
        leaseTtlS: 10,
        httpRoutes: openai,
      });
    } catch (e) {
      await sim.close();
      throw e;
    }
    control.setLoad({ waiting_requests_num: opts.waiting ?? 0, gpu_cache_usage_perc: 0 });
    return new SimEngine(sim, control, openai);
  }

  get name(): string {
    return this.control.name;
  }

  async close(): Promise<void> {
    await this.control.close();
    await this.sim.close();
  }
}

/** The directory's gRPC Query answer (the directory's own wire shape of it). */
export type WireQueryAnswer = WireQueryResponse;

/** The directory's gRPC Query, for comparing with the router's HTTP query endpoint. */
export class DirectoryQueryClient {
  private readonly client: KvDirectoryClient;

  constructor(address: string) {
    const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as ProtoGrpcType;
    this.client = new loaded.kvdirectory.v1.KvDirectory(address, grpc.credentials.createInsecure());
  }

  query(tokenIds: number[]): Promise<WireQueryAnswer> {
    return new Promise((resolve, reject) => this.client.Query({ token_ids: tokenIds }, (e, r) => (e ? reject(e) : resolve(r!))));
  }

  close(): void {
    this.client.close();
  }
}

/**
 * Until the router's view has exactly `names` as routing candidates, each with synchronized
 * streams. Engines closed by an earlier test leave the view only once the directory has probed
 * them (discovery.md "Instance states"), so a test waits for its own set before routing.
 */
export async function untilCandidates(view: ViewCache, names: readonly string[], timeoutMs = 20000): Promise<void> {
  const want = [...names].sort().join(',');
  await waitFor(
    () => {
      const candidates = view.instances().filter(isCandidate).map((i) => i.name);
      if (candidates.sort().join(',') !== want) return false;
      return names.every((n) => {
        const streams = view.streamsOf(n);
        return streams.length > 0 && streams.every((s) => s.synchronized);
      });
    },
    timeoutMs,
    `exactly [${want}] routable in the router's view`,
  );
}
