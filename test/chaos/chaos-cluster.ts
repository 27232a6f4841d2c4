/**
 * The cluster the chaos and soak suites break, every part a real process (shared/process/
 * service-process: own process groups, no orphans):
 *
 *   etcd ◀─ lease + key ── engines (chaos-engine.ts: the simulator + a read-only residency route)
 *                           ── ZMQ events/snapshots, heartbeats ──▶ directory-svc ══ WatchView ══▶ router-1, router-2 (CAR)
 *   vLLM-kind engines (no etcd) ◀── /health, /metrics ── directory-svc --engines_file (engines.md §4)
 *
 * Each part keeps its ports across restarts (engines their address, so a restart is a new
 * incarnation behind the same name; routers their port, so clients keep one URL). Faults:
 * `kill9*` (SIGKILL of the group, nothing flushed), `restart*` (same ports), `pauseEngine` /
 * `resumeEngine` (SIGSTOP / SIGCONT of the engine's group).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from '../helpers/ports.js';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { EVENT_PORT_OFFSET, REPLAY_PORT_OFFSET, findFreeEngineBase, layoutEngines, type PlannedEngine } from '../../tools/stack/port-plan.js';
import type { QueryResult } from '../../shared/view/query-result.js';
import { CLEAR_PATH, RESIDENCY_PATH, type WireResidencyAnswer } from './engine-residency.js';

const ETCD_BIN = process.env['ETCD_BIN'] ?? 'etcd';
const START_MS = 120000;

export interface ClusterOptions {
  readonly blockSize: number;
  /** One entry per engine: its DP ranks. All engines are DEFAULT (routing.md: P alone). */
  readonly engineDpSizes: readonly number[];
  /** vLLM-kind engines (DP=1, DEFAULT) listed in an engines file, after the xLLM ones. */
  readonly vllmEngines?: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  /** kv-events §9, small so a stream can be filled on purpose. */
  readonly maxBlocksPerStream: number;
  readonly viewStaleAfterMs: number;
  /** Services' pino level; `warn` keeps a long run's output (and CPU) small. */
  readonly logLevel?: string;
}

export interface EngineHandle {
  readonly index: number;
  readonly kind: 'xllm' | 'vllm';
  /** xLLM: `127.0.0.1:<port>`; vLLM-kind: its engines-file name `vllm-<k>`. */
  readonly name: string;
  readonly url: string;
  readonly dpSize: number;
  proc: ServiceProcess;
  /** SIGSTOPped by pauseEngine and not yet resumed. */
  paused: boolean;
}

export interface RouterHandle {
  readonly name: string;
  readonly url: string;
  readonly port: number;
  proc: ServiceProcess;
}

export class ChaosCluster {
  etcd!: ServiceProcess;
  directory!: ServiceProcess;
  readonly engines: EngineHandle[] = [];
  readonly routers: RouterHandle[] = [];
  private readonly dir = mkdtempSync(join(tmpdir(), 'chaos-'));
  private etcdPort = 0;
  private etcdPeerPort = 0;
  private grpcPort = 0;
  private httpPort = 0;
  private configFile = '';
  private enginesFile = '';
  private planned: PlannedEngine[] = [];

  constructor(readonly opts: ClusterOptions) {}

  get streamCount(): number {
    return this.opts.engineDpSizes.reduce((a, b) => a + b, 0) + (this.opts.vllmEngines ?? 0);
  }

  private kindOf(i: number): 'xllm' | 'vllm' {
    return i < this.opts.engineDpSizes.length ? 'xllm' : 'vllm';
  }

  private nameOf(i: number): string {
    return this.kindOf(i) === 'xllm' ? `127.0.0.1:${this.planned[i]!.httpPort}` : `vllm-${i - this.opts.engineDpSizes.length}`;
  }

  get directoryHttpUrl(): string {
    return `http://127.0.0.1:${this.httpPort}`;
  }

  async start(): Promise<void> {
    this.etcdPort = await freePort();
    this.etcdPeerPort = await freePort();
    this.grpcPort = await freePort();
    this.httpPort = await freePort();
    this.configFile = join(this.dir, 'kv-events.json');
    writeFileSync(
      this.configFile,
      JSON.stringify({
        discovery: { enabled: true, block_size: this.opts.blockSize, topic: '', event_port_offset: EVENT_PORT_OFFSET, replay_port_offset: REPLAY_PORT_OFFSET, refresh_interval_ms: 200 },
        max_blocks_per_stream: this.opts.maxBlocksPerStream,
      }),
    );
    const specs = [...this.opts.engineDpSizes, ...new Array<number>(this.opts.vllmEngines ?? 0).fill(1)].map((dpSize) => ({ type: 'DEFAULT' as const, dpSize }));
    this.planned = layoutEngines(specs, await findFreeEngineBase(specs, new Set([this.grpcPort, this.httpPort, this.etcdPort, this.etcdPeerPort])));
    this.enginesFile = join(this.dir, 'engines.json');
    const listed = this.planned.flatMap((e, i) =>
      this.kindOf(i) === 'xllm'
        ? []
        : [{ name: this.nameOf(i), url: `http://127.0.0.1:${e.httpPort}`, kind: 'vllm', event_endpoint: `tcp://127.0.0.1:${e.httpPort + EVENT_PORT_OFFSET}`,
            replay_endpoint: `tcp://127.0.0.1:${e.httpPort + REPLAY_PORT_OFFSET}`, block_size: this.opts.blockSize }],
    );
    writeFileSync(this.enginesFile, JSON.stringify({ engines: listed }));
    await this.startEtcd();
    await this.startDirectory();
    await Promise.all(
      this.planned.map(async (e, i) => {
        const h: EngineHandle = { index: i, kind: this.kindOf(i), name: this.nameOf(i), url: `http://127.0.0.1:${e.httpPort}`, dpSize: e.dpSize, proc: this.spawnEngine(i), paused: false };
        this.engines.push(h);
        await h.proc.waitForHttp(`${h.url}/health`, START_MS);
      }),
    );
    this.engines.sort((a, b) => a.index - b.index);
    for (let i = 0; i < 2; i++) {
      const port = await freePort();
      this.routers.push({ name: `router-${i + 1}`, url: `http://127.0.0.1:${port}`, port, proc: this.spawnRouter(`router-${i + 1}`, port) });
    }
    await Promise.all(this.routers.map((r) => r.proc.waitForHttp(`${r.url}/ready`, START_MS)));
    await waitFor(async () => (await this.allSynchronized()) === null, START_MS, `all ${this.streamCount} streams synchronized in both routers`);
  }

  // --- etcd ---------------------------------------------------------------------------------

  async startEtcd(): Promise<void> {
    const client = `http://127.0.0.1:${this.etcdPort}`;
    const peer = `http://127.0.0.1:${this.etcdPeerPort}`;
    this.etcd = ServiceProcess.spawn({
      name: 'etcd',
      command: ETCD_BIN,
      args: ['--data-dir', join(this.dir, 'etcd'), '--name', 'default', '--listen-client-urls', client, '--advertise-client-urls', client, '--listen-peer-urls', peer,
        '--initial-advertise-peer-urls', peer, '--initial-cluster', `default=${peer}`, '--log-level', 'error'],
    });
    await this.etcd.waitForHttp(`${client}/health`, START_MS);
  }

  // --- directory ----------------------------------------------------------------------------

  async startDirectory(): Promise<void> {
    this.directory = ServiceProcess.spawn({
      name: 'directory',
      entry: 'directory-svc/main.ts',
      args: [`--etcd_addr=127.0.0.1:${this.etcdPort}`, `--kv_events_config_file=${this.configFile}`, `--grpc_port=${this.grpcPort}`, `--http_port=${this.httpPort}`,
        `--log_level=${this.opts.logLevel ?? 'warn'}`,
        ...((this.opts.vllmEngines ?? 0) > 0 ? [`--engines_file=${this.enginesFile}`, '--engines_refresh_interval_ms=200'] : [])],
    });
    await this.directory.waitForHttp(`${this.directoryHttpUrl}/health`, START_MS);
  }

  // --- engines ------------------------------------------------------------------------------

  private spawnEngine(i: number): ServiceProcess {
    const e = this.planned[i]!;
    return ServiceProcess.spawn({
      name: `engine-${i}`,
      entry: 'test/chaos/chaos-engine.ts',
      args: [`--engine_kind=${this.kindOf(i)}`, `--name=127.0.0.1:${e.httpPort}`, '--type=DEFAULT', `--dp_size=${e.dpSize}`, `--block_size=${this.opts.blockSize}`,
        `--device_capacity_blocks=${this.opts.deviceCapacityBlocks}`, `--host_capacity_blocks=${this.opts.hostCapacityBlocks}`,
        `--etcd_addr=127.0.0.1:${this.etcdPort}`, `--directory_http=127.0.0.1:${this.httpPort}`, `--log_level=${this.opts.logLevel ?? 'warn'}`],
    });
  }

  /** A new process (new incarnation, empty pool) behind the same address; resolves once /health answers. */
  async restartEngine(e: EngineHandle): Promise<void> {
    if (e.proc.isRunning) await e.proc.kill();
    e.proc = this.spawnEngine(e.index);
    e.paused = false;
    await e.proc.waitForHttp(`${e.url}/health`, START_MS);
  }

  pauseEngine(e: EngineHandle): void {
    process.kill(-e.proc.pid, 'SIGSTOP');
    e.paused = true;
  }

  resumeEngine(e: EngineHandle): void {
    process.kill(-e.proc.pid, 'SIGCONT');
    e.paused = false;
  }

  /** The engine's true residency for `prompts` (read-only), or null when it does not answer. */
  async residency(e: EngineHandle, prompts: readonly (readonly number[])[], timeoutMs = 1000): Promise<WireResidencyAnswer | null> {
    try {
      const res = await fetch(`${e.url}${RESIDENCY_PATH}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompts }), signal: AbortSignal.timeout(timeoutMs) });
      if (res.status !== 200) return null;
      return (await res.json()) as WireResidencyAnswer;
    } catch {
      return null;
    }
  }

  async clearEngine(e: EngineHandle): Promise<void> {
    const res = await fetch(`${e.url}${CLEAR_PATH}`, { method: 'POST', signal: AbortSignal.timeout(5000) });
    if (res.status !== 200) throw new Error(`${e.name}: clear answered ${res.status}`);
  }

  // --- routers ------------------------------------------------------------------------------

  private spawnRouter(name: string, port: number): ServiceProcess {
    return ServiceProcess.spawn({
      name,
      entry: 'router-svc/main.ts',
      args: [`--directory_addr=127.0.0.1:${this.grpcPort}`, `--http_port=${port}`, '--load_balance_policy=CAR', `--view_stale_after_ms=${this.opts.viewStaleAfterMs}`,
        `--log_level=${this.opts.logLevel ?? 'warn'}`],
    });
  }

  async restartRouter(r: RouterHandle): Promise<void> {
    if (r.proc.isRunning) await r.proc.kill();
    r.proc = this.spawnRouter(r.name, r.port);
    await r.proc.waitForHttp(`${r.url}/ready`, START_MS);
  }

  async query(r: RouterHandle, tokenIds: readonly number[], timeoutMs = 2000): Promise<QueryResult | null> {
    try {
      const res = await fetch(`${r.url}/v1/internal/kv-cache/query`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: tokenIds }), signal: AbortSignal.timeout(timeoutMs) });
      if (res.status !== 200) return null;
      return (await res.json()) as QueryResult;
    } catch {
      return null;
    }
  }

  /** null when every router shows every stream synchronized; else what is missing. */
  async allSynchronized(): Promise<string | null> {
    for (const r of this.routers) {
      const q = await this.query(r, []);
      if (q === null) return `${r.name} not answering`;
      const synced = q.matches.filter((m) => m.synchronized).length;
      if (q.matches.length !== this.streamCount || synced !== this.streamCount) {
        const errors = [...new Set(q.matches.filter((m) => !m.synchronized).map((m) => `${m.instance_name}#${m.dp_rank}: ${m.error}`))];
        return `${r.name}: ${synced}/${q.matches.length} of ${this.streamCount} streams synchronized (${errors.join('; ')})`;
      }
    }
    return null;
  }

  async stop(): Promise<void> {
    for (const e of this.engines) if (e.paused && e.proc.isRunning) this.resumeEngine(e);
    await Promise.all([...this.routers.map((r) => r.proc.stop()), ...this.engines.map((e) => e.proc.stop())]);
    await this.directory?.stop();
    await this.etcd?.stop();
    rmSync(this.dir, { recursive: true, force: true });
  }
}
