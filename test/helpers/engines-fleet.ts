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
import { freePort, freePortRange } from './ports.js';
import { ServiceProcess } from '../../shared/process/service-process.js';

export const FLEET_BLOCK_SIZE = 4;

/** One simulated engine process on ports p (HTTP), p+1 (events), p+2 (replay). */
export class SimProcess {
  private constructor(
    readonly name: string,
    readonly port: number,
    readonly kind: 'vllm' | 'sglang',
    private readonly extraArgs: readonly string[],
    public proc: ServiceProcess,
  ) {}

  static async start(name: string, opts: { kind?: 'vllm' | 'sglang'; args?: readonly string[] } = {}): Promise<SimProcess> {
    const port = await freePortRange(3);
    const kind = opts.kind ?? 'vllm';
    const sim = new SimProcess(name, port, kind, opts.args ?? [], SimProcess.spawn(name, port, kind, opts.args ?? []));
    await sim.ready();
    return sim;
  }

  private static spawn(name: string, port: number, kind: string, args: readonly string[]): ServiceProcess {
    return ServiceProcess.spawn({
      name: `engine ${name}`,
      entry: 'tools/engine-sim/cli.ts',
      args: [
        `--engine_kind=${kind}`,
        `--name=127.0.0.1:${port}`,
        '--event_port_offset=1',
        '--replay_port_offset=2',
        `--block_size=${FLEET_BLOCK_SIZE}`,
        '--device_capacity_blocks=4096',
        ...args,
      ],
    });
  }

  /** Its engines-file entry. */
  entry(over: Record<string, unknown> = {}): Record<string, unknown> {
    return {
      name: this.name,
      url: this.url,
      kind: this.kind,
      event_endpoint: `tcp://127.0.0.1:${this.port + 1}`,
      replay_endpoint: `tcp://127.0.0.1:${this.port + 2}`,
      block_size: FLEET_BLOCK_SIZE,
      ...over,
    };
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** A new process on the same ports (its `process_start_time_seconds` differs); the old one is killed first. */
  async restart(): Promise<void> {
    await this.proc.kill();
    this.proc = SimProcess.spawn(this.name, this.port, this.kind, this.extraArgs);
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

  static async start(entries: readonly unknown[], opts: { refreshIntervalMs?: number; args?: readonly string[] } = {}): Promise<FleetDirectory> {
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
        `--etcd_addr=127.0.0.1:${etcdPort}`,
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
    return (await this.call<WireListInstancesResponse>((cb) => this.client.ListInstances({}, cb))).instances;
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
