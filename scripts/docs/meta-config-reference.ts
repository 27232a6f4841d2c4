/**
 * meta-svc config-file parts that are tables in code: the storage types (`STORAGE_KINDS`, with
 * their KVCM StorageType and URI scheme). The keys of the file itself have no table in the parser;
 * the configuration page lists them by hand and the docs test checks each is accepted
 * (`metaConfigAccepts`). Pure.
 */
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import { STORAGE_KINDS } from '../../meta-svc/config/storage-kinds.js';
import { StorageType } from '../../meta-svc/meta-enums.js';
import { code, markdownTable } from './markdown-table.js';

export function storageKindsMarkdown(): string {
  const typeName = new Map(Object.entries(StorageType).map(([name, n]) => [n as number, name]));
  const rows = Object.entries(STORAGE_KINDS).map(([kind, info]) => [
    code(kind),
    code(typeName.get(info.storageType) ?? String(info.storageType)),
    info.eventReport ? 'event report (L1.5 / L2 reporters write it)' : 'writable',
    info.uriScheme === '' ? 'reporter-supplied' : code(`${info.uriScheme}://`),
  ]);
  return markdownTable(['type', 'KVCM StorageType', 'kind', 'location URIs'], rows);
}

/**
 * Whether the parser accepts `key` (a dotted path as the page writes it: `http.port`,
 * `storages[].cluster_name`) as a known key: a config holding it is never refused as "unknown key".
 */
export function metaConfigAccepts(key: string): boolean {
  const parts = key.split('.');
  const config = nest(parts);
  const result = parseMetaConfig({ fileText: JSON.stringify(config), hostname: 'docs', firstIpv4: '192.0.2.1' });
  return result.ok || !result.errors.some((e) => /unknown key/.test(e));
}

/** `['storages[]', 'cluster_name']` → `{"storages": [{"cluster_name": <probe>}]}`. */
function nest(parts: readonly string[]): Record<string, unknown> {
  const [head, ...rest] = parts;
  if (head === undefined) throw new Error('empty key');
  const array = head.endsWith('[]');
  const name = array ? head.slice(0, -2) : head;
  const value: unknown = rest.length === 0 ? (array ? [] : 'probe') : nest(rest);
  return { [name]: array && rest.length > 0 ? [value] : value };
}
