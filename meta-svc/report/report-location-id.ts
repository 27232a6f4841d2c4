/**
 * Event-report location ids and URIs (kvcm-meta §4.5, §7.4, §7.6, §7.10): the pure string rules
 * shared by the reportEvent writer and the lookups' visibility check.
 */
import { StorageType } from '../meta-enums.js';

/** The two StorageTypes a reporter may use (§7.2 step 2). */
export type EventReportStorageType = typeof StorageType.ST_EVENT_REPORT_L1P5 | typeof StorageType.ST_EVENT_REPORT_L2;

/** §4.5: the `<type>` segment of `kvs#<type>#<medium>#<host>`. */
const FAMILY_BY_TYPE: ReadonlyMap<number, string> = new Map([
  [StorageType.ST_EVENT_REPORT_L1P5, 'event_report_l1p5'],
  [StorageType.ST_EVENT_REPORT_L2, 'event_report_l2'],
]);
const TYPE_BY_FAMILY: ReadonlyMap<string, EventReportStorageType> = new Map([
  ['event_report_l1p5', StorageType.ST_EVENT_REPORT_L1P5],
  ['event_report_l2', StorageType.ST_EVENT_REPORT_L2],
]);

export function isEventReportStorageType(type: number): type is EventReportStorageType {
  return FAMILY_BY_TYPE.has(type);
}

export interface ReportLocationId {
  readonly storageType: EventReportStorageType;
  readonly medium: string;
  readonly hostIpPort: string;
}

/** `kvs#event_report_l2#gpu#10.0.0.1:8000` (§4.5). Medium and host never contain `#` (§7.2, §7.4). */
export function formatReportLocationId(storageType: EventReportStorageType, medium: string, hostIpPort: string): string {
  return `kvs#${FAMILY_BY_TYPE.get(storageType)}#${medium}#${hostIpPort}`;
}

/** Prefix of every location of one reporter family, for scans. */
export function reportLocationIdPrefix(storageType: EventReportStorageType): string {
  return `kvs#${FAMILY_BY_TYPE.get(storageType)}#`;
}

/** §7.10 (1): null when the id is not exactly four non-empty `#`-separated parts of a known family. */
export function parseReportLocationId(locationId: string): ReportLocationId | null {
  const parts = locationId.split('#');
  if (parts.length !== 4 || parts[0] !== 'kvs') return null;
  const storageType = TYPE_BY_FAMILY.get(parts[1] as string);
  const medium = parts[2] as string;
  const hostIpPort = parts[3] as string;
  if (storageType === undefined || medium === '' || hostIpPort === '') return null;
  return { storageType, medium, hostIpPort };
}

/** §7.4 URI syntax (`_` allowed in the scheme, as in `event_report://`). */
const URI_SYNTAX = /^[A-Za-z][A-Za-z0-9+._-]*:\/\/[^\s#]+$/;
export const MAX_URI_BYTES = 4096;

export function hasUriSyntax(uri: string): boolean {
  return URI_SYNTAX.test(uri);
}

const S_VERSION_VALUE = /^[0-9A-Fa-f]{32}$/;

/**
 * The `s_version` query values of a URI (§7.6), in order. Only the query part counts, so a
 * path segment that happens to read `s_version=` is not one.
 */
export function sVersionsOf(uri: string): string[] {
  const q = uri.indexOf('?');
  if (q < 0) return [];
  const out: string[] = [];
  for (const param of uri.slice(q + 1).split('&')) {
    const eq = param.indexOf('=');
    const name = eq < 0 ? param : param.slice(0, eq);
    if (name === 's_version') out.push(eq < 0 ? '' : param.slice(eq + 1));
  }
  return out;
}

/** True when the URI's query has an `s_version` parameter (`sVersionsOf(uri).length > 0`), without allocating. */
export function hasSVersionParam(uri: string): boolean {
  let p = uri.indexOf('?');
  while (p >= 0) {
    const start = p + 1;
    if (uri.startsWith('s_version', start)) {
      const after = start + 9;
      if (after === uri.length) return true;
      const c = uri.charCodeAt(after);
      if (c === 0x3d /* = */ || c === 0x26 /* & */) return true;
    }
    p = uri.indexOf('&', start);
  }
  return false;
}

/** §7.10 (5): at most one s_version, and if present 32 hex characters. Returns the lowercased token, '' when absent, null when malformed. */
export function storedSVersion(uri: string): string | null {
  const versions = sVersionsOf(uri);
  if (versions.length === 0) return '';
  if (versions.length > 1) return null;
  const v = versions[0] as string;
  return S_VERSION_VALUE.test(v) ? v.toLowerCase() : null;
}

/** §7.6 appending rule: the rest of the URI is unchanged. */
export function appendSVersion(uri: string, token: string): string {
  if (uri.endsWith('?') || uri.endsWith('&')) return `${uri}s_version=${token}`;
  if (uri.includes('?')) return `${uri}&s_version=${token}`;
  return `${uri}?s_version=${token}`;
}
