/**
 * Lookup visibility of event-report locations (kvcm-meta §7.10). Used by getCacheLocation,
 * getCacheLocationLen, getCacheMeta `locations` and getHostCacheState; never by
 * getCacheMetaDetail.
 *
 * Hot path (once per looked-up key and location; 20,000 per getHostCacheState): the parts of
 * §7.10 that depend only on the stored row — (1) the id, (3) the spec count, (4) URI syntax,
 * (5) the s_version tokens — are computed once per row object and kept in a WeakMap. Stored
 * locations are immutable values and every write makes a new row object (new `rev`), so a row
 * object's facts never go stale; the store's block cache hands the same objects to every
 * request, so most lookups pay one WeakMap probe here. The reporter-dependent parts — (2)
 * liveness and (6) the fence — are read from the registry on every call.
 */
import type { StoredLocation } from '../store/meta-store.js';
import { hasUriSyntax, isEventReportStorageType, parseReportLocationId, storedSVersion } from './report-location-id.js';
import type { Reporter, ReporterRegistry } from './reporter-registry.js';

export interface EventReportVisibility {
  isVisible(instanceId: string, location: StoredLocation, nowMs: number): boolean;
}

/** True for locations §7.10 applies to (StorageType L1P5 or L2). */
export function isEventReportLocation(location: StoredLocation): boolean {
  return isEventReportStorageType(location.type);
}

/** §7.10 (1), (3), (4), (5) of one row, or null when one of them already hides it. */
interface RowFacts {
  readonly storageType: number;
  readonly hostIpPort: string;
  /** Lowercased s_version of each spec, '' for a legacy spec without one. */
  readonly versions: readonly string[];
  /** The reporter last found for this row, and for which instance (a cache of the registry lookup). */
  reporter: Reporter | undefined;
  reporterInstanceId: string;
}

/** §7.10 against the reporters of this process. Status and storage checks (§5.3) stay with the caller. */
export class ReporterVisibility implements EventReportVisibility {
  private readonly facts = new WeakMap<StoredLocation, RowFacts | null>();

  constructor(private readonly registry: ReporterRegistry) {}

  isVisible(instanceId: string, location: StoredLocation, nowMs: number): boolean {
    let f = this.facts.get(location);
    if (f === undefined) {
      f = rowFacts(location);
      this.facts.set(location, f);
    }
    if (f === null) return false;
    // (2) hard gate: the reporter is AVAILABLE in this process. A cached reporter is reused only
    // while the registry still holds that very record under its key (one Map probe, no key built).
    let reporter = f.reporter;
    if (reporter === undefined || f.reporterInstanceId !== instanceId || !this.registry.holds(reporter)) {
      reporter = this.registry.get(instanceId, f.storageType, f.hostIpPort);
      f.reporter = reporter;
      f.reporterInstanceId = instanceId;
    }
    if (!reporter || this.registry.liveness(reporter, nowMs) !== 'AVAILABLE') return false;
    // (6) strict needs one spec of the committed snapshot; soft takes every well-formed spec.
    const fence = reporter.fence;
    if (fence === '') return true;
    const versions = f.versions;
    for (let i = 0; i < versions.length; i++) if (versions[i] === fence) return true;
    return false;
  }
}

/** The row-only checks of §7.10; null = hidden whatever the reporter's state. */
function rowFacts(location: StoredLocation): RowFacts | null {
  // (1) the id names a reporter family matching the row's StorageType.
  const id = parseReportLocationId(location.locationId);
  if (!id || id.storageType !== location.type) return null;
  // (3) at least one spec.
  const specs = location.specs;
  if (specs.length === 0) return null;
  const versions: string[] = new Array<string>(specs.length);
  for (let i = 0; i < specs.length; i++) {
    const uri = (specs[i] as StoredLocation['specs'][number]).uri;
    // (4), (5): one malformed spec hides the whole location (fail closed).
    if (!hasUriSyntax(uri)) return null;
    const version = storedSVersion(uri);
    if (version === null) return null;
    versions[i] = version;
  }
  return { storageType: id.storageType, hostIpPort: id.hostIpPort, versions, reporter: undefined, reporterInstanceId: '' };
}
