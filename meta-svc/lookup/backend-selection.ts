/**
 * The V6D peer choices of getCacheLocationsByBackend (kvcm-meta §5.6; KVCM parity). Pure: the
 * caller builds, per unmasked key in request order, the key's peers `P(i)` — the L2 reporters
 * (by `host_ip_port`) holding a visible candidate location of the key — and gets back which
 * peer serves which keys. Ties go to the smallest `host_ip_port` in byte order.
 */
import type { StoredBlock, StoredLocation, StoredSpec } from '../store/meta-store.js';
import { parseReportLocationId } from '../report/report-location-id.js';
import { filteredSpecs, isLookupVisible } from './location-selection.js';
import type { SelectionContext } from './location-selection.js';

/** A peer's location for one key: the chosen candidate and its filtered specs. */
export interface PeerCandidate {
  readonly location: StoredLocation;
  readonly specs: readonly StoredSpec[];
}

/** `P(i)` of one key: host_ip_port → that peer's candidate. */
export type KeyPeers = ReadonlyMap<string, PeerCandidate>;

const NO_PEERS: KeyPeers = new Map();

/**
 * `P(i)` of one block: each reporter's visible locations of `ctx.storageType` holding ≥1 spec
 * after the filter; per peer the newest `create_time`, then the smallest `location_id` (ours).
 */
export function peersOf(block: StoredBlock | undefined, ctx: SelectionContext): KeyPeers {
  if (block === undefined) return NO_PEERS;
  let peers: Map<string, PeerCandidate> | null = null;
  for (const loc of block.locations) {
    if (loc.type !== ctx.storageType || !isLookupVisible(loc, ctx)) continue;
    const specs = filteredSpecs(loc, ctx.specFilter);
    if (specs.length === 0) continue;
    const host = parseReportLocationId(loc.locationId)?.hostIpPort;
    if (host === undefined) continue;
    peers ??= new Map();
    const held = peers.get(host);
    if (held === undefined || isNewer(loc, held.location)) peers.set(host, { location: loc, specs });
  }
  return peers ?? NO_PEERS;
}

function isNewer(a: StoredLocation, b: StoredLocation): boolean {
  if (a.createTimeUs !== b.createTimeUs) return a.createTimeUs > b.createTimeUs;
  return a.locationId < b.locationId;
}

/** Byte order of UTF-8 strings (JS `<` compares UTF-16 units, which differs above U+FFFF). */
function byteLess(a: string, b: string): boolean {
  return Buffer.compare(Buffer.from(a, 'utf8'), Buffer.from(b, 'utf8')) < 0;
}

/** The better of two (host, score) pairs: higher score, then smaller host. */
function beats(host: string, score: number, bestHost: string | null, bestScore: number): boolean {
  if (bestHost === null || score > bestScore) return true;
  return score === bestScore && byteLess(host, bestHost);
}

/**
 * §5.6 LSS_V6D_PREFIX over `P` of the unmasked keys in order: the walk stops before the first key
 * with no peer; among the first walked key's peers, the one holding the longest gap-free run
 * from that key wins and serves exactly that run. null = nothing walked.
 */
export function choosePrefixPeer(keyPeers: readonly KeyPeers[]): { host: string; count: number } | null {
  let walked = 0;
  while (walked < keyPeers.length && (keyPeers[walked] as KeyPeers).size > 0) walked++;
  if (walked === 0) return null;
  let bestHost: string | null = null;
  let bestCount = 0;
  for (const host of (keyPeers[0] as KeyPeers).keys()) {
    let count = 1;
    while (count < walked && (keyPeers[count] as KeyPeers).has(host)) count++;
    if (beats(host, count, bestHost, bestCount)) {
      bestHost = host;
      bestCount = count;
    }
  }
  return bestHost === null ? null : { host: bestHost, count: bestCount };
}

/** §5.6 LSS_V6D_COVERAGE: the peer in the most `P(i)` (gaps allowed); null when no key has a peer. */
export function chooseCoveragePeer(keyPeers: readonly KeyPeers[]): string | null {
  const coverage = new Map<string, number>();
  for (const peers of keyPeers) for (const host of peers.keys()) coverage.set(host, (coverage.get(host) ?? 0) + 1);
  let bestHost: string | null = null;
  let bestCount = 0;
  for (const [host, count] of coverage) {
    if (beats(host, count, bestHost, bestCount)) {
      bestHost = host;
      bestCount = count;
    }
  }
  return bestHost;
}
