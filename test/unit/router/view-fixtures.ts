/**
 * Builders of WatchView messages in their wire shape (shared/view/view-wire.ts), used by the view
 * cache and policy suites (decoded through the real decoder) and by the protocol suite (sent by a
 * real grpc-js server). Defaults: a DEFAULT instance, ACTIVE, with a load report, one DP rank,
 * incarnation `inc-<name>`, generation 1; a synchronized stream of block_size 4, seed 1024.
 */
import { createPolicy, type PolicyFlags } from '../../../router-svc/policy/create-policy.js';
import type { CandidateExplanation, RouteDecision } from '../../../router-svc/policy/policy-types.js';
import { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import type { ClaimOrder } from '../../../router-svc/inflight/claim-order.js';
import type { InflightLoad } from '../../../router-svc/inflight/inflight-load.js';
import { ContentKeyHasher } from '../../../shared/keys/content-key.js';
import { PLAIN_IDENTITY, type KeyIdentity } from '../../../shared/keys/cache-identity.js';
import type { WireServedModels } from '../../../shared/view/view-wire.js';
import { TIER_BOTH, TIER_DEVICE, TIER_HOST } from '../../../shared/keys/tier-bits.js';
import type {
  WireResidencyChanges,
  WireViewDelta,
  WireViewInstance,
  WireViewLoad,
  WireViewStream,
  WireViewUpdate,
} from '../../../shared/view/view-wire.js';
import type { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { decodeViewUpdate } from '../../../router-svc/viewcache/view-update.js';

export const DEVICE = TIER_DEVICE;
export const HOST = TIER_HOST;
export const BOTH = TIER_BOTH;

export function wireLoad(waiting: number, gpuCacheUsagePerc = 0): WireViewLoad {
  return { waiting_requests_num: String(waiting), gpu_cache_usage_perc: gpuCacheUsagePerc, recent_max_ttft: 0, recent_max_tbt: 0, reported_at_ms: '1' };
}

export function wireInstance(name: string, over: Partial<WireViewInstance> = {}): WireViewInstance {
  return {
    name,
    type: 'DEFAULT',
    current_role: '',
    incarnation_id: `inc-${name}`,
    register_ts_ms: '1000',
    dp_size: 1,
    state: 'ACTIVE',
    schedulable: true,
    load: wireLoad(0),
    ttft_profiling_data: [],
    tpot_profiling_data: [],
    generation: '1',
    ...over,
  };
}

export function wireStream(streamId: number, instanceName: string, over: Partial<WireViewStream> = {}): WireViewStream {
  return {
    stream_id: streamId,
    instance_name: instanceName,
    dp_rank: 0,
    block_size: 4,
    hash_seed: '1024',
    incarnation_id: `inc-${instanceName}`,
    generation: '1',
    synchronized: true,
    sequence: '7',
    error: '',
    device_blocks: '0',
    host_blocks: '0',
    keys: new Uint8Array(0),
    tiers: new Uint8Array(0),
    ...over,
  };
}

/** A served-model list (cache-identity §1) in its wire shape: `base`, then adapters of it. */
export function served(base: string, ...adapters: string[]): WireServedModels {
  return { data: [{ name: base, parent: '' }, ...adapters.map((name) => ({ name, parent: base }))] };
}

/** Residency blobs: `keys` holds the listed 16-byte keys, each with its tier byte. */
export function residency(keys: readonly Uint8Array[], tiers: readonly number[]): { keys: Uint8Array; tiers: Uint8Array } {
  const k = new Uint8Array(keys.length * 16);
  keys.forEach((key, i) => k.set(key.subarray(0, 16), i * 16));
  return { keys: k, tiers: Uint8Array.from(tiers) };
}

export function residencyChanges(streamId: number, keys: readonly Uint8Array[], tiers: readonly number[]): WireResidencyChanges {
  return { stream_id: streamId, ...residency(keys, tiers) };
}

export function snapshot(epoch: string, version: number, instances: WireViewInstance[], streams: WireViewStream[]): WireViewUpdate {
  return { epoch, version: String(version), body: 'snapshot', snapshot: { instances, streams }, sent_at_ms: '0' };
}

export function delta(epoch: string, version: number, d: Partial<WireViewDelta>): WireViewUpdate {
  return {
    epoch,
    version: String(version),
    body: 'delta',
    delta: { instance_removals: [], instance_upserts: [], stream_removals: [], stream_upserts: [], stream_resets: [], residency: [], ...d },
    sent_at_ms: '0',
  };
}

export function heartbeat(epoch: string, version: number): WireViewUpdate {
  return { epoch, version: String(version), body: 'heartbeat', heartbeat: {}, sent_at_ms: '0' };
}

/**
 * The §4 keys of `tokens`' complete blocks, one 16-byte key per block; under `identity`
 * (cache-identity §3: LoRA name, salt) when given.
 */
export async function blockKeys(tokens: readonly number[], blockSize = 4, seed = 1024, identity: KeyIdentity = PLAIN_IDENTITY): Promise<Uint8Array[]> {
  const hasher = await ContentKeyHasher.forSeed(seed);
  const chain = hasher.chain(tokens, blockSize, undefined, identity);
  const out: Uint8Array[] = [];
  for (let b = 0; b * 16 < chain.length; b++) out.push(chain.slice(b * 16, b * 16 + 16));
  return out;
}

/** Decodes `wire` with the real decoder, loads its hashers, applies it (as the view client does). */
export async function apply(cache: ViewCache, wire: WireViewUpdate, nowMs: number): Promise<void> {
  const u = decodeViewUpdate(wire);
  await cache.hashers.ensure(cache.missingSeeds(u));
  cache.applyUpdate(u, nowMs);
}

/** 1, 2, 3, … n */
export function tokens(n: number, first = 1): number[] {
  return Array.from({ length: n }, (_, i) => first + i);
}

/** A decision's explanation of the P candidate `name` (throws when it is not listed). */
export function explained(d: RouteDecision, name: string): CandidateExplanation {
  const c = d.candidates.find((x) => x.instance_name === name && x.role === 'prefill');
  if (c === undefined) throw new Error(`no candidate ${name}`);
  return c;
}

/** A RouteDecider of `flags`' policy over `view`, with metrics nobody reads (the routing suites) unless given. */
export function testDecider(
  view: ViewCache,
  flags: PolicyFlags,
  inflight: InflightLoad | null = null,
  pendingPrefix = false,
  claims: ClaimOrder | null = null,
  metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 })),
): RouteDecider {
  return new RouteDecider(createPolicy(flags, inflight), view, metrics, flags.loadBalancePolicy, inflight, pendingPrefix, claims);
}
