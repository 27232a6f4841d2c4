/**
 * Hit and selection rules of the lookups (kvcm-meta §5.3). Pure: the caller passes the block,
 * the instance view, the §7.10 visibility and `nowMs`.
 *
 * A key hits when it has a visible location — CLS_SERVING, on a still-configured storage, and
 * for event-report locations §7.10 — with ≥1 spec left after the spec filter. Among hits:
 * storage rank, newest create_time, smallest location_id.
 * Hot path (once per looked-up key): no allocation unless a spec filter drops specs.
 */
import { CLS_SERVING } from '../store/meta-store.js';
import type { StoredBlock, StoredLocation, StoredSpec } from '../store/meta-store.js';
import type { EventReportVisibility } from '../report/event-report-visibility.js';
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { storageRank } from './data-path-instance.js';
import type { DataPathInstance } from './data-path-instance.js';

export interface SelectionContext {
  readonly instance: DataPathInstance;
  readonly visibility: EventReportVisibility;
  readonly nowMs: number;
  /** §5.3 spec filter: null = keep all specs; otherwise any-of by name. */
  readonly specFilter: ReadonlySet<string> | null;
}

export interface SelectedLocation {
  readonly location: StoredLocation;
  /** The specs left after the filter (≥ 1). */
  readonly specs: readonly StoredSpec[];
}

/** True when `loc` may be returned by a lookup, before the spec filter. */
export function isLookupVisible(loc: StoredLocation, ctx: SelectionContext): boolean {
  if (loc.status !== CLS_SERVING) return false;
  if (!ctx.instance.isConfiguredStorage(loc.storageName)) return false;
  if (isEventReportLocation(loc)) return ctx.visibility.isVisible(ctx.instance.record.instanceId, loc, ctx.nowMs);
  return true;
}

function filteredSpecs(loc: StoredLocation, filter: ReadonlySet<string> | null): readonly StoredSpec[] {
  if (filter === null) return loc.specs;
  let all = true;
  for (const s of loc.specs) {
    if (!filter.has(s.name)) {
      all = false;
      break;
    }
  }
  return all ? loc.specs : loc.specs.filter((s) => filter.has(s.name));
}

/** The §5.3 selected location of a block, or null for a miss. */
export function selectLocation(block: StoredBlock | undefined, ctx: SelectionContext): SelectedLocation | null {
  if (block === undefined) return null;
  let best: SelectedLocation | null = null;
  let bestRank = 0;
  for (const loc of block.locations) {
    if (!isLookupVisible(loc, ctx)) continue;
    const specs = filteredSpecs(loc, ctx.specFilter);
    if (specs.length === 0) continue;
    const rank = storageRank(ctx.instance, loc.storageName, loc.type);
    if (best === null || isPreferred(rank, loc, bestRank, best.location)) {
      best = { location: loc, specs };
      bestRank = rank;
    }
  }
  return best;
}

/** §5.3 tie-break in one place: rank, then newest create_time, then smallest id. */
function isPreferred(rank: number, loc: StoredLocation, bestRank: number, best: StoredLocation): boolean {
  if (rank !== bestRank) return rank < bestRank;
  if (loc.createTimeUs !== best.createTimeUs) return loc.createTimeUs > best.createTimeUs;
  return loc.locationId < best.locationId;
}
