/**
 * Pure: from the instance table and the discovery config to the set of streams the directory
 * should subscribe to (discovery.md "From instances to streams", kv-events §1). The reconciler
 * diffs this plan against the running subscribers; nothing here touches a socket.
 *
 * Cost: O(total ranks) per plan, run every `refresh_interval_ms`, never on a request path.
 */
import type { DiscoveryConfig } from '../../shared/config/kv-events-config.js';
import { DEFAULT_HASH_SEED } from '../../shared/config/kv-events-config.js';
import type { SubscriberStreamConfig } from '../subscription/stream-config.js';
import type { EngineIdentitySource } from '../engines/engine-identity.js';
import { engineRanks } from '../engines/engine-ranks.js';
import type { EngineEntry } from '../engines/engines-file.js';
import type { KvEventSource } from '../engines/kv-event-sources.js';
import { splitInstanceName } from './instance-json.js';
import type { InstanceView } from './instance-table.js';

/** One wanted stream: the subscriber config plus the identity the reconciler compares. */
export interface PlannedStream extends SubscriberStreamConfig {
  /**
   * Everything that, when changed, needs a fresh subscriber: the instance generation (so a
   * replacement never inherits the old index), addresses, block size, topic, seed and kind.
   */
  readonly planKey: string;
  readonly generation: number;
  readonly incarnationId: string | null;
}

export type PlanExclusionClass = 'bad_name' | 'port_overflow' | 'endpoint_conflict' | 'max_streams' | 'no_event_sources';

/** Instances left out of the plan, with the reason for diagnostics and the error log. */
export interface PlanExclusion {
  readonly class: PlanExclusionClass;
  /** Every affected instance, in name order. */
  readonly instances: readonly string[];
  readonly detail: string;
}

export interface StreamPlan {
  /** In instance name order, then dp_rank. */
  readonly streams: readonly PlannedStream[];
  readonly exclusions: readonly PlanExclusion[];
}

const MAX_PORT = 65535;

/** The engines-file scraper of an instance (engines.md §4.3), passed into its streams' configs. */
export type EngineIdentityLookup = (name: string) => EngineIdentitySource | undefined;

/** Whether an instance's KV events are subscribed at all (discovery.md: never DECODE, only xllm). */
export function isSubscribable(inst: InstanceView): boolean {
  // engines.md §4.1: a SUSPECT engines-file instance keeps its streams; DECODE is never subscribed.
  if (inst.source === 'engines_file') return inst.registration.type !== 'DECODE';
  if (!inst.schedulable) return false; // SUSPECT: subscriptions removed
  const reg = inst.registration;
  if (reg.backendType !== 'xllm') return false;
  if (reg.type === 'DEFAULT' || reg.type === 'PREFILL') return true;
  return reg.type === 'MIX' && inst.currentRole === 'PREFILL';
}

interface Candidate {
  readonly inst: InstanceView;
  readonly streams: PlannedStream[];
}

/**
 * The wanted streams. `instances` may be in any order; the plan takes them in name order so
 * `max_streams` decisions are stable from one refresh to the next. Etcd and engines-file
 * instances share one plan: endpoint conflicts and `max_streams` are checked across both.
 */
export function planStreams(
  instances: readonly InstanceView[],
  discovery: DiscoveryConfig | null,
  maxStreams: number,
  engineIdentity?: EngineIdentityLookup,
): StreamPlan {
  const exclusions: PlanExclusion[] = [];
  // Null or disabled: etcd instances get no streams; engines-file instances still do.
  const cfg = discovery !== null && discovery.enabled ? discovery : null;
  const sorted = [...instances]
    .filter((i) => isSubscribable(i) && (i.engine !== null || cfg !== null))
    .sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));

  // 1. Endpoints per instance; a port above 65535 excludes that instance. Engines-file entries
  //    give their endpoints (checked when the file was read), etcd ones derive them from the name.
  const candidates: Candidate[] = [];
  for (const inst of sorted) {
    if (inst.engine !== null) {
      const identity = engineIdentity?.(inst.name);
      const ranks = engineRanks(inst.engine);
      if (ranks.length === 0) {
        // engines.md §6: routable by load, but nothing to subscribe to: say why in diagnostics.
        const detail = inst.engine.eventSources !== null ? 'GET /kv_event_sources lists no publisher' : 'no GET /kv_event_sources answer and no event_port in its entry';
        exclusions.push({ class: 'no_event_sources', instances: [inst.name], detail: `instance ${inst.name} has no KV event streams: ${detail}` });
        continue;
      }
      const streams: PlannedStream[] = [];
      for (const rank of ranks) streams.push(engineStream(inst, inst.engine, rank, identity));
      candidates.push({ inst, streams });
      continue;
    }
    if (cfg === null) continue;
    const addr = splitInstanceName(inst.name);
    if (addr === null) {
      exclusions.push({ class: 'bad_name', instances: [inst.name], detail: `instance ${inst.name} is not host:port` });
      continue;
    }
    const n = inst.registration.dpSize;
    const lastEvent = addr.port + cfg.eventPortOffset + n - 1;
    const lastReplay = addr.port + cfg.replayPortOffset + n - 1;
    if (lastEvent > MAX_PORT || lastReplay > MAX_PORT) {
      exclusions.push({
        class: 'port_overflow',
        instances: [inst.name],
        detail: `instance ${inst.name} (dp_size ${n}) needs ports up to ${Math.max(lastEvent, lastReplay)}, above ${MAX_PORT}`,
      });
      continue;
    }
    const streams: PlannedStream[] = [];
    for (let r = 0; r < n; r++) streams.push(plannedStream(inst, addr.host, addr.port, r, cfg));
    candidates.push({ inst, streams });
  }

  // 2. An endpoint used twice (events or recovery, within or across instances) excludes every
  //    instance that uses it (kv-events §1).
  const claims = new Map<string, string[]>();
  for (const c of candidates) {
    for (const s of c.streams) {
      for (const ep of [s.endpoint, s.replayEndpoint]) {
        if (ep === '') continue; // an engine without a replay endpoint (engines.md §3)
        const key = ep.toLowerCase();
        const users = claims.get(key);
        if (users === undefined) claims.set(key, [c.inst.name]);
        else users.push(c.inst.name);
      }
    }
  }
  const conflicted = new Set<string>();
  for (const [endpoint, users] of claims) {
    if (users.length < 2) continue;
    const names = [...new Set(users)].sort();
    for (const n of names) conflicted.add(n);
    exclusions.push({
      class: 'endpoint_conflict',
      instances: names,
      detail: `endpoint ${endpoint} is claimed ${users.length} times by ${names.join(', ')}; all excluded`,
    });
  }

  // 3. max_streams: whole instances in name order; one that does not fit is skipped, never split.
  const streams: PlannedStream[] = [];
  for (const c of candidates) {
    if (conflicted.has(c.inst.name)) continue;
    if (streams.length + c.streams.length > maxStreams) {
      exclusions.push({
        class: 'max_streams',
        instances: [c.inst.name],
        detail: `instance ${c.inst.name} needs ${c.streams.length} streams; ${streams.length} of max_streams ${maxStreams} already planned`,
      });
      continue;
    }
    streams.push(...c.streams);
  }
  return { streams, exclusions };
}

function plannedStream(inst: InstanceView, host: string, port: number, rank: number, cfg: DiscoveryConfig): PlannedStream {
  const endpoint = `tcp://${host}:${port + cfg.eventPortOffset + rank}`;
  const replayEndpoint = `tcp://${host}:${port + cfg.replayPortOffset + rank}`;
  const hashSeed = BigInt(DEFAULT_HASH_SEED);
  return Object.freeze({
    instanceName: inst.name,
    dpRank: rank,
    blockSize: cfg.blockSize,
    endpoint,
    replayEndpoint,
    topic: cfg.topic,
    hashSeed,
    engineKind: 'xllm',
    generation: inst.generation,
    incarnationId: inst.registration.incarnationId,
    planKey: [inst.generation, inst.name, rank, endpoint, replayEndpoint, cfg.blockSize, cfg.topic, hashSeed, 'xllm'].join('|'),
  });
}

/**
 * One rank of an engines-file engine (engine-ranks.ts: its `/kv_event_sources` answer, or the
 * entry's ports `+ r` as dp_rank `dp_rank_offset + r`, engines.md §4, §6). No replay endpoint is ''
 * (the subscriber then follows §3's rules).
 */
function engineStream(inst: InstanceView, engine: EngineEntry, rank: KvEventSource, identity: EngineIdentitySource | undefined): PlannedStream {
  const endpoint = rank.endpoint;
  const replayEndpoint = rank.replayEndpoint ?? '';
  const hashSeed = BigInt(DEFAULT_HASH_SEED);
  const dpRank = rank.dpRank;
  const topic = rank.topic;
  return Object.freeze({
    instanceName: inst.name,
    dpRank,
    blockSize: engine.blockSize,
    endpoint,
    replayEndpoint,
    topic,
    hashSeed,
    engineKind: engine.kind,
    ...(identity !== undefined ? { identity } : {}),
    generation: inst.generation,
    incarnationId: inst.registration.incarnationId,
    planKey: [inst.generation, inst.name, dpRank, endpoint, replayEndpoint, engine.blockSize, topic, hashSeed, engine.kind].join('|'),
  });
}
