/**
 * How the Redis MetaStore lays its data out (kvcm-meta §9.4). Pure string functions, shared by
 * the store and its Lua script's callers; nothing here talks to Redis.
 *
 *   <ns>instances                 hash   instance id → record JSON
 *   <ns>b:<instance>:<block key>  hash   `l:<location id>` → location value, `p:<name>` → property
 *   <ns>locs                      zset   every location, score 0, member `<instance>\0<sortable key>\0<location id>`:
 *                                        the stable scan order (instance, block key, location id) for keyset paging
 *   <ns>stage:<stage id>          list   a big snapshot's rows, staged before its commit and landed after it (`stagedRow`)
 *   <ns>stages                    hash   stage id → key of the reporter that staged it
 *
 * `<ns>` is `kvcm:{<namespace>}:`; the braces make every key of one namespace one Redis Cluster
 * hash slot, so the multi-key Lua script stays legal there too. Instance ids have no control
 * characters (§4.1), so NUL separates the member's parts and sorts before every other byte.
 */
import { encodeSpecs } from './sqlite-meta-store.js';
import type { StoredLocation, StoredLocationStatus, StoredSpec } from './meta-store.js';

const INT64_MIN = -(1n << 63n);
const INT64_MAX = (1n << 63n) - 1n;
const OFFSET = 1n << 63n;

export function namespacePrefix(namespace: string): string {
  return `kvcm:{${namespace}}:`;
}

export function isInt64(v: bigint): boolean {
  return v >= INT64_MIN && v <= INT64_MAX;
}

/** Offset-binary hex: lexicographic order of the text = numeric order of the signed key. */
export function sortableKey(blockKey: bigint): string {
  return (blockKey + OFFSET).toString(16).padStart(16, '0');
}

export function blockKeyOfSortable(hex: string): bigint {
  return BigInt(`0x${hex}`) - OFFSET;
}

export function blockHashKey(ns: string, instanceId: string, blockKey: bigint): string {
  return `${ns}b:${instanceId}:${blockKey}`;
}

export function scanMember(instanceId: string, blockKey: bigint, locationId: string): string {
  return `${instanceId}\u0000${sortableKey(blockKey)}\u0000${locationId}`;
}

export interface ScanMemberParts {
  readonly instanceId: string;
  readonly blockKey: bigint;
  readonly locationId: string;
}

export function parseScanMember(member: string): ScanMemberParts | null {
  const a = member.indexOf('\u0000');
  const b = a < 0 ? -1 : member.indexOf('\u0000', a + 1);
  if (b < 0 || b - a !== 17) return null;
  return { instanceId: member.slice(0, a), blockKey: blockKeyOfSortable(member.slice(a + 1, b)), locationId: member.slice(b + 1) };
}

/**
 * A location's hash value without its rev: `status\ntype\ncreate_time_us\nstorage_name\nspecs`.
 * Storage names match `^[A-Za-z0-9_.-]+$` (§8) and the specs JSON escapes control characters,
 * so a newline never occurs inside a part; the Lua script edits status and specs by position.
 */
export function locationBody(l: Omit<StoredLocation, 'rev' | 'locationId'>): string {
  return `${l.status}\n${l.type}\n${l.createTimeUs}\n${l.storageName}\n${encodeSpecs(l.specs)}`;
}

/** Decodes `rev\n<body>` as stored; null for a value this layout did not write. */
export function decodeLocationValue(locationId: string, value: string): StoredLocation | null {
  const parts = value.split('\n', 5);
  if (parts.length < 5) return null;
  const specsStart = parts[0]!.length + parts[1]!.length + parts[2]!.length + parts[3]!.length + parts[4]!.length + 5;
  const pairs = JSON.parse(value.slice(specsStart)) as [string, string][];
  const specs: StoredSpec[] = new Array<StoredSpec>(pairs.length);
  for (let i = 0; i < pairs.length; i++) specs[i] = { name: pairs[i]![0], uri: pairs[i]![1] };
  return {
    locationId,
    storageName: parts[4]!,
    type: Number(parts[2]),
    status: Number(parts[1]) as StoredLocationStatus,
    createTimeUs: BigInt(parts[3]!),
    rev: Number(parts[0]),
    specs,
  };
}

/**
 * One staged snapshot row (LAND_STAGE_SCRIPT):
 * `inst\0key\0sortable\0status\0type\0create_time\0storage\0specs\0location_id`. Only the
 * location id, last, may hold a NUL (built from a reporter's medium and host): instance ids have
 * no control characters (§4.1), the specs JSON escapes them, the others are numbers and names.
 */
export function stagedRow(instanceId: string, blockKey: bigint, l: Omit<StoredLocation, 'rev'>): string {
  return `${instanceId}\u0000${blockKey}\u0000${sortableKey(blockKey)}\u0000${l.status}\u0000${l.type}\u0000${l.createTimeUs}\u0000${l.storageName}\u0000${encodeSpecs(l.specs)}\u0000${l.locationId}`;
}
