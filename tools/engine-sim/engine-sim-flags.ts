/**
 * The simulated engine's command line (`node dist/tools/engine-sim/cli.js --help`), in the
 * services' `--name=value` style and parsed by the same table parser (shared/config/flags.ts).
 * Pure: argv in, a frozen `EngineSimConfig` out, or a `ConfigError` whose message is the one
 * line the CLI prints before exiting 2. Port arithmetic follows discovery.md "From instances to
 * streams": rank r publishes on `port + event_port_offset + r` and serves snapshots on
 * `port + replay_port_offset + r`.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../../shared/config/config-error.js';
import { flagsHelp, parseFlags, parseHostPortList, type FlagValues, type HostPort } from '../../shared/config/flags.js';
import { LOG_LEVEL_VALUES, type LogLevel } from '../../shared/config/log-level.js';
import type { OffloadMode } from './block-pool.js';
import type { EngineRole, EngineType } from './engine-control.js';
import { ENGINE_KINDS, type EngineKind } from '../../shared/config/engine-kind.js';
import { DEFAULT_REPLAY_BUFFER_STEPS } from './history-buffer.js';
import type { ReplayLayout } from './history-buffer.js';
import type { BatchForm } from './wire-encoding.js';
import { DEFAULT_BASE_MODEL } from './served-model-registry.js';

export const ENGINE_TYPES = ['DEFAULT', 'PREFILL', 'DECODE', 'MIX'] as const;
/** BlockPool implements LRU only; the flag exists so command lines state it and other policies can come. */
export const EVICTION_POLICIES = ['lru'] as const;

export const ENGINE_SIM_FLAGS = {
  engine_kind: {
    type: 'enum',
    values: ENGINE_KINDS,
    default: 'xllm',
    help: 'xllm registers in etcd and heartbeats; vllm/sglang do neither and serve GET /metrics (engines.md §5)',
  },
  no_process_metrics: { type: 'bool', default: false, help: 'vllm/sglang: leave process_start_time_seconds out of /metrics (Prometheus multiprocess mode)' },
  name: { type: 'string', default: '127.0.0.1:8000', placeholder: 'host:port', help: 'instance name = the business HTTP address (OpenAI API, /health) the engine listens on' },
  type: { type: 'enum', values: ENGINE_TYPES, default: 'DEFAULT', help: 'instance type registered in etcd (discovery.md "etcd keys")' },
  current_role: { type: 'enum', values: ['PREFILL', 'DECODE'], default: 'PREFILL', help: 'MIX only: the role its heartbeats report' },
  dp_size: { type: 'int', default: 1, min: 1, max: 64, help: 'DP ranks, each with its own block pool, event and snapshot socket' },
  block_size: { type: 'int', default: 128, min: 1, max: 4096, help: 'tokens per KV block (must equal the directory discovery block_size)' },
  device_capacity_blocks: { type: 'int', default: 4096, min: 1, max: 16777216, help: 'Device (GPU) blocks per rank' },
  host_capacity_blocks: { type: 'int', default: 0, min: 0, max: 16777216, help: 'Host (CPU) blocks per rank; 0 disables offload' },
  eviction_policy: { type: 'enum', values: EVICTION_POLICIES, default: 'lru', help: 'Device eviction order' },
  offload_mode: { type: 'enum', values: ['sync', 'async'], default: 'sync', help: 'Host copy completes in the evicting step (sync) or the next one (async)' },
  event_port_offset: { type: 'int', default: 10000, min: 1, max: 65534, help: 'rank r publishes events on port + offset + r' },
  replay_port_offset: { type: 'int', default: 30000, min: 1, max: 65534, help: 'rank r serves snapshots on port + offset + r' },
  topic: { type: 'string', default: '', placeholder: 'topic', help: 'frame 0 of every event message (kv-events §2)' },
  max_message_bytes: { type: 'int', default: 8388608, min: 1024, max: 268435456, help: 'split batches and snapshot chunks to stay within this (kv-events §11.3)' },
  etcd_addr: { type: 'string', default: '127.0.0.1:2379', placeholder: 'host:port[,host:port]', help: 'etcd endpoints to register in; empty registers nowhere' },
  etcd_namespace: { type: 'string', default: '', placeholder: 'ns', help: 'etcd key prefix, as the directory\'s --etcd_namespace' },
  lease_ttl_s: { type: 'int', default: 3, min: 1, max: 3600, help: 'TTL of the registration lease (kept alive while running)' },
  incarnation_id: { type: 'string', default: '', placeholder: 'id', help: 'incarnation_id to register; empty picks a random one per process' },
  directory_http: { type: 'string', default: '127.0.0.1:8889', placeholder: 'host:port|url', help: 'directory HTTP address heartbeats go to; empty sends none' },
  internal_api_token: { type: 'string', default: '', placeholder: 'token', help: 'X-Internal-Token sent with heartbeats' },
  heartbeat_interval_ms: { type: 'int', default: 500, min: 50, max: 60000, help: 'heartbeat period (discovery.md: about 500 ms)' },
  token_interval_ms: { type: 'int', default: 1, min: 0, max: 10000, help: 'delay before each generated token of a completion' },
  drop_every_n_batches: { type: 'int', default: 0, min: 0, max: 1000000, help: 'fault: per rank, every n-th event batch takes its seq but is not sent (a gap); 0 = off' },
  tokenizer: { type: 'string', default: '', placeholder: 'dir', help: "model directory (tokenizer.json, tokenizer_config.json): text and chat are tokenized as the router does; empty = one token per UTF-8 byte" },
  chat_template: { type: 'string', default: '', placeholder: 'file', help: "chat template overriding tokenizer_config.json's" },
  log_level: { type: 'enum', values: LOG_LEVEL_VALUES, default: 'info', help: 'pino log level' },
  batch_encoding: { type: 'enum', values: ['array', 'map'], default: 'array', help: 'vllm/sglang: batch as [ts, events, dp_rank] or {ts, events, data_parallel_rank}' },
  omit_dp_rank: { type: 'bool', default: false, help: 'vllm/sglang: leave the dp rank out of every batch (older releases)' },
  replay_buffer_steps: { type: 'int', default: DEFAULT_REPLAY_BUFFER_STEPS, min: 1, max: 1000000, help: 'vllm/sglang: live batches kept for history replay (vLLM buffer_steps)' },
  replay_layout: { type: 'enum', values: ['2', '3', 'none'], default: '2', help: 'vllm/sglang: history reply frames after the delimiter (2 or 3 with topic), or no replay endpoint' },
  // Cache identity (cache-identity §6).
  served_models: {
    type: 'string',
    default: '',
    placeholder: 'base[,adapter...]',
    help: `GET /v1/models (xllm: also the etcd registration's models): the base model, then LoRA adapters of it; a request for another model is vLLM's 404. Empty: base "${DEFAULT_BASE_MODEL}", any model name served by it`,
  },
  hybrid_sliding_window: {
    type: 'int',
    default: 0,
    min: 0,
    max: 16777216,
    help: 'vllm: a hybrid model; every Device store is also published for group 1 (sliding_window, this many tokens), which drops blocks outside each request window; 0 = one group',
  },
  event_encoding: { type: 'enum', values: ['map', 'array'], default: 'map', help: 'vllm/sglang: events as maps (newer vLLM) or positional arrays (older vLLM, msgspec array_like)' },
  // engines.md §6: DNS fleets (several engines on one port at different loopback addresses).
  host: {
    type: 'string',
    default: '',
    placeholder: '127.0.0.N',
    help: 'IPv4 address the HTTP server, PUB and ROUTER sockets bind, and the host of the instance name; empty = the host of --name',
  },
  no_kv_event_sources: { type: 'bool', default: false, help: 'vllm/sglang: do not serve GET /kv_event_sources (vLLM before its bind-time ports; engines.md §6)' },
} as const;

type EngineSimFlags = FlagValues<typeof ENGINE_SIM_FLAGS>;

export interface EngineSimConfig {
  readonly engineKind: EngineKind;
  /** vllm/sglang: export `process_start_time_seconds` (the engine identity, engines.md §4.3). */
  readonly processMetrics: boolean;
  readonly host: string;
  readonly httpPort: number;
  /** `host:port`, the etcd key suffix. */
  readonly instanceName: string;
  readonly type: EngineType;
  readonly currentRole: EngineRole;
  readonly dpSize: number;
  readonly blockSize: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly offloadMode: OffloadMode;
  readonly eventPortBase: number;
  readonly replayPortBase: number;
  readonly topic: string;
  readonly maxMessageBytes: number;
  /** `host:port` each; empty: no etcd registration. */
  readonly etcdHosts: readonly string[];
  readonly etcdNamespace: string;
  readonly leaseTtlS: number;
  readonly incarnationId: string | null;
  /** Base URL of the directory's HTTP port, or null for no heartbeats. */
  readonly directoryUrl: string | null;
  readonly internalApiToken: string;
  readonly heartbeatIntervalMs: number;
  readonly tokenIntervalMs: number;
  readonly dropEveryNBatches: number;
  /** `--tokenizer` directory, '' for none; `--chat_template` file, '' for the directory's. */
  readonly tokenizerDir: string;
  readonly chatTemplateFile: string;
  readonly logLevel: LogLevel;
  readonly batchForm: BatchForm;
  readonly replayBufferSteps: number;
  readonly replayLayout: ReplayLayout;
  /** `--served_models`: base first, then adapters; strict = a list was given (404 for others). */
  readonly servedModels: { readonly names: readonly string[]; readonly strict: boolean };
  /** `--hybrid_sliding_window` tokens; 0 = not a hybrid model. */
  readonly hybridSlidingWindow: number;
  /** vllm/sglang: serve `GET /kv_event_sources` (engines.md §6). */
  readonly kvEventSources: boolean;
}

export const ENGINE_SIM_USAGE = 'Usage: node dist/tools/engine-sim/cli.js [--name=value ...]\n\nA simulated xLLM, vLLM or SGLang engine: KV events over ZeroMQ per DP rank, etcd registration, heartbeats, OpenAI API.';

export function engineSimHelp(): string {
  return flagsHelp(ENGINE_SIM_USAGE, ENGINE_SIM_FLAGS);
}

/** argv (without node and script) → config, or 'help'. Throws `ConfigError` with one line. */
export function parseEngineSimArgs(argv: readonly string[]): EngineSimConfig | 'help' {
  const parsed = parseFlags(ENGINE_SIM_FLAGS, argv);
  if (parsed.kind === 'help') return 'help';
  return toConfig(parsed.flags);
}

function toConfig(f: EngineSimFlags): EngineSimConfig {
  const named = single(f.name, '--name');
  const name = f.host === '' ? named : { host: bindHost(f.host), port: named.port };
  const lastRank = f.dpSize - 1;
  const eventPortBase = name.port + f.eventPortOffset;
  const replayPortBase = name.port + f.replayPortOffset;
  for (const [flag, base] of [['--event_port_offset', eventPortBase], ['--replay_port_offset', replayPortBase]] as const) {
    if (base + lastRank > 65535) {
      throw new ConfigError(flag, 'port above 65535', `invalid ${flag}: ${name.port} + ${base - name.port} + rank ${lastRank} = ${base + lastRank} is above 65535`);
    }
  }
  // discovery.md: overlapping ranges would make the directory exclude the instance; say so here.
  // (Offsets are ≥ 1, so neither range can reach down to the HTTP port itself.)
  if (rangesOverlap(eventPortBase, replayPortBase, f.dpSize)) {
    throw new ConfigError('--replay_port_offset', 'port ranges overlap', `invalid --replay_port_offset: event ports ${eventPortBase}.. and snapshot ports ${replayPortBase}.. overlap for ${f.dpSize} ranks`);
  }
  let etcdHosts: readonly string[] = [];
  if (f.etcdAddr !== '') {
    const list = parseHostPortList(f.etcdAddr);
    if (list === null) throw new ConfigError('--etcd_addr', 'bad list', `invalid --etcd_addr: expected host:port[,host:port...], got ${JSON.stringify(f.etcdAddr)}`);
    etcdHosts = list.map((h) => `${h.host}:${h.port}`);
  }
  return Object.freeze({
    engineKind: f.engineKind,
    processMetrics: !f.noProcessMetrics,
    host: name.host,
    httpPort: name.port,
    instanceName: `${name.host}:${name.port}`,
    type: f.type,
    currentRole: f.currentRole,
    dpSize: f.dpSize,
    blockSize: f.blockSize,
    deviceCapacityBlocks: f.deviceCapacityBlocks,
    hostCapacityBlocks: f.hostCapacityBlocks,
    offloadMode: f.offloadMode,
    eventPortBase,
    replayPortBase,
    topic: f.topic,
    maxMessageBytes: f.maxMessageBytes,
    etcdHosts,
    etcdNamespace: f.etcdNamespace,
    leaseTtlS: f.leaseTtlS,
    incarnationId: f.incarnationId === '' ? null : f.incarnationId,
    directoryUrl: directoryUrl(f.directoryHttp),
    internalApiToken: f.internalApiToken,
    heartbeatIntervalMs: f.heartbeatIntervalMs,
    tokenIntervalMs: f.tokenIntervalMs,
    dropEveryNBatches: f.dropEveryNBatches,
    tokenizerDir: f.tokenizer,
    chatTemplateFile: f.chatTemplate,
    logLevel: f.logLevel,
    batchForm: Object.freeze({ encoding: f.batchEncoding, omitDpRank: f.omitDpRank, eventEncoding: f.eventEncoding }),
    replayBufferSteps: f.replayBufferSteps,
    replayLayout: f.replayLayout === 'none' ? 'none' : f.replayLayout === '3' ? 3 : 2,
    ...identityConfig(f),
    kvEventSources: !f.noKvEventSources,
  });
}

/** cache-identity §6 flags: a served list of distinct non-empty names; hybrid groups only as vLLM publishes them. */
function identityConfig(f: EngineSimFlags): Pick<EngineSimConfig, 'servedModels' | 'hybridSlidingWindow'> {
  let servedModels: EngineSimConfig['servedModels'] = Object.freeze({ names: Object.freeze([DEFAULT_BASE_MODEL]), strict: false });
  if (f.servedModels !== '') {
    const names = f.servedModels.split(',').map((n) => n.trim());
    const bad = names.findIndex((n, i) => n === '' || names.indexOf(n) !== i);
    if (bad >= 0) {
      const why = names[bad] === '' ? `entry ${bad} is empty` : `${JSON.stringify(names[bad])} is listed twice`;
      throw new ConfigError('--served_models', 'bad list', `invalid --served_models: expected base[,adapter...] of distinct non-empty names, ${why} in ${JSON.stringify(f.servedModels)}`);
    }
    servedModels = Object.freeze({ names: Object.freeze(names), strict: true });
  }
  if (f.hybridSlidingWindow > 0 && f.engineKind !== 'vllm') {
    throw new ConfigError(
      '--hybrid_sliding_window',
      'needs --engine_kind=vllm',
      `invalid --hybrid_sliding_window: KV cache groups are published only by --engine_kind=vllm, got ${f.engineKind}`,
    );
  }
  return { servedModels, hybridSlidingWindow: f.hybridSlidingWindow };
}

/** `--host`: a concrete IPv4 address (a wildcard would make the published endpoints unconnectable). */
function bindHost(text: string): string {
  if (isIP(text) !== 4 || text === '0.0.0.0') {
    throw new ConfigError('--host', 'bad address', `invalid --host: expected an IPv4 address such as 127.0.0.2 (not 0.0.0.0), got ${JSON.stringify(text)}`);
  }
  return text;
}

function single(text: string, flag: string): HostPort {
  const list = parseHostPortList(text);
  if (list === null || list.length !== 1) throw new ConfigError(flag, 'bad address', `invalid ${flag}: expected one host:port, got ${JSON.stringify(text)}`);
  return list[0]!;
}

/** `host:port` or `http://host:port` → base URL; '' → null (no heartbeats). */
function directoryUrl(text: string): string | null {
  if (text === '') return null;
  const bare = text.replace(/^https?:\/\//, '').replace(/\/+$/, '');
  const hp = single(bare, '--directory_http');
  return `${text.startsWith('https://') ? 'https' : 'http'}://${hp.host}:${hp.port}`;
}

function rangesOverlap(a: number, b: number, len: number): boolean {
  return a < b + len && b < a + len;
}
