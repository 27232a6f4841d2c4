/**
 * registerInstance's `storage_configs` (kvcm-meta §5.2): a JSON array with one object per
 * `storage_candidates` entry of the group, in order (event-report storages are never
 * candidates): `{"global_unique_name", <member>: {...}, "check_storage_available_when_open"}`.
 * The member holds `root_path` (`root_dir` for 3FS) and `key_count_per_file: 1` from the storage
 * config, then the storage's `spec` members (a spec member never overrides those two), and
 * `media_type` for pace storages. Pure.
 */
import type { InstanceGroupConfig, StorageConfig } from '../config/meta-config.js';
import { STORAGE_KINDS } from '../config/storage-kinds.js';
import { jsonTextOf } from '../wire/json-text.js';

export function storageConfigsJson(group: InstanceGroupConfig, storage: (name: string) => StorageConfig | undefined): string {
  const items: string[] = [];
  for (const name of group.storageCandidates) {
    const s = storage(name);
    if (!s || s.eventReport) continue;
    const info = STORAGE_KINDS[s.kind];
    const fixed = new Map<string, string>();
    if (s.rootPath !== '') fixed.set(info.rootMember, JSON.stringify(s.rootPath));
    fixed.set('key_count_per_file', String(s.keyCountPerFile));
    if (info.mediaType !== null) fixed.set('media_type', String(info.mediaType));
    const members: string[] = [];
    for (const [k, v] of fixed) if (k !== 'media_type') members.push(`${JSON.stringify(k)}:${v}`);
    for (const [k, v] of s.spec) if (!fixed.has(k)) members.push(`${JSON.stringify(k)}:${jsonTextOf(v)}`);
    if (info.mediaType !== null) members.push(`"media_type":${info.mediaType}`);
    items.push(
      `{"global_unique_name":${JSON.stringify(s.globalUniqueName)},${JSON.stringify(info.configMember)}:{${members.join(',')}},` +
        `"check_storage_available_when_open":${s.checkStorageAvailableWhenOpen ? 'true' : 'false'}}`,
    );
  }
  return `[${items.join(',')}]`;
}
