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
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import * as grpc from '@grpc/grpc-js';
import type { WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import { loadKvDirectoryPackage } from '../../shared/view/kvdirectory-proto.js';
import { isCandidate } from '../../router-svc/policy/candidates.js';
import type { ViewCache } from '../../router-svc/viewcache/view-cache.js';
import { EngineControl, type EngineType } from '../../tools/engine-sim/engine-control.js';
import { EngineSimulator } from '../../tools/engine-sim/engine-simulator.js';
import { OpenAiEndpoint } from '../../tools/engine-sim/openai-server.js';
import type { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import { freePort, freePortRange, waitFor } from './ports.js';

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

/** A child process with its output kept for failure messages. */
export class ServiceProcess {
  private output = '';
  readonly exited: Promise<number | null>;

  constructor(readonly child: ChildProcess) {
    child.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  get log(): string {
    return this.output;
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null;
  }

  /** SIGTERM; resolves with the exit code (SIGKILL after 10 s). */
  async stop(): Promise<number | null> {
    if (this.running) this.child.kill('SIGTERM');
    const timer = setTimeout(() => this.running && this.child.kill('SIGKILL'), 10000);
    const code = await this.exited;
    clearTimeout(timer);
    return code;
  }

  async kill(): Promise<void> {
    if (this.running) this.child.kill('SIGKILL');
    await this.exited;
  }
}

/** Until `url` answers 200; a process that exits first fails with its output. */
export async function untilAnswering(proc: ServiceProcess, url: string, name: string, timeoutMs: number): Promise<void> {
  await waitFor(
    async () => {
      if (!proc.running) throw new Error(`${name} exited:\n${proc.log}`);
      const res = await fetch(url).catch(() => null);
      return res !== null && res.status === 200;
    },
    timeoutMs,
    `${name} ${new URL(url).pathname}`,
  );
}

export function spawnTs(script: string, args: readonly string[]): ServiceProcess {
  return new ServiceProcess(spawn(process.execPath, ['--import', 'tsx', script, ...args], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] }));
}

/** directory-svc with discovery on a real etcd namespace; MetaService off. */
export class DirectoryProcess {
  private constructor(
    readonly proc: ServiceProcess,
    readonly grpcPort: number,
    readonly httpPort: number,
    private readonly tmp: string,
  ) {}

  static async start(opts: { etcdAddress: string; namespace: string; internalApiToken?: string }): Promise<DirectoryProcess> {
    const tmp = mkdtempSync(join(tmpdir(), 'router-stack-'));
    const configFile = join(tmp, 'kv-events.json');
    writeFileSync(configFile, JSON.stringify({ discovery: STACK_DISCOVERY, replay_timeout_ms: 1000 }));
    const grpcPort = await freePort();
    const httpPort = await freePort();
    const proc = spawnTs('directory-svc/main.ts', [
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
      await untilAnswering(proc, `${dir.httpUrl}/health`, 'directory-svc', 20000);
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

/** One simulated engine: KV ranks, control side and OpenAI endpoint on one port range. */
export class SimEngine {
  private constructor(
    readonly sim: EngineSimulator,
    readonly control: EngineControl,
    readonly openai: OpenAiEndpoint,
  ) {}

  static async start(opts: {
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
  }): Promise<SimEngine> {
    const p = await freePortRange(3);
    const name = `127.0.0.1:${p}`;
    const sim = await EngineSimulator.start({
      instanceName: name,
      blockSize: STACK_DISCOVERY.block_size,
      eventPortBase: p + STACK_DISCOVERY.event_port_offset,
      replayPortBase: p + STACK_DISCOVERY.replay_port_offset,
      deviceCapacityBlocks: 4096,
    });
    const openai = new OpenAiEndpoint({ engine: sim, tokenizer: opts.tokenizer ?? null, tokenIntervalMs: opts.tokenIntervalMs ?? 1 });
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

type QueryFn = (req: { token_ids: number[] }, cb: (e: grpc.ServiceError | null, r: WireQueryAnswer) => void) => void;

/** The directory's gRPC Query, for comparing with the router's HTTP query endpoint. */
export class DirectoryQueryClient {
  private readonly client: grpc.Client & { Query: QueryFn };

  constructor(address: string) {
    const loaded = grpc.loadPackageDefinition(loadKvDirectoryPackage()) as unknown as {
      kvdirectory: { v1: { KvDirectory: grpc.ServiceClientConstructor } };
    };
    this.client = new loaded.kvdirectory.v1.KvDirectory(address, grpc.credentials.createInsecure()) as unknown as grpc.Client & { Query: QueryFn };
  }

  query(tokenIds: number[]): Promise<WireQueryAnswer> {
    return new Promise((resolve, reject) => this.client.Query({ token_ids: tokenIds }, (e, r) => (e ? reject(e) : resolve(r))));
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
