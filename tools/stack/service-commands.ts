/**
 * The command line of each process in the stack. The services run from the same tree as the stack
 * itself: from `dist/` when the stack is the built `dist/tools/stack.js` (npm start), and from the
 * TypeScript sources through tsx when the stack runs as `tools/stack.ts` (tests, no build).
 */
import { writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { EVENT_PORT_OFFSET, REPLAY_PORT_OFFSET, type PlannedEngine } from './port-plan.js';
import { usesEtcd, type StackConfig, type StackEngine, type StackModel } from './stack-flags.js';

export interface Command {
  readonly command: string;
  readonly args: readonly string[];
}

const here = fileURLToPath(import.meta.url);
const fromSource = here.endsWith('.ts');
/** The repository root: this file is `<root>/tools/stack/x.ts` or `<root>/dist/tools/stack/x.js`. */
export const REPO_ROOT = resolve(dirname(here), fromSource ? '../..' : '../../..');

/** `node <root>/dist/<rel>.js`, or `node --import tsx <root>/<rel>.ts` when running from source. */
function nodeEntry(rel: string, args: readonly string[]): Command {
  const entry = fromSource ? ['--import', 'tsx', join(REPO_ROOT, `${rel}.ts`)] : [join(REPO_ROOT, 'dist', `${rel}.js`)];
  return { command: process.execPath, args: [...entry, ...args] };
}

export function etcdCommand(cfg: StackConfig, dataDir: string): Command {
  const client = `http://127.0.0.1:${cfg.etcdPort}`;
  const peer = `http://127.0.0.1:${cfg.etcdPeerPort}`;
  return {
    command: cfg.etcdBin,
    args: [
      '--data-dir', dataDir,
      '--name', 'stack',
      '--listen-client-urls', client,
      '--advertise-client-urls', client,
      '--listen-peer-urls', peer,
      '--initial-advertise-peer-urls', peer,
      '--initial-cluster', `stack=${peer}`,
      '--log-level', 'warn',
    ],
  };
}

/** Writes the directory's discovery config (discovery.md) into the run dir; returns its path. */
export function writeDiscoveryConfig(cfg: StackConfig, runDir: string): string {
  const path = join(runDir, 'kv-events.json');
  const config = {
    discovery: {
      enabled: true,
      block_size: cfg.blockSize,
      topic: '',
      event_port_offset: EVENT_PORT_OFFSET,
      replay_port_offset: REPLAY_PORT_OFFSET,
      // Faster than the 1000 ms default so a fresh engine is subscribed soon after it registers.
      refresh_interval_ms: 250,
    },
  };
  writeFileSync(path, JSON.stringify(config, null, 2) + '\n');
  return path;
}

/** The name the stack gives engine `index` in its engines file (`vllm-0`, ...). */
export function fileEngineName(cfg: StackConfig, index: number): string {
  return `${cfg.engineKind}-${index}`;
}

/**
 * `--engine_kind=vllm|sglang`: the engines file listing the stack's engines (engines.md §4) in
 * the run dir; returns its path. Rank r's ports are the entry's + r, as the simulator binds them.
 */
export function writeEnginesFile(cfg: StackConfig, engines: readonly PlannedEngine[], runDir: string): string {
  const path = join(runDir, 'engines.json');
  const entries = engines.map((e, i) => ({
    name: fileEngineName(cfg, i),
    url: `http://127.0.0.1:${e.httpPort}`,
    kind: cfg.engineKind,
    role: e.type,
    dp_size: e.dpSize,
    event_endpoint: `tcp://127.0.0.1:${e.httpPort + EVENT_PORT_OFFSET}`,
    replay_endpoint: `tcp://127.0.0.1:${e.httpPort + REPLAY_PORT_OFFSET}`,
    topic: '',
    block_size: cfg.blockSize,
  }));
  writeFileSync(path, JSON.stringify({ engines: entries }, null, 2) + '\n');
  return path;
}

/**
 * `--engines_dns`: the engines file holds one DNS entry for the whole fleet (engines.md §6). No
 * ports: the simulated vLLM engines serve `GET /kv_event_sources`, as vLLM with bind-time ports does.
 */
export function writeDnsEnginesFile(cfg: StackConfig, engine: PlannedEngine, dnsName: string, runDir: string): string {
  const path = join(runDir, 'engines.json');
  const entry = { dns: dnsName, port: engine.httpPort, kind: cfg.engineKind, role: engine.type, block_size: cfg.blockSize };
  writeFileSync(path, JSON.stringify({ engines: [entry] }, null, 2) + '\n');
  return path;
}

/** How the directory resolves the stack's DNS name: its local dnsmasq, asked every second. */
export interface StackDnsServer {
  readonly address: string;
}

/** `enginesFile` null: engines register in etcd (xllm); vLLM/SGLang stacks run no etcd at all (`--etcd_addr=`). */
export function directoryCommand(cfg: StackConfig, kvEventsConfigFile: string, enginesFile: string | null = null, dns: StackDnsServer | null = null): Command {
  return nodeEntry('directory-svc/main', [
    `--etcd_addr=${usesEtcd(cfg) ? `127.0.0.1:${cfg.etcdPort}` : ''}`,
    `--kv_events_config_file=${kvEventsConfigFile}`,
    // Faster than the 1000 ms default so the demo's engines are scraped and subscribed soon.
    // Served models are scraped from each engine's /v1/models (no pins): an adapter loaded at run
    // time shows within 2 s rather than the default 10.
    ...(enginesFile === null ? [] : [`--engines_file=${enginesFile}`, '--engines_refresh_interval_ms=250', '--engines_models_refresh_ms=2000']),
    // engines.md §6: the shortest refresh, so the demo's joins and leaves show within seconds.
    ...(dns === null ? [] : [`--engines_dns_server=${dns.address}`, '--engines_dns_refresh_ms=1000']),
    `--grpc_port=${cfg.directoryGrpcPort}`,
    `--http_port=${cfg.directoryHttpPort}`,
    `--internal_api_token=${cfg.internalApiToken}`,
    `--log_level=${cfg.logLevel}`,
  ]);
}

/**
 * meta-svc on its own SQLite file in the run dir. No internal token: KVCM clients send none
 * (kvcm-meta §1.1), so the stack's MetaService stays as open as KVCM's own.
 */
export function metaCommand(cfg: StackConfig, runDir: string): Command {
  return nodeEntry('meta-svc/main', [`--http_port=${cfg.metaPort}`, `--meta_store=sqlite:${join(runDir, 'kvcm.db')}`, `--log_level=${cfg.logLevel}`]);
}

export function engineCommand(cfg: StackConfig, engine: StackEngine & PlannedEngine): Command {
  return nodeEntry('tools/engine-sim/cli', [
    `--engine_kind=${cfg.engineKind}`,
    `--name=127.0.0.1:${engine.httpPort}`,
    ...(engine.host === '127.0.0.1' ? [] : [`--host=${engine.host}`]),
    `--type=${engine.type}`,
    `--dp_size=${engine.dpSize}`,
    `--block_size=${cfg.blockSize}`,
    `--device_capacity_blocks=${cfg.deviceCapacityBlocks}`,
    `--host_capacity_blocks=${cfg.hostCapacityBlocks}`,
    `--event_port_offset=${EVENT_PORT_OFFSET}`,
    `--replay_port_offset=${REPLAY_PORT_OFFSET}`,
    `--etcd_addr=${usesEtcd(cfg) ? `127.0.0.1:${cfg.etcdPort}` : ''}`,
    `--directory_http=127.0.0.1:${cfg.directoryHttpPort}`,
    // The router's tokenizer for this engine's model: a chat the router credits becomes resident
    // as these same ids. The served models reach the directory through etcd (xLLM) or /v1/models.
    `--tokenizer=${engine.tokenizerDir}`,
    `--served_models=${engine.servedModels.join(',')}`,
    `--internal_api_token=${cfg.internalApiToken}`,
    `--log_level=${cfg.logLevel}`,
  ]);
}

/** Every model the router tokenizes: --model, then --second_model (an adapter uses its parent's). */
export function stackModels(cfg: StackConfig): StackModel[] {
  return [{ model: cfg.model, tokenizerDir: cfg.tokenizerDir }, ...(cfg.secondModel === null ? [] : [cfg.secondModel])];
}

/** The router's `--models_file` (cache-identity §5) in the run dir; returns its path. */
export function writeModelsFile(cfg: StackConfig, runDir: string): string {
  const path = join(runDir, 'models.json');
  writeFileSync(path, JSON.stringify({ models: stackModels(cfg).map((m) => ({ model: m.model, tokenizer: m.tokenizerDir })) }, null, 2) + '\n');
  return path;
}

export function routerCommand(cfg: StackConfig, modelsFile: string): Command {
  return nodeEntry('router-svc/main', [
    `--directory_addr=127.0.0.1:${cfg.directoryGrpcPort}`,
    `--http_port=${cfg.routerPort}`,
    `--load_balance_policy=${cfg.loadBalancePolicy}`,
    `--models_file=${modelsFile}`,
    `--internal_api_token=${cfg.internalApiToken}`,
    `--log_level=${cfg.logLevel}`,
  ]);
}
