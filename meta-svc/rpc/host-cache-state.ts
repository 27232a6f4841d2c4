/**
 * getHostCacheState (kvcm-meta §5.5): per reporter host, how many leading `block_cache_keys`
 * it holds. Only visible (§7.10) event-report locations count; a host's L1P5 and L2 locations
 * are aggregated; `medium` filters by the location id's medium (lowercased).
 * Cost: keys are read in chunks and the scan stops as soon as no host is still matching.
 */
import { QueryType } from '../meta-enums.js';
import { MetaError, missingFields } from '../meta-errors.js';
import type { RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { isLookupVisible } from '../lookup/location-selection.js';
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { parseReportLocationId } from '../report/report-location-id.js';
import type { StoredLocation } from '../store/meta-store.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './rpc-registrar.js';
import { selectionContext } from './lookup-context.js';

const CHUNK = 1024;
const NO_LOCATIONS: readonly StoredLocation[] = [];

/** Per-request state of one reporter host. */
interface HostSlot {
  readonly host: string;
  /** Still holding every key so far. */
  alive: boolean;
  /** Index of the last key it was counted for (-1 = none). */
  lastHeld: number;
}

/** The host slot of an event-report location id, or null when the id is malformed or its medium is filtered out. */
function hostSlotOf(locationId: string, mediumFilter: ReadonlySet<string> | null, slotOfHost: Map<string, HostSlot>): HostSlot | null {
  const id = parseReportLocationId(locationId);
  if (id === null || (mediumFilter !== null && !mediumFilter.has(id.medium.toLowerCase()))) return null;
  let slot = slotOfHost.get(id.hostIpPort);
  if (slot === undefined) {
    slot = { host: id.hostIpPort, alive: false, lastHeld: -1 };
    slotOfHost.set(id.hostIpPort, slot);
  }
  return slot;
}

export function registerHostCacheStateRpc(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('getHostCacheState', (req) => getHostCacheState(dp, req));
}

async function getHostCacheState(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const requested = req.enumOf('query_type', QueryType);
  const keys = req.int64List('block_cache_keys');
  const media = req.strList('medium').map((m) => m.toLowerCase());
  if (instanceId === '') throw missingFields('GetHostCacheState', ['instance_id']);

  const instance = await dp.instances.resolve(instanceId);
  let q = requested !== QueryType.QT_UNSPECIFIED ? requested : instance.record.defaultQueryType;
  if (q === QueryType.QT_UNSPECIFIED) q = QueryType.QT_PREFIX_MATCH;
  if (q === QueryType.QT_PREFIX_MATCH_WITH_MAMBA) throw new MetaError('UNSUPPORTED', 'QT_PREFIX_MATCH_WITH_MAMBA is not supported');
  if (q !== QueryType.QT_PREFIX_MATCH) throw new MetaError('INVALID_ARGUMENT', 'getHostCacheState supports only QT_PREFIX_MATCH (§5.5)');
  if (keys.length > dp.limits.maxKeysPerRequest) {
    throw new MetaError('INVALID_ARGUMENT', `${keys.length} keys exceed limits.max_keys_per_request ${dp.limits.maxKeysPerRequest}`);
  }
  const mediumFilter = media.length === 0 ? null : new Set(media);
  const ctx = selectionContext(dp, instance, null);

  // One reporter's location id repeats on every key it holds: each id is parsed once per
  // request into the slot of its host (a host's L1P5 and L2 ids share one slot). Hot loop (once
  // per key and location): one Map probe by id, then plain field reads, no allocation.
  const slotOfId = new Map<string, HostSlot | null>();
  const slotOfHost = new Map<string, HostSlot>();
  // Hosts still matching every key so far; a host that misses key i ends with
  // prefix_match_blocks = i.
  let alive: HostSlot[] = [];
  const result = new Map<string, number>();
  let matched = 0;
  scan: for (let start = 0; start < keys.length; start += CHUNK) {
    const chunk = keys.slice(start, start + CHUNK);
    const blocks = await dp.store.getBlocks(instanceId, chunk);
    for (let c = 0; c < chunk.length; c++) {
      const block = blocks.get(chunk[c] as bigint);
      let held = 0;
      const locations = block === undefined ? NO_LOCATIONS : block.locations;
      for (let j = 0; j < locations.length; j++) {
        const loc = locations[j] as StoredLocation;
        if (!isEventReportLocation(loc)) continue;
        let slot = slotOfId.get(loc.locationId);
        if (slot === undefined) {
          slot = hostSlotOf(loc.locationId, mediumFilter, slotOfHost);
          slotOfId.set(loc.locationId, slot);
        }
        // Only hosts alive so far count (any host may start at key 0), each once per key.
        if (slot === null || (matched > 0 && !slot.alive) || slot.lastHeld === matched) continue;
        if (!isLookupVisible(loc, ctx)) continue;
        if (!slot.alive) {
          slot.alive = true;
          alive.push(slot);
        }
        slot.lastHeld = matched;
        held++;
      }
      // Common case: every live host held this key too, nothing to retire.
      if (held !== alive.length) {
        const still: HostSlot[] = [];
        for (const slot of alive) {
          if (slot.lastHeld === matched) still.push(slot);
          else {
            slot.alive = false;
            result.set(slot.host, matched);
          }
        }
        alive = still;
      }
      if (alive.length === 0) break scan;
      matched++;
    }
  }
  for (const slot of alive) result.set(slot.host, matched);
  const hosts = [...result.entries()]
    .filter(([, k]) => k > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    // §5.5: k three times — `local` (matched on the host itself), `global` (local + P2P + remote
    // pool; no such sources here) and the older `prefix_match_blocks` (KVCM parity).
    .map(([host, k]) => {
      const blocks = BigInt(k);
      return { host_ip_port: host, local: blocks, global: blocks, prefix_match_blocks: blocks };
    });
  return { fields: { hosts } };
}
