/**
 * Spec URIs of writable storages (kvcm-meta §4.5):
 *   <scheme>://<name>/<root>/<instance_id>/<k>_<s>?offset=0&size=<size>
 * `<root>` is root_path without leading `./` and `/`, trailing `/` and repeated `/` (segment and
 * slash omitted when empty); `<instance_id>` and `<s>` are UTF-8 percent-encoded except
 * [A-Za-z0-9-._~:=@]; `<k>` is the signed decimal key.
 */

/** §4.5 config `type` → URI scheme of writable storages. */
const SCHEME_BY_CONFIG_TYPE: ReadonlyMap<string, string> = new Map([
  ['file', 'file'],
  ['nfs', 'file'],
  ['dummy', 'dummy'],
  ['hf3fs', '3fs'],
  ['vcns_hf3fs', '3fs'],
  ['mooncake', 'mooncake'],
  ['pace', 'pace'],
  ['pace_ssd', 'pace'],
]);

/** null for event-report and unknown types. */
export function uriSchemeOf(configType: string): string | null {
  return SCHEME_BY_CONFIG_TYPE.get(configType) ?? null;
}

/** §4.5 root normalization; `''` when nothing is left. */
export function normalizeRootPath(rootPath: string): string {
  let r = rootPath;
  while (r.startsWith('./') || r.startsWith('/')) r = r.startsWith('./') ? r.slice(2) : r.slice(1);
  return r
    .split('/')
    .filter((seg) => seg !== '')
    .join('/');
}

const UNRESERVED = /[A-Za-z0-9\-._~:=@]/;

/** UTF-8 percent-encoding of everything outside [A-Za-z0-9-._~:=@] (uppercase hex). */
export function percentEncodeSegment(s: string): string {
  let out = '';
  for (const ch of s) {
    if (UNRESERVED.test(ch)) {
      out += ch;
      continue;
    }
    for (const byte of Buffer.from(ch, 'utf8')) out += `%${byte.toString(16).toUpperCase().padStart(2, '0')}`;
  }
  return out;
}

export interface UriStorage {
  readonly scheme: string;
  /** `global_unique_name`. */
  readonly name: string;
  /** Already normalized (normalizeRootPath). */
  readonly root: string;
}

/** Prefix shared by every spec URI of one (storage, instance): built once per request. */
export function uriPrefix(storage: UriStorage, instanceId: string): string {
  const root = storage.root === '' ? '' : `${storage.root}/`;
  return `${storage.scheme}://${storage.name}/${root}${percentEncodeSegment(instanceId)}/`;
}

export function specUri(prefix: string, blockKey: bigint, specName: string, sizeBytes: bigint): string {
  return `${prefix}${blockKey}_${percentEncodeSegment(specName)}?offset=0&size=${sizeBytes}`;
}
