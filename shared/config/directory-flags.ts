/**
 * directory-svc's flags (architecture.md "Processes and flags"; discovery.md "Instance states").
 * The MetaService moved to meta-svc: its old `--meta_*` flags are refused with the command that
 * replaces them, so an operator's old command line fails with a pointer, not "unknown flag". Only `directory-svc/main.ts` calls this with
 * `process.argv`; everything else receives the frozen `DirectoryFlags` object.
 */
import { isIP } from 'node:net';
import { ConfigError } from './config-error.js';
import { flagsHelp, parseFlags, type FlagValues, type ParsedArgs } from './flags.js';
import { LOG_LEVEL_VALUES } from './log-level.js';

export const DIRECTORY_FLAGS = {
  etcd_addr: {
    type: 'host-port-list',
    default: '127.0.0.1:2379',
    emptyMeansNone: true,
    help: 'etcd endpoints for discovery; empty (--etcd_addr=) runs no etcd discovery and never connects to etcd (engines file and DNS fleets, engines.md §6)',
  },
  etcd_namespace: { type: 'string', default: '', placeholder: 'ns', help: 'etcd key prefix; "ns" gives /ns/ (discovery.md "etcd keys")' },
  kv_events_config_file: {
    type: 'string',
    default: '',
    placeholder: 'path.json',
    help: 'KV event streams and limits (kv-events §9); empty disables the directory with a warning',
  },
  engines_file: {
    type: 'string',
    default: '',
    placeholder: 'engines.json',
    help: 'JSON list of engines that do not register in etcd (vLLM, SGLang; engines.md §4); re-read on change; empty = none',
  },
  engines_refresh_interval_ms: {
    type: 'int',
    default: 1000,
    min: 50,
    max: 60000,
    help: 'engines-file engines: GET /health and /metrics period; load older than 3x this is stale (engines.md §4.1, §4.2)',
  },
  engines_models_refresh_ms: {
    type: 'int',
    default: 10000,
    min: 1000,
    max: 600000,
    help: 'engines-file engines without a pinned "models": GET /v1/models period, and at once on (re)activation (cache-identity §1)',
  },
  engines_dns_refresh_ms: {
    type: 'int',
    default: 5000,
    min: 1000,
    max: 600000,
    help: 'engines-file DNS entries: how often each name is resolved again (engines.md §6)',
  },
  engines_dns_server: {
    type: 'string',
    default: '',
    placeholder: 'ip:port',
    help: 'DNS server for engines-file DNS entries (ip:port or [ipv6]:port); empty = the system resolver\'s servers (/etc/resolv.conf)',
  },
  grpc_port: { type: 'int', default: 50051, min: 1, max: 65535, help: 'gRPC port: KvDirectory (view stream, Query, ListStreams, GetStats), health, reflection' },
  http_port: { type: 'int', default: 8889, min: 1, max: 65535, help: 'HTTP port: engine heartbeats, health, metrics' },
  internal_api_token: { type: 'string', default: '', placeholder: 'token', help: 'required X-Internal-Token on internal endpoints when set' },
  grpc_tls_cert: { type: 'string', default: '', placeholder: 'cert.pem', help: 'gRPC TLS certificate (PEM, with --grpc_tls_key); empty = plaintext gRPC' },
  grpc_tls_key: { type: 'string', default: '', placeholder: 'key.pem', help: 'gRPC TLS private key (PEM, with --grpc_tls_cert)' },
  grpc_tls_ca: { type: 'string', default: '', placeholder: 'ca.pem', help: 'CA (PEM) that must have signed every gRPC client certificate: mutual TLS' },
  lease_lost_heartbeat_timeout_ms: {
    type: 'int',
    default: 3000,
    min: 100,
    max: 600000,
    help: 'LEASE_LOST instance without a heartbeat for this long becomes SUSPECT',
  },
  detect_disconnected_instance_interval: {
    type: 'int',
    key: 'detectDisconnectedInstanceIntervalS',
    default: 15,
    min: 1,
    max: 86400,
    help: 'seconds a SUSPECT instance is kept before it is removed',
  },
  instance_delete_probe_timeout_ms: { type: 'int', default: 1000, min: 10, max: 60000, help: 'timeout of each GET /health probe after a lease is lost' },
  instance_delete_probe_attempts: { type: 'int', default: 2, min: 1, max: 10, help: 'GET /health probes before a lease-lost instance is SUSPECT' },
  log_level: { type: 'enum', values: LOG_LEVEL_VALUES, default: 'info', help: 'pino log level' },
} as const;

export type DirectoryFlags = FlagValues<typeof DIRECTORY_FLAGS>;

export const DIRECTORY_USAGE = 'Usage: node dist/directory-svc/main.js [--name=value ...]';

/** Parses directory-svc's argv (without node and script); throws `ConfigError`. */
export function parseDirectoryFlags(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): ParsedArgs<DirectoryFlags> {
  refuseMovedMetaFlags(argv);
  const parsed = parseFlags(DIRECTORY_FLAGS, argv, env);
  if (parsed.kind === 'flags') {
    checkPorts(parsed.flags);
    checkDnsServer(parsed.flags.enginesDnsServer);
  }
  return parsed;
}

export function directoryHelp(): string {
  return flagsHelp(DIRECTORY_USAGE, DIRECTORY_FLAGS);
}

/** The two listening ports must differ, or the second listener fails late with EADDRINUSE. */
function checkPorts(f: DirectoryFlags): void {
  if (f.grpcPort === f.httpPort) {
    throw new ConfigError('--http_port', 'same as --grpc_port', `invalid --http_port: ${f.httpPort} is also --grpc_port`);
  }
}

/**
 * `--engines_dns_server`: what `dns.Resolver#setServers` takes, an IP address with a port (a
 * resolver cannot be named by a host name it would itself have to resolve).
 */
function checkDnsServer(text: string): void {
  if (text === '') return;
  const m = /^(?:\[([^\]]+)\]|([^:\[\]]+)):(\d{1,5})$/.exec(text);
  const host = m === null ? '' : (m[1] ?? m[2]!);
  const family = m === null ? 0 : isIP(host);
  const port = m === null ? 0 : Number(m[3]);
  if (family === 0 || (m![1] !== undefined) !== (family === 6) || port < 1 || port > 65535) {
    throw new ConfigError(
      '--engines_dns_server',
      'expected ip:port',
      `invalid --engines_dns_server: expected ip:port or [ipv6]:port with a port in 1..65535, got ${JSON.stringify(text)}`,
    );
  }
}

/** The directory's former MetaService flags and the meta-svc flag each became (architecture.md). */
const MOVED_META_FLAGS: Readonly<Record<string, (value: string) => string>> = {
  meta_http_port: (v) => `--http_port=${v || '6382'}`,
  meta_db: (v) => `--meta_store=sqlite:${v || './data/kvcm.db'}`,
  meta_config_file: (v) => `--meta_config_file=${v || 'path.json'}`,
};

function refuseMovedMetaFlags(argv: readonly string[]): void {
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    const eq = arg.indexOf('=');
    const name = arg.startsWith('--') ? arg.slice(2, eq < 0 ? undefined : eq) : '';
    const replacement = MOVED_META_FLAGS[name];
    if (replacement === undefined) continue;
    const next = argv[i + 1];
    const value = eq >= 0 ? arg.slice(eq + 1) : next !== undefined && !next.startsWith('--') ? next : '';
    throw new ConfigError(`--${name}`, 'moved to meta-svc', `--${name} moved to meta-svc: run node dist/meta-svc/main.js ${replacement(value)}`);
  }
}
