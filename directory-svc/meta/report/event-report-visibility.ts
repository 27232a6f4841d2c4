/**
 * Lookup visibility of event-report locations (kvcm-meta §7.10). Used by getCacheLocation,
 * getCacheLocationLen, getCacheMeta `locations` and getHostCacheState; never by
 * getCacheMetaDetail. Hot path: one id split, one map lookup and one pass over the specs per
 * location, no allocation beyond the split.
 */
import type { StoredLocation } from '../store/meta-store.js';
import { hasUriSyntax, isEventReportStorageType, parseReportLocationId, storedSVersion } from './report-location-id.js';
import type { ReporterRegistry } from './reporter-registry.js';

export interface EventReportVisibility {
  isVisible(instanceId: string, location: StoredLocation, nowMs: number): boolean;
}

/** True for locations §7.10 applies to (StorageType L1P5 or L2). */
export function isEventReportLocation(location: StoredLocation): boolean {
  return isEventReportStorageType(location.type);
}

/** §7.10 against the reporters of this process. Status and storage checks (§5.3) stay with the caller. */
export class ReporterVisibility implements EventReportVisibility {
  constructor(private readonly registry: ReporterRegistry) {}

  isVisible(instanceId: string, location: StoredLocation, nowMs: number): boolean {
    // (1) the id names a reporter family matching the row's StorageType.
    const id = parseReportLocationId(location.locationId);
    if (!id || id.storageType !== location.type) return false;
    // (2) hard gate: the reporter is AVAILABLE in this process.
    const reporter = this.registry.get(instanceId, id.storageType, id.hostIpPort);
    if (!reporter || this.registry.liveness(reporter, nowMs) !== 'AVAILABLE') return false;
    // (3) at least one spec.
    if (location.specs.length === 0) return false;
    const fence = reporter.fence;
    let fenced = false;
    for (const spec of location.specs) {
      // (4), (5): one malformed spec hides the whole location (fail closed).
      if (!hasUriSyntax(spec.uri)) return false;
      const version = storedSVersion(spec.uri);
      if (version === null) return false;
      if (fence !== '' && version === fence) fenced = true;
    }
    // (6) strict needs one spec of the committed snapshot; soft takes every well-formed spec.
    return fence === '' || fenced;
  }
}
