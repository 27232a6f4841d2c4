/**
 * getCacheLocationsByBackend (kvcm-meta §5.6; KVCM parity): per key, at most one location per
 * requested backend type. `LSS_WEIGHTED_RANDOM` gives each key its own §5.3 entry among the
 * type's candidates (deterministic §5.3 order, one of KVCM's random outcomes); the two V6D
 * strategies (L2 only) choose one peer across the keys. Read-only apart from hit statistics (§5.4).
 * Every field is read and checked before the store is touched.
 */
import { LocationSelectStrategy, QueryType, StorageType, enumName } from '../meta-enums.js';
import { MetaError, invalidFieldEntry, missingFields } from '../meta-errors.js';
import type { RpcResult } from '../http/meta-http-server.js';
import type { RequestReader } from '../wire/request-reader.js';
import { checkBlockMask, isMasked, readBlockMask } from '../keys/block-mask.js';
import { keysOf, readRawKeys } from '../keys/request-keys.js';
import { choosePrefixPeer, chooseCoveragePeer, peersOf } from '../lookup/backend-selection.js';
import type { KeyPeers } from '../lookup/backend-selection.js';
import { lookupEntryOf, peerEntryOf } from '../lookup/cache-location-wire.js';
import type { WireCacheLocation } from '../lookup/cache-location-wire.js';
import { selectLocation } from '../lookup/location-selection.js';
import type { SelectionContext } from '../lookup/location-selection.js';
import type { StoredBlock } from '../store/meta-store.js';
import type { DataPath } from '../write/data-path.js';
import { countLookup, selectionContext } from './lookup-context.js';
import type { RpcRegistrar } from './rpc-registrar.js';

const REQUEST = 'GetCacheLocationsByBackend';
const API = 'getCacheLocationsByBackend';

interface BackendSelector {
  readonly backendType: number;
  readonly strategy: number;
}

export function registerLocationsByBackendRpc(server: RpcRegistrar, dp: DataPath): void {
  server.registerRpc(API, (req) => getCacheLocationsByBackend(dp, req));
}

/** §5.6 selector rules; INVALID_ARGUMENT naming the selector list when one breaks them. */
function checkSelectors(selectors: readonly BackendSelector[]): void {
  if (selectors.length === 0) throw missingFields(REQUEST, ['backend_selectors']);
  const seen = new Set<number>();
  for (const s of selectors) {
    const v6d = s.strategy === LocationSelectStrategy.LSS_V6D_PREFIX || s.strategy === LocationSelectStrategy.LSS_V6D_COVERAGE;
    const ok =
      s.backendType !== StorageType.ST_UNSPECIFIED &&
      !seen.has(s.backendType) &&
      s.strategy !== LocationSelectStrategy.LSS_UNSPECIFIED &&
      (!v6d || s.backendType === StorageType.ST_EVENT_REPORT_L2);
    seen.add(s.backendType);
    if (!ok) {
      const wire = selectors.map((x) => ({ backend_type: enumName(StorageType, x.backendType), strategy: enumName(LocationSelectStrategy, x.strategy) }));
      throw missingFields(REQUEST, [invalidFieldEntry('backend_selectors', wire)]);
    }
  }
}

/** §5.6 query type: QT_BATCH_GET only (QT_UNSPECIFIED read as it, ours); MAMBA → UNSUPPORTED (§2). */
function checkQueryType(q: number): void {
  if (q === QueryType.QT_PREFIX_MATCH_WITH_MAMBA) throw new MetaError('UNSUPPORTED', 'QT_PREFIX_MATCH_WITH_MAMBA is not supported');
  if (q !== QueryType.QT_UNSPECIFIED && q !== QueryType.QT_BATCH_GET) {
    throw missingFields(REQUEST, [invalidFieldEntry('query_type', enumName(QueryType, q))]);
  }
}

async function getCacheLocationsByBackend(dp: DataPath, req: RequestReader): Promise<RpcResult> {
  const instanceId = req.str('instance_id');
  const queryType = req.enumOf('query_type', QueryType);
  const raw = readRawKeys(req);
  const mask = readBlockMask(req.message('block_mask'), 'block_mask');
  req.int32('sw_size'); // ignored (§5.1), read so a wrong JSON type is still a 400
  const specNames = req.strList('location_spec_names');
  const selectors: BackendSelector[] = req
    .messages('backend_selectors')
    .map((m) => ({ backendType: m.enumOf('backend_type', StorageType), strategy: m.enumOf('strategy', LocationSelectStrategy) }));
  if (instanceId === '') throw missingFields(REQUEST, ['instance_id']);
  checkQueryType(queryType);
  checkSelectors(selectors);

  const instance = await dp.instances.resolve(instanceId);
  const keys = keysOf(REQUEST, raw, instance.record, dp.limits.maxKeysPerRequest, dp.hasher);
  const n = keys.length;
  checkBlockMask(mask, n, 'block_mask');
  if (specNames.length > 0 && (specNames.length !== n || specNames.includes(''))) {
    throw missingFields(REQUEST, [invalidFieldEntry('location_spec_names', specNames)]);
  }

  const unmasked: number[] = [];
  for (let i = 0; i < n; i++) if (!isMasked(mask, i)) unmasked.push(i);
  const blocks = await dp.store.getBlocks(instanceId, unmasked.map((i) => keys[i] as bigint));
  const base = selectionContext(dp, instance, null);
  const keyLocations: WireCacheLocation[][] = new Array<WireCacheLocation[]>(n);
  for (let i = 0; i < n; i++) keyLocations[i] = [];
  const blockAt = (i: number): StoredBlock | undefined => blocks.get(keys[i] as bigint);
  for (const sel of selectors) {
    const contextOf = selectorContexts(base, sel.backendType, specNames);
    if (sel.strategy === LocationSelectStrategy.LSS_WEIGHTED_RANDOM) {
      for (const i of unmasked) {
        const entry = selectLocation(blockAt(i), contextOf(i));
        if (entry !== null) (keyLocations[i] as WireCacheLocation[]).push(lookupEntryOf(entry));
      }
      continue;
    }
    const keyPeers: KeyPeers[] = unmasked.map((i) => peersOf(blockAt(i), contextOf(i)));
    if (sel.strategy === LocationSelectStrategy.LSS_V6D_PREFIX) {
      const chosen = choosePrefixPeer(keyPeers);
      for (let j = 0; chosen !== null && j < chosen.count; j++) addPeerEntry(keyLocations, unmasked[j] as number, keyPeers[j] as KeyPeers, chosen.host);
    } else {
      const host = chooseCoveragePeer(keyPeers);
      for (let j = 0; host !== null && j < unmasked.length; j++) addPeerEntry(keyLocations, unmasked[j] as number, keyPeers[j] as KeyPeers, host);
    }
  }

  const nowUs = BigInt(base.nowMs) * 1000n;
  let hits = 0;
  for (const i of unmasked) {
    if ((keyLocations[i] as WireCacheLocation[]).length === 0) continue;
    hits++;
    dp.hits.record(instanceId, keys[i] as bigint, nowUs);
  }
  countLookup(dp, API, hits, unmasked.length - hits, n - unmasked.length);
  return { fields: { key_locations: keyLocations.map((locations) => ({ locations })) } };
}

/**
 * The selection context of key `i` for one selector: candidates of `backendType` holding the
 * key's spec name (any spec when no names are given). Keys asking for the same name share one.
 */
function selectorContexts(base: SelectionContext, backendType: number, specNames: readonly string[]): (i: number) => SelectionContext {
  const all: SelectionContext = { ...base, storageType: backendType };
  if (specNames.length === 0) return () => all;
  const byName = new Map<string, SelectionContext>();
  return (i) => {
    const name = specNames[i] as string;
    let ctx = byName.get(name);
    if (ctx === undefined) byName.set(name, (ctx = { ...all, specFilter: new Set([name]) }));
    return ctx;
  };
}

/** The chosen peer's entry for key `i`, when the peer holds it. */
function addPeerEntry(keyLocations: WireCacheLocation[][], i: number, peers: KeyPeers, host: string): void {
  const candidate = peers.get(host);
  if (candidate !== undefined) (keyLocations[i] as WireCacheLocation[]).push(peerEntryOf(candidate.location, candidate.specs));
}
