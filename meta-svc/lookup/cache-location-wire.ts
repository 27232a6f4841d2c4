/**
 * Wire forms of CacheLocation and CacheLocationDetail (kvcm-meta §3): enums as names, 64-bit
 * values as bigint (printed as JSON strings), every field present.
 */
import { CacheLocationStatus, StorageType, enumName } from '../meta-enums.js';
import type { CacheLocationStatusName } from '../meta-enums.js';
import type { StoredLocation, StoredSpec } from '../store/meta-store.js';

export interface WireLocationSpec {
  readonly name: string;
  readonly uri: string;
}

/** §3 CacheLocation; `id` and `status` are printed after `location_specs` (KVCM parity). */
export interface WireCacheLocation {
  readonly type: string;
  readonly spec_size: number;
  readonly location_specs: readonly WireLocationSpec[];
  readonly id: string;
  readonly status: string;
}

export interface WireCacheLocationDetail {
  readonly location_id: string;
  readonly status: string;
  readonly type: string;
  readonly spec_size: number;
  readonly create_time: bigint;
  readonly location_specs: readonly WireLocationSpec[];
}

/** §3 empty CacheLocation: `{"type":"ST_UNSPECIFIED","spec_size":0,"location_specs":[],"id":"","status":"CLS_NOT_FOUND"}`. */
export function emptyCacheLocation(): WireCacheLocation {
  return { type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [], id: '', status: 'CLS_NOT_FOUND' };
}

/** A CacheLocation of `specs` with the §3 `id` and `status`. Hot path: once per returned key. */
export function cacheLocationOf(type: number, specs: readonly StoredSpec[], id: string, status: CacheLocationStatusName): WireCacheLocation {
  const out: WireLocationSpec[] = new Array<WireLocationSpec>(specs.length);
  for (let i = 0; i < specs.length; i++) out[i] = { name: (specs[i] as StoredSpec).name, uri: (specs[i] as StoredSpec).uri };
  return { type: enumName(StorageType, type), spec_size: out.length, location_specs: out, id, status };
}

/**
 * §3 lookup entry built from stored locations: `id` = the winner's location_id + `_merged` (an
 * aggregated view, not a stored entity), `status` CLS_SERVING.
 */
export function lookupEntryOf(entry: { readonly location: StoredLocation; readonly specs: readonly StoredSpec[] }): WireCacheLocation {
  return cacheLocationOf(entry.location.type, entry.specs, `${entry.location.locationId}_merged`, 'CLS_SERVING');
}

/** §5.6 V6D peer entry: the stored location unchanged, `id` = its location_id, CLS_SERVING. */
export function peerEntryOf(location: StoredLocation, specs: readonly StoredSpec[]): WireCacheLocation {
  return cacheLocationOf(location.type, specs, location.locationId, 'CLS_SERVING');
}

/** §5.3 miss entry: the filtered registered spec names with uri "", `id` "", CLS_NOT_FOUND. */
export function missEntry(specNames: readonly string[]): WireCacheLocation {
  return {
    type: 'ST_UNSPECIFIED',
    spec_size: specNames.length,
    location_specs: specNames.map((name) => ({ name, uri: '' })),
    id: '',
    status: 'CLS_NOT_FOUND',
  };
}

export function cacheLocationDetailOf(loc: StoredLocation): WireCacheLocationDetail {
  return {
    location_id: loc.locationId,
    status: enumName(CacheLocationStatus, loc.status),
    type: enumName(StorageType, loc.type),
    spec_size: loc.specs.length,
    create_time: loc.createTimeUs,
    location_specs: loc.specs.map((s) => ({ name: s.name, uri: s.uri })),
  };
}

/** §5.2 getCacheMetaDetail: the single entry of a missing key. */
export function notFoundDetail(): WireCacheLocationDetail {
  return { location_id: '', status: 'CLS_NOT_FOUND', type: 'ST_UNSPECIFIED', spec_size: 0, create_time: 0n, location_specs: [] };
}
