/**
 * directory-svc's flags (architecture.md "Processes and flags"; discovery.md "Instance states";
 * kvcm-meta §8 for the MetaService overrides). Only `directory-svc/main.ts` calls this with
 * `process.argv`; everything else receives the frozen `DirectoryFlags` object.
 */
import { ConfigError } from './config-error.js';
import { flagsHelp, parseFlags, type FlagValues, type ParsedArgs } from './flags.js';
import { LOG_LEVEL_VALUES } from './log-level.js';

export const DIRECTORY_FLAGS = {
  etcd_addr: { type: 'host-port-list', default: '127.0.0.1:2379', help: 'etcd endpoints for discovery' },
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
  grpc_port: { type: 'int', default: 50051, min: 1, max: 65535, help: 'gRPC port: KvDirectory (view stream, Query, ListStreams, GetStats), health, reflection' },
  http_port: { type: 'int', default: 8889, min: 1, max: 65535, help: 'HTTP port: engine heartbeats, health, metrics' },
  meta_http_port: { type: 'int', default: 6382, min: 0, max: 65535, help: 'KVCM MetaService HTTP port; 0 disables the MetaService (kvcm-meta §8)' },
  meta_config_file: {
    type: 'string',
    default: '',
    placeholder: 'path.json',
    env: 'KVCM_META_CONFIG_FILE',
    help: 'MetaService config JSON replacing the built-in default (kvcm-meta §8)',
  },
  meta_db: { type: 'string', default: './data/kvcm.db', placeholder: 'path', help: 'MetaService SQLite database file (overrides store.path)' },
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
  const parsed = parseFlags(DIRECTORY_FLAGS, argv, env);
  if (parsed.kind === 'flags') checkPorts(parsed.flags);
  return parsed;
}

export function directoryHelp(): string {
  return flagsHelp(DIRECTORY_USAGE, DIRECTORY_FLAGS);
}

/** The three listening ports must differ, or the second listener fails late with EADDRINUSE. */
function checkPorts(f: DirectoryFlags): void {
  if (f.grpcPort === f.httpPort) {
    throw new ConfigError('--http_port', 'same as --grpc_port', `invalid --http_port: ${f.httpPort} is also --grpc_port`);
  }
  if (f.metaHttpPort !== 0 && (f.metaHttpPort === f.grpcPort || f.metaHttpPort === f.httpPort)) {
    const other = f.metaHttpPort === f.grpcPort ? '--grpc_port' : '--http_port';
    throw new ConfigError('--meta_http_port', `same as ${other}`, `invalid --meta_http_port: ${f.metaHttpPort} is also ${other}`);
  }
}
