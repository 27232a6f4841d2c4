/**
 * The I/O edge of the MetaService config (kvcm-meta §8): reads the named file, gathers the host
 * facts the defaults need (hostname, first non-internal IPv4), then validates with the pure
 * `parseMetaConfig`. An unreadable file is one more `config error` line.
 */
import { readFileSync } from 'node:fs';
import { hostname, networkInterfaces } from 'node:os';
import { parseMetaConfig } from './meta-config.js';
import type { MetaConfigResult } from './meta-config.js';

export interface LoadMetaConfigOptions {
  /** `--meta_config_file` / KVCM_META_CONFIG_FILE; '' or undefined = built-in default. */
  readonly configFile?: string;
  readonly httpPortOverride?: number;
  readonly dbPathOverride?: string;
  readonly nodeIdOverride?: string;
}

export function loadMetaConfig(opts: LoadMetaConfigOptions): MetaConfigResult {
  let fileText: string | null = null;
  if (opts.configFile) {
    try {
      fileText = readFileSync(opts.configFile, 'utf8');
    } catch (e) {
      const code = (e as NodeJS.ErrnoException).code ?? 'EIO';
      return { ok: false, errors: [`config error at $: cannot read --meta_config_file ${opts.configFile} (${code})`] };
    }
  }
  return parseMetaConfig({
    fileText,
    httpPortOverride: opts.httpPortOverride,
    dbPathOverride: opts.dbPathOverride,
    nodeIdOverride: opts.nodeIdOverride,
    hostname: hostname(),
    firstIpv4: firstExternalIpv4(),
  });
}

/** §8 default advertise_host: first non-internal IPv4, else loopback. */
export function firstExternalIpv4(): string {
  for (const addrs of Object.values(networkInterfaces())) {
    for (const a of addrs ?? []) if (a.family === 'IPv4' && !a.internal) return a.address;
  }
  return '127.0.0.1';
}
