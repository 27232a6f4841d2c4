/**
 * Wire forms of CacheLocation and CacheLocationDetail (kvcm-meta §3): enums as names, 64-bit
 * values as bigint (printed as JSON strings), every field present.
 */
import { CacheLocationStatus, StorageType, enumName } from '../meta-enums.js';
import type { StoredLocation, StoredSpec } from '../store/meta-store.js';

export interface WireLocationSpec {
  readonly name: string;
  readonly uri: string;
}

export interface WireCacheLocation {
  readonly type: string;
  readonly spec_size: number;
  readonly location_specs: readonly WireLocationSpec[];
}

export interface WireCacheLocationDetail {
  readonly location_id: string;
  readonly status: string;
  readonly type: string;
  readonly spec_size: number;
  readonly create_time: bigint;
  readonly location_specs: readonly WireLocationSpec[];
}

/** §3: `{"type":"ST_UNSPECIFIED","spec_size":0,"location_specs":[]}`. */
export function emptyCacheLocation(): WireCacheLocation {
  return { type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [] };
}

export function cacheLocationOf(type: number, specs: readonly StoredSpec[]): WireCacheLocation {
  const out: WireLocationSpec[] = new Array<WireLocationSpec>(specs.length);
  for (let i = 0; i < specs.length; i++) out[i] = { name: (specs[i] as StoredSpec).name, uri: (specs[i] as StoredSpec).uri };
  return { type: enumName(StorageType, type), spec_size: out.length, location_specs: out };
}

/** §5.3 miss entry: the filtered registered spec names with uri "". */
export function missEntry(specNames: readonly string[]): WireCacheLocation {
  return {
    type: 'ST_UNSPECIFIED',
    spec_size: specNames.length,
    location_specs: specNames.map((name) => ({ name, uri: '' })),
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
