/**
 * The store mutations of reportEvent's two writes (kvcm-meta §7.5), pure: a folded ADD/DELETE
 * run becomes one `mergeSpecs` per location and a snapshot one in-place `putLocation` per block.
 * Neither needs a read first: the store merges specs and keeps create_time inside its
 * transaction, so two replicas writing one key never lose each other's specs (§9.4). The
 * executor builds them for requests it parsed itself, the report worker for the big ones it
 * parsed off the event loop.
 */
import { CLS_SERVING, type StoreMutation, type StoredSpec } from '../store/meta-store.js';
import type { ValidBlock, ValidEvent } from './report-events.js';
import { appendSVersion, formatReportLocationId } from './report-location-id.js';
import type { ReporterIdentity } from './reporter-registry.js';

export type DeltaEvent = Extract<ValidEvent, { kind: 'add' | 'delete' }>;

/**
 * §7.2 step 5: the run folded per location, last operation wins per spec name; one mergeSpecs
 * per (block, location) in first-mention order. Hot path (up to 100k events per request): one
 * location id string per medium, not per event, and one small record per (block, location).
 */
export function deltaMutations(target: ReporterIdentity, generation: string, events: readonly DeltaEvent[], createTimeUs: bigint): StoreMutation[] {
  const folded = new Map<bigint, FoldedLocation>();
  const order: FoldedLocation[] = [];
  const idOfMedium = new Map<string, string>();
  for (const e of events) {
    let locationId = idOfMedium.get(e.medium);
    if (locationId === undefined) idOfMedium.set(e.medium, (locationId = formatReportLocationId(target.storageType, e.medium, target.hostIpPort)));
    const loc = foldedLocation(folded, order, e.blockKey, locationId);
    if (e.kind === 'add') {
      for (const s of e.specs) setSpecOp(loc, s.name, appendSVersion(s.uri, generation));
    } else {
      for (const name of e.specNames) setSpecOp(loc, name, null);
    }
  }
  const mutations = new Array<StoreMutation>(order.length);
  for (let i = 0; i < order.length; i++) {
    const loc = order[i] as FoldedLocation;
    const put: StoredSpec[] = [];
    const remove: string[] = [];
    for (let j = 0; j < loc.names.length; j++) {
      const uri = loc.uris[j] as string | null;
      if (uri === null) remove.push(loc.names[j] as string);
      else put.push({ name: loc.names[j] as string, uri });
    }
    mutations[i] = {
      op: 'mergeSpecs',
      instanceId: target.instanceId,
      blockKey: loc.blockKey,
      location: { locationId: loc.locationId, storageName: target.storageName, type: target.storageType, status: CLS_SERVING, createTimeUs },
      put,
      remove,
    };
  }
  return mutations;
}

/**
 * §7.5 SNAPSHOT of blocks[from, to): each item's location replaced in place (same id,
 * create_time kept, spec set = exactly the item's specs, stamped with the candidate).
 */
export function snapshotMutations(target: ReporterIdentity, candidate: string, blocks: readonly ValidBlock[], nowUs: bigint, from = 0, to = blocks.length): StoreMutation[] {
  const mutations = new Array<StoreMutation>(to - from);
  let medium = '';
  let locationId = '';
  for (let i = from; i < to; i++) {
    const b = blocks[i] as ValidBlock;
    // Blocks of one medium usually come together: one id string per run of a medium.
    if (b.medium !== medium || locationId === '') {
      medium = b.medium;
      locationId = formatReportLocationId(target.storageType, medium, target.hostIpPort);
    }
    const specs: StoredSpec[] = new Array(b.specs.length);
    for (let j = 0; j < b.specs.length; j++) {
      const s = b.specs[j] as StoredSpec;
      specs[j] = { name: s.name, uri: appendSVersion(s.uri, candidate) };
    }
    mutations[i - from] = {
      op: 'putLocation',
      instanceId: target.instanceId,
      blockKey: b.blockKey,
      location: { locationId, storageName: target.storageName, type: target.storageType, status: CLS_SERVING, createTimeUs: nowUs, specs },
      keepCreateTime: true,
    };
  }
  return mutations;
}

/**
 * The folded operations of one location of one block in a delta run. `names[j]` gets
 * `uris[j]` (null = delete); names are in first-mention order and unique.
 */
interface FoldedLocation {
  readonly blockKey: bigint;
  readonly locationId: string;
  readonly names: string[];
  readonly uris: (string | null)[];
  /** name → index, built once a location has more names than a linear scan should cover. */
  index: Map<string, number> | null;
  /** The same block's next location (another medium), in first-mention order. */
  next: FoldedLocation | null;
}

const LINEAR_NAMES = 8;

/** The record of (blockKey, locationId), created at the end of the block's chain when new. */
function foldedLocation(folded: Map<bigint, FoldedLocation>, order: FoldedLocation[], blockKey: bigint, locationId: string): FoldedLocation {
  let loc = folded.get(blockKey);
  let last: FoldedLocation | null = null;
  while (loc !== undefined && loc.locationId !== locationId) {
    last = loc;
    loc = loc.next ?? undefined;
  }
  if (loc !== undefined) return loc;
  const created: FoldedLocation = { blockKey, locationId, names: [], uris: [], index: null, next: null };
  if (last === null) folded.set(blockKey, created);
  else last.next = created;
  order.push(created);
  return created;
}

/** Last operation wins (§7.2 step 5). */
function setSpecOp(loc: FoldedLocation, name: string, uri: string | null): void {
  const j = loc.index !== null ? (loc.index.get(name) ?? -1) : loc.names.indexOf(name);
  if (j >= 0) {
    loc.uris[j] = uri;
    return;
  }
  loc.names.push(name);
  loc.uris.push(uri);
  if (loc.index !== null) loc.index.set(name, loc.names.length - 1);
  else if (loc.names.length > LINEAR_NAMES) loc.index = new Map(loc.names.map((n, k) => [n, k]));
}
