/**
 * meta-svc's flags (architecture.md "Processes and flags", kvcm-meta §8, §9.4). Only
 * `meta-svc/main.ts` calls this with `process.argv`; `--http_port`, `--meta_store` and
 * `--node_id` override the config file only when given (`given`), since their defaults equal
 * the §8 defaults and passing them always would hide a file's `http.port` / `store` / `node_id`.
 */
import { ConfigError } from './config-error.js';
import { flagsHelp, parseFlags, type FlagValues, type ParsedArgs } from './flags.js';
import { LOG_LEVEL_VALUES } from './log-level.js';
import { DEFAULT_META_STORE, META_STORE_FORMS, parseMetaStore, type MetaStoreLocation } from './meta-store-url.js';

export const META_FLAGS = {
  http_port: { type: 'int', default: 6382, min: 1, max: 65535, help: 'KVCM MetaService HTTP port: /api/*, /health, /metrics (overrides http.port)' },
  meta_config_file: {
    type: 'string',
    default: '',
    placeholder: 'path.json',
    env: 'KVCM_META_CONFIG_FILE',
    help: 'MetaService config JSON replacing the built-in default (kvcm-meta §8)',
  },
  meta_store: {
    type: 'string',
    default: DEFAULT_META_STORE,
    placeholder: 'url',
    help: `the store: ${META_STORE_FORMS} (shared by several replicas, kvcm-meta §9.4); overrides store`,
  },
  node_id: { type: 'string', default: '', placeholder: 'id', help: 'this replica\'s node id (overrides node_id; default <hostname>:<http port>)' },
  internal_api_token: {
    type: 'string',
    default: '',
    placeholder: 'token',
    help: 'when set, required as X-Internal-Token on /api/* (KVCM clients send none: leave empty unless a proxy adds it)',
  },
  log_level: { type: 'enum', values: LOG_LEVEL_VALUES, default: 'info', help: 'pino log level' },
} as const;

export type MetaFlagValues = FlagValues<typeof META_FLAGS>;

/** The parsed flags plus the store `--meta_store` names. */
export interface MetaFlags extends MetaFlagValues {
  readonly store: MetaStoreLocation;
}

export const META_USAGE = 'Usage: node dist/meta-svc/main.js [--name=value ...]';

/** Parses meta-svc's argv (without node and script); throws `ConfigError`. */
export function parseMetaFlags(
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): ParsedArgs<MetaFlags> {
  const parsed = parseFlags(META_FLAGS, argv, env);
  if (parsed.kind === 'help') return parsed;
  const store = parseMetaStore(parsed.flags.metaStore);
  if (store === null) {
    throw new ConfigError('--meta_store', `expected ${META_STORE_FORMS}`, `invalid --meta_store: ${JSON.stringify(parsed.flags.metaStore)} is not ${META_STORE_FORMS}`);
  }
  const flags: MetaFlags = Object.freeze({ ...parsed.flags, store });
  return { kind: 'flags', flags, given: parsed.given };
}

export function metaHelp(): string {
  return flagsHelp(META_USAGE, META_FLAGS);
}
