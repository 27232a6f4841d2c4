/**
 * getHostCacheState (kvcm-meta §5.5): per reporter host, how many leading `block_cache_keys`
 * it holds. Only visible (§7.10) event-report locations count; a host's L1P5 and L2 locations
 * are aggregated; `medium` filters by the location id's medium (lowercased).
 * Cost: keys are read in chunks and the scan stops as soon as no host is still matching.
 */
import { QueryType } from '../meta-enums.js';
import { MetaError, missingFields } from '../meta-errors.js';
import type { RpcHandler } from '../http/meta-http-server.js';
import { isLookupVisible } from '../lookup/location-selection.js';
import { isEventReportLocation } from '../report/event-report-visibility.js';
import { parseReportLocationId } from '../report/report-location-id.js';
import type { DataPath } from '../write/data-path.js';
import type { RpcRegistrar } from './lookup.js';
import { selectionContext } from './lookup.js';

const CHUNK = 1024;

export function registerHostCacheStateRpc(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc('getHostCacheState', (req) => getHostCacheState(dp, req));
}

async function getHostCacheState(dp: DataPath, req: Parameters<RpcHandler>[0]): ReturnType<RpcHandler> {
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

  // One reporter's location id repeats on every key it holds: parse each id once per request.
  const hostOf = new Map<string, string | null>();
  // Hosts still matching every key so far, and the final count of hosts that dropped out.
  let alive: Set<string> | null = null;
  const result = new Map<string, number>();
  let matched = 0;
  scan: for (let start = 0; start < keys.length; start += CHUNK) {
    const chunk = keys.slice(start, start + CHUNK);
    const blocks = await dp.store.getBlocks(instanceId, chunk);
    for (const key of chunk) {
      const here = new Set<string>();
      for (const loc of blocks.get(key)?.locations ?? []) {
        if (!isEventReportLocation(loc) || !isLookupVisible(loc, ctx)) continue;
        let host = hostOf.get(loc.locationId);
        if (host === undefined) {
          const id = parseReportLocationId(loc.locationId);
          host = id === null || (mediumFilter !== null && !mediumFilter.has(id.medium.toLowerCase())) ? null : id.hostIpPort;
          hostOf.set(loc.locationId, host);
        }
        if (host !== null) here.add(host);
      }
      const next: Set<string> = alive === null ? here : new Set([...alive].filter((h) => here.has(h)));
      if (alive !== null) for (const h of alive) if (!next.has(h)) result.set(h, matched);
      alive = next;
      if (alive.size === 0) break scan;
      matched++;
    }
  }
  if (alive !== null) for (const h of alive) result.set(h, matched);
  const hosts = [...result.entries()]
    .filter(([, k]) => k > 0)
    .sort((a, b) => b[1] - a[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
    .map(([host, k]) => ({ host_ip_port: host, prefix_match_blocks: BigInt(k) }));
  return { fields: { hosts } };
}
