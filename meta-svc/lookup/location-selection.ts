/**
 * Hit, selection and merge rules of the lookups (kvcm-meta §5.3). Pure: the caller passes the
 * block, the instance view, the §7.10 visibility and `nowMs`.
 *
 * A key hits when it has a visible location — CLS_SERVING, on a still-configured storage, and
 * for event-report locations §7.10 — with ≥1 spec left after the spec filter. The winner is the
 * best hit by storage rank, newest create_time, smallest location_id; the key's entry merges the
 * filtered specs of every visible location of the winner's *source* (one writable storage, or one
 * reporter: StorageType + host, all its media), winner first, first spec of each name kept
 * (KVCM parity).
 * Hot path (once per looked-up key): no allocation unless a spec filter drops specs or the
 * winner's source holds several visible locations of the key.
 */
import { CLS_SERVING } from '../store/meta-store.js';
import type { StoredBlock, StoredLocation, StoredSpec } from '../store/meta-store.js';
import type { EventReportVisibility } from '../report/event-report-visibility.js';
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { parseReportLocationId } from '../report/report-location-id.js';
import { storageRank } from './data-path-instance.js';
import type { DataPathInstance } from './data-path-instance.js';

export interface SelectionContext {
  readonly instance: DataPathInstance;
  readonly visibility: EventReportVisibility;
  readonly nowMs: number;
  /** §5.3 spec filter: null = keep all specs; otherwise any-of by name. */
  readonly specFilter: ReadonlySet<string> | null;
  /** §5.6 candidates of one backend type only; absent = every type. */
  readonly storageType?: number;
}

export interface SelectedLocation {
  /** The winner (its id, suffixed `_merged`, names the entry; §3). */
  readonly location: StoredLocation;
  /** The entry's specs: the filtered specs of the winner's source (≥ 1). */
  readonly specs: readonly StoredSpec[];
}

/** True when `loc` may be returned by a lookup, before the spec filter. */
export function isLookupVisible(loc: StoredLocation, ctx: SelectionContext): boolean {
  if (loc.status !== CLS_SERVING) return false;
  if (!ctx.instance.isConfiguredStorage(loc.storageName)) return false;
  if (isEventReportLocation(loc)) return ctx.visibility.isVisible(ctx.instance.record.instanceId, loc, ctx.nowMs);
  return true;
}

/** The specs of `loc` the §5.3 spec filter keeps (the same array when it keeps all). */
export function filteredSpecs(loc: StoredLocation, filter: ReadonlySet<string> | null): readonly StoredSpec[] {
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

/** The §5.3 entry of a block (winner and merged specs), or null for a miss. */
export function selectLocation(block: StoredBlock | undefined, ctx: SelectionContext): SelectedLocation | null {
  if (block === undefined) return null;
  let best: StoredLocation | null = null;
  let bestSpecs: readonly StoredSpec[] = [];
  let bestRank = 0;
  let hits = 0;
  for (const loc of block.locations) {
    if (!isCandidate(loc, ctx)) continue;
    const specs = filteredSpecs(loc, ctx.specFilter);
    if (specs.length === 0) continue;
    hits++;
    const rank = storageRank(ctx.instance, loc.storageName, loc.type);
    if (best === null || isPreferred(rank, loc, bestRank, best)) {
      best = loc;
      bestSpecs = specs;
      bestRank = rank;
    }
  }
  if (best === null) return null;
  if (hits === 1) return { location: best, specs: bestSpecs };
  return { location: best, specs: mergedSourceSpecs(block, best, bestSpecs, bestRank, ctx) };
}

function isCandidate(loc: StoredLocation, ctx: SelectionContext): boolean {
  return (ctx.storageType === undefined || loc.type === ctx.storageType) && isLookupVisible(loc, ctx);
}

/**
 * §5.3 merge: the winner's specs, then those of the source's other visible locations of the key in
 * selection order, keeping the first spec of each name. Only reached when the key has several hits.
 */
function mergedSourceSpecs(
  block: StoredBlock,
  winner: StoredLocation,
  winnerSpecs: readonly StoredSpec[],
  rank: number,
  ctx: SelectionContext,
): readonly StoredSpec[] {
  const others: StoredLocation[] = [];
  for (const loc of block.locations) {
    if (loc === winner || !sameSource(loc, winner) || !isCandidate(loc, ctx)) continue;
    if (filteredSpecs(loc, ctx.specFilter).length > 0) others.push(loc);
  }
  if (others.length === 0) return winnerSpecs;
  // One source has one rank, so the selection order is create_time, then location_id.
  others.sort((a, b) => (isPreferred(rank, a, rank, b) ? -1 : 1));
  const seen = new Set<string>();
  const out: StoredSpec[] = [];
  for (const s of winnerSpecs) {
    seen.add(s.name);
    out.push(s);
  }
  for (const loc of others) {
    for (const s of filteredSpecs(loc, ctx.specFilter)) {
      if (seen.has(s.name)) continue;
      seen.add(s.name);
      out.push(s);
    }
  }
  return out;
}

/**
 * §5.3 source: one writable storage (`global_unique_name`), or one reporter (StorageType and
 * `host_ip_port` of its location id, every medium).
 */
function sameSource(a: StoredLocation, b: StoredLocation): boolean {
  if (a.type !== b.type || a.storageName !== b.storageName) return false;
  if (!isEventReportLocation(a)) return true;
  return parseReportLocationId(a.locationId)?.hostIpPort === parseReportLocationId(b.locationId)?.hostIpPort;
}

/** §5.3 tie-break in one place: rank, then newest create_time, then smallest id. */
function isPreferred(rank: number, loc: StoredLocation, bestRank: number, best: StoredLocation): boolean {
  if (rank !== bestRank) return rank < bestRank;
  if (loc.createTimeUs !== best.createTimeUs) return loc.createTimeUs > best.createTimeUs;
  return loc.locationId < best.locationId;
}
