/**
 * A vLLM/SGLang-kind fleet as real processes for the engines-file suites (engines.md §4–§5):
 * simulated engines (`tools/engine-sim/cli.ts --engine_kind=...`, no etcd, `/health` and
 * `/metrics`), the engines file that lists them, and a directory-svc reading it, observed over
 * its gRPC diagnostics (ListInstances, ListStreams, Query).
 *
 *   SimProcess (HTTP p: OpenAI, /health, /metrics; PUB p+1; ROUTER p+2)
 *        ▲ scrapes                ▲ SUB / DEALER
 *   directory-svc --engines_file=<tmp>/engines.json ──gRPC──▶ FleetDirectory (this helper)
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type * as grpc from '@grpc/grpc-js';
import type { WireListStreamsResponse, WireQueryResponse } from '../../directory-svc/grpc/kvdirectory-wire.js';
import type { WireListInstancesResponse, WireViewInstance } from '../../shared/view/view-wire.js';
import { connectKvDirectory } from './kv-directory-client.js';
import { freePort, freePortRange, startOnFreePorts } from './ports.js';
import { ServiceProcess } from '../../shared/process/service-process.js';

export const FLEET_BLOCK_SIZE = 4;

/** Where and how a simulated engine runs (defaults: 127.0.0.1 on a free port, one rank). */
export interface SimOptions {
  readonly kind?: 'vllm' | 'sglang';
  readonly args?: readonly string[];
  /** `--host`: the loopback address it binds (engines.md §6: several engines on one port). */
  readonly host?: string;
  /** The HTTP port; default a free range of 1 + 2 × dp_size ports on 127.0.0.1. */
  readonly port?: number;
  readonly dpSize?: number;
  /** Rank r publishes on port + eventOffset + r (default 1) and replays on port + eventOffset + dp_size + r. */
  readonly eventOffset?: number;
  /** `--device_capacity_blocks` per rank (default 4096): small to make an engine evict. */
  readonly deviceCapacityBlocks?: number;
}

/**
 * One simulated engine process on ports p (HTTP), p+1.. (events, one per rank), then the replay
 * ports; with the default single rank: p, p+1, p+2.
 */
export class SimProcess {
  /** The running process (replaced by `restart`). */
  proc!: ServiceProcess;

  private constructor(
    readonly name: string,
    readonly port: number,
    readonly kind: 'vllm' | 'sglang',
    readonly host: string,
    readonly dpSize: number,
    readonly eventOffset: number,
    private readonly deviceCapacityBlocks: number,
    private readonly extraArgs: readonly string[],
  ) {}

  static async start(name: string, opts: SimOptions = {}): Promise<SimProcess> {
    return opts.port === undefined ? startOnFreePorts(() => SimProcess.startOn(name, opts)) : SimProcess.startOn(name, opts);
  }

  private static async startOn(name: string, opts: SimOptions): Promise<SimProcess> {
    const dpSize = opts.dpSize ?? 1;
    const eventOffset = opts.eventOffset ?? 1;
    const port = opts.port ?? (await freePortRange(eventOffset + 2 * dpSize));
    const sim = new SimProcess(name, port, opts.kind ?? 'vllm', opts.host ?? '127.0.0.1', dpSize, eventOffset, opts.deviceCapacityBlocks ?? 4096, opts.args ?? []);
    sim.proc = sim.spawn();
    await sim.ready();
    return sim;
  }

  private spawn(): ServiceProcess {
    return ServiceProcess.spawn({
      name: `engine ${this.name}`,
      entry: 'tools/engine-sim/cli.ts',
      args: [
        `--engine_kind=${this.kind}`,
        `--name=127.0.0.1:${this.port}`,
        ...(this.host === '127.0.0.1' ? [] : [`--host=${this.host}`]),
        `--dp_size=${this.dpSize}`,
        `--event_port_offset=${this.eventOffset}`,
        `--replay_port_offset=${this.eventOffset + this.dpSize}`,
        `--block_size=${FLEET_BLOCK_SIZE}`,
        `--device_capacity_blocks=${this.deviceCapacityBlocks}`,
        ...this.extraArgs,
      ],
    });
  }

  /** Its engines-file entry. */
  entry(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      name: this.name,
      url: this.url,
      kind: this.kind,
      ...(this.dpSize === 1 ? {} : { dp_size: this.dpSize }),
      event_endpoint: `tcp://${this.host}:${this.port + this.eventOffset}`,
      replay_endpoint: `tcp://${this.host}:${this.port + this.eventOffset + this.dpSize}`,
      block_size: FLEET_BLOCK_SIZE,
      ...over,
    };
  }

  get url(): string {
    return `http://${this.host}:${this.port}`;
  }

  /** The instance name a DNS entry gives it (engines.md §6). */
  get address(): string {
    return `${this.host}:${this.port}`;
  }

  /** A new process on the same ports (its `process_start_time_seconds` differs); the old one is killed first. */
  async restart(): Promise<void> {
    await this.proc.kill();
    this.proc = this.spawn();
    await this.ready();
  }

  /** One completion of `tokens` (the prompt becomes resident and is published as KV events). */
  async complete(tokens: readonly number[], extra: Record<string, unknown> = {}): Promise<Response> {
    return fetch(`${this.url}/v1/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ prompt: tokens, max_tokens: 1, ...extra }),
    });
  }

  async metricsText(): Promise<string> {
    return (await fetch(`${this.url}/metrics`)).text();
  }

  private async ready(): Promise<void> {
    await this.proc.waitForLog((l) => l['msg'] === 'engine simulator ready', 30000, 'engine ready');
  }
}

/** `etcdAddr` '' runs it without etcd (`--etcd_addr=`); default a free port where no etcd runs. */
interface FleetDirectoryOptions {
  readonly refreshIntervalMs?: number;
  readonly args?: readonly string[];
  readonly etcdAddr?: string;
}

type WireStreamRow = WireListStreamsResponse['streams'][number];
type WireMatchRow = WireQueryResponse['matches'][number];

type Unary<Req, Res> = (req: Req, cb: (e: grpc.ServiceError | null, r: Res) => void) => void;
interface FleetClient extends grpc.Client {
  ListInstances: Unary<Record<string, never>, WireListInstancesResponse>;
  ListStreams: Unary<Record<string, never>, WireListStreamsResponse>;
  Query: Unary<{ token_ids: number[]; model?: string; cache_salt?: string }, WireQueryResponse>;
}

/** directory-svc with `--engines_file` (no etcd running: the watch just retries) and its gRPC client. */
export class FleetDirectory {
  private constructor(
    readonly proc: ServiceProcess,
    readonly grpcPort: number,
    readonly httpPort: number,
    readonly enginesFile: string,
    private readonly tmp: string,
    private readonly client: FleetClient,
  ) {}

  static async start(entries: readonly unknown[], opts: FleetDirectoryOptions = {}): Promise<FleetDirectory> {
    return startOnFreePorts(() => FleetDirectory.startOn(entries, opts));
  }

  private static async startOn(entries: readonly unknown[], opts: FleetDirectoryOptions): Promise<FleetDirectory> {
    const tmp = mkdtempSync(join(tmpdir(), 'engines-fleet-'));
    const enginesFile = join(tmp, 'engines.json');
    writeFileSync(enginesFile, JSON.stringify({ engines: entries }));
    const kvEvents = join(tmp, 'kv-events.json');
    writeFileSync(kvEvents, JSON.stringify({ replay_timeout_ms: 1000, resync_interval_ms: 0 }));
    const [grpcPort, httpPort, etcdPort] = [await freePort(), await freePort(), await freePort()];
    const proc = ServiceProcess.spawn({
      name: 'directory',
      entry: 'directory-svc/main.ts',
      args: [
        `--engines_file=${enginesFile}`,
        `--engines_refresh_interval_ms=${opts.refreshIntervalMs ?? 100}`,
        `--kv_events_config_file=${kvEvents}`,
        `--etcd_addr=${opts.etcdAddr ?? `127.0.0.1:${etcdPort}`}`,
        `--grpc_port=${grpcPort}`,
        `--http_port=${httpPort}`,
        '--instance_delete_probe_attempts=2',
        '--instance_delete_probe_timeout_ms=300',
        '--log_level=info',
        ...(opts.args ?? []),
      ],
    });
    const client = connectKvDirectory<FleetClient>(grpcPort);
    const dir = new FleetDirectory(proc, grpcPort, httpPort, enginesFile, tmp, client);
    try {
      await proc.waitForHttp(`http://127.0.0.1:${httpPort}/health`, 30000);
    } catch (e) {
      await dir.close();
      throw e;
    }
    return dir;
  }

  writeEngines(entries: readonly unknown[]): void {
    writeFileSync(this.enginesFile, JSON.stringify({ engines: entries }));
  }

  writeRaw(text: string): void {
    writeFileSync(this.enginesFile, text);
  }

  async instances(): Promise<WireViewInstance[]> {
    return (await this.listInstances()).instances;
  }

  /** The whole `ListInstances` answer (etcd_connected, etcd_disabled). */
  listInstances(): Promise<WireListInstancesResponse> {
    return this.call<WireListInstancesResponse>((cb) => this.client.ListInstances({}, cb));
  }

  async instance(name: string): Promise<WireViewInstance | undefined> {
    return (await this.instances()).find((i) => i.name === name);
  }

  async streams(name?: string): Promise<WireStreamRow[]> {
    const all = (await this.call<WireListStreamsResponse>((cb) => this.client.ListStreams({}, cb))).streams;
    return name === undefined ? all : all.filter((s) => s.instance_name === name);
  }

  async matches(tokens: readonly number[], name: string): Promise<WireMatchRow[]> {
    const r = await this.call<WireQueryResponse>((cb) => this.client.Query({ token_ids: [...tokens] }, cb));
    return r.matches.filter((m) => m.instance_name === name);
  }

  /** Query under a request identity (cache-identity §2); rejects with the gRPC error (NOT_FOUND, INVALID_ARGUMENT). */
  async query(tokens: readonly number[], identity: { model?: string; cache_salt?: string } = {}): Promise<WireQueryResponse> {
    return this.call<WireQueryResponse>((cb) => this.client.Query({ token_ids: [...tokens], ...identity }, cb));
  }

  /** cache-identity §1: an instance's served models from ListInstances as `name` / `name<parent`; null = unknown or absent. */
  async models(name: string): Promise<string[] | null> {
    const models = (await this.instance(name))?.models;
    return models == null ? null : models.data.map((m) => (m.parent === '' ? m.name : `${m.name}<${m.parent}`));
  }

  /** The directory's own `GET /metrics` text. */
  async metricsText(): Promise<string> {
    return (await fetch(`http://127.0.0.1:${this.httpPort}/metrics`)).text();
  }

  async close(): Promise<void> {
    this.client.close();
    await this.proc.stop();
    rmSync(this.tmp, { recursive: true, force: true });
  }

  private call<T>(fn: (cb: (e: grpc.ServiceError | null, r: T) => void) => void): Promise<T> {
    return new Promise((resolve, reject) => fn((e, r) => (e ? reject(e) : resolve(r))));
  }
}
