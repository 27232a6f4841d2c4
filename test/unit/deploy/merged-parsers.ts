/**
 * The parsers the Kubernetes manifests need that other branches add (issue 30): the engines
 * file's DNS entries and `--etcd_addr=` (branch dns-discovery, engines.md §6) and the router's
 * `--models_file` (branch router-identity, cache-identity §5). Each is found at run time under the
 * name those branches give it, so the manifest suite compiles and runs before the merges; until
 * then the checks that need one are pending (mocha shows them), afterwards they run.
 *
 * After both merges this module can go: import `parseModelsFile` from
 * shared/config/models-file.ts and read `parseEnginesFile(text).dnsEntries` directly.
 */
import { ConfigError } from '../../../shared/config/config-error.js';
import { parseDirectoryFlags } from '../../../shared/config/directory-flags.js';
import { ROUTER_FLAGS } from '../../../shared/config/router-flags.js';
import { parseEnginesFile } from '../../../directory-svc/engines/engines-file.js';

/** A DNS entry as dns-discovery's `DnsEngineEntry` has it (the fields the manifests check). */
export interface DnsEntryView {
  readonly dns: string;
  readonly srv: boolean;
  readonly port: number | null;
  readonly kind: string;
  readonly role: string;
  readonly blockSize: number;
  readonly eventPort: number | null;
  readonly replayPort: number | null;
  readonly dpSize: number;
  readonly topic: string;
}

/** A models-file entry as router-identity's `ModelTokenizerEntry` has it. */
export interface ModelEntryView {
  readonly model: string;
  readonly tokenizer: string;
  readonly chatTemplate: string;
}

const PROBE_DNS_FILE = JSON.stringify({ engines: [{ dns: 'engines.example', port: 8000, kind: 'vllm', block_size: 16, event_port: 5557 }] });

/** Whether `parseEnginesFile` takes DNS entries (dns-discovery merged). */
export function enginesFileHasDns(): boolean {
  try {
    parseEnginesFile(PROBE_DNS_FILE);
    return true;
  } catch (e) {
    if (e instanceof ConfigError) return false;
    throw e;
  }
}

/** The DNS entries of an engines file (strict: the file must parse). Needs `enginesFileHasDns()`. */
export function enginesFileDnsEntries(text: string): readonly DnsEntryView[] {
  const parsed: unknown = parseEnginesFile(text);
  if (Array.isArray(parsed) || typeof parsed !== 'object' || parsed === null || !('dnsEntries' in parsed)) {
    throw new Error('parseEnginesFile returns no dnsEntries: branch dns-discovery is not merged');
  }
  return (parsed as { dnsEntries: readonly DnsEntryView[] }).dnsEntries;
}

/** Whether the directory's flag parser takes `--etcd_addr=` (empty: no etcd at all). */
export function directoryTakesEmptyEtcdAddr(): boolean {
  try {
    parseDirectoryFlags(['--etcd_addr=']);
    return true;
  } catch (e) {
    if (e instanceof ConfigError) return false;
    throw e;
  }
}

/** Whether the router has `--models_file`. */
export function routerHasModelsFile(): boolean {
  return Object.hasOwn(ROUTER_FLAGS, 'models_file');
}

/** Where router-identity puts the models-file parser (a variable: tsc does not resolve it before the merge). */
const MODELS_FILE_MODULE = '../../../shared/config/models-file.js';

/** router-identity's `parseModelsFile`, or null before that merge. */
export async function modelsFileParser(): Promise<((text: string) => readonly ModelEntryView[]) | null> {
  let m: { parseModelsFile?: (text: string) => readonly ModelEntryView[] };
  try {
    m = (await import(MODELS_FILE_MODULE)) as typeof m;
  } catch (e) {
    // Only the module itself being absent means "not merged"; anything else (a broken import
    // inside it) is a failure to see.
    const code = (e as NodeJS.ErrnoException).code;
    const missing = /Cannot find module '([^']+)'/.exec(String((e as Error).message))?.[1] ?? '';
    if ((code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && /models-file(\.[jt]s)?$/.test(missing)) return null;
    throw e;
  }
  if (m.parseModelsFile === undefined) throw new Error('shared/config/models-file.ts exports no parseModelsFile');
  return m.parseModelsFile;
}
