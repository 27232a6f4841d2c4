/**
 * The view stream's messages decoded into domain types (architecture.md "The view stream"):
 * 64-bit values as bigint, enums checked, residency blobs checked (N × 16 key bytes for N tier
 * bytes). `decodeViewUpdate` is the only place that reads the Wire… shapes; a malformed message is
 * a ViewProtocolError, so the cache never applies part of one.
 */
import { FINGERPRINT_BYTES_EXPECTED, fingerprintsOf, PENDING_PROMPTS_PER_SHARE } from '../../shared/keys/prompt-fingerprint.js';
import type {
  WireInflightShare,
  WireOutstandingPrefill,
  WireProfilePoint,
  WireResidencyChanges,
  WireViewInstance,
  WireViewLoad,
  WireViewStream,
  WireViewUpdate,
} from '../../shared/view/view-wire.js';
import { ViewProtocolError } from './view-errors.js';
import type { StreamIdentity } from '../../shared/keys/stream-key.js';
import type { ServedModel, ServedModelList } from '../../shared/view/served-models.js';
import { ENGINE_KINDS, type EngineKind } from '../../shared/config/engine-kind.js';
import { carriesLastEnd, NO_LAST_END, type WireServedModels } from '../../shared/view/view-wire.js';
import { performance } from 'node:perf_hooks';

export type InstanceType = 'DEFAULT' | 'PREFILL' | 'DECODE' | 'MIX';
export type InstanceRole = 'PREFILL' | 'DECODE';
export type InstanceState = 'ACTIVE' | 'LEASE_LOST' | 'SUSPECT';

/** A stream's id within one epoch (proto ViewStream.stream_id). */
export type StreamId = number & { readonly __brand: 'StreamId' };

/** Latest valid heartbeat load (discovery.md "Heartbeats"). */
export interface InstanceLoad {
  readonly waitingRequestsNum: number;
  readonly gpuCacheUsagePerc: number;
  readonly recentMaxTtftMs: number;
  readonly recentMaxTbtMs: number;
  readonly reportedAtMs: number;
}

/** One instance as the router sees it (discovery.md instance JSON + state + load). */
export interface RouterInstance {
  readonly name: string;
  readonly type: InstanceType;
  /** MIX only (default PREFILL, discovery.md); '' for the other types. */
  readonly currentRole: InstanceRole | '';
  readonly incarnationId: string;
  readonly registerTsMs: number;
  readonly dpSize: number;
  readonly state: InstanceState;
  readonly schedulable: boolean;
  /** null: no valid load report yet, so not a routing candidate. */
  readonly load: InstanceLoad | null;
  /** [input_tokens, ttft_ms] points, as registered. */
  readonly ttftProfile: readonly (readonly number[])[];
  /** [batch_size, total_tokens, tpot_ms] points, as registered. */
  readonly tpotProfile: readonly (readonly number[])[];
  readonly generation: bigint;
  /** Where the proxy forwards: the engines-file base URL; absent for `http://<name>` (engines.md §4). */
  readonly url?: string;
  /**
   * In-flight load the directory folded from every router's reports (routing.md "In-flight
   * load"), per reporting router; empty when none.
   */
  readonly inflight: readonly InflightShare[];
  /** cache-identity §1: the models it serves; null = unknown (a candidate for every model). */
  readonly models: ServedModelList;
  /** Where the directory learned of it: "etcd", "engines_file", "dns:<name>"; '' when not said. */
  readonly source: string;
}

export interface InflightShare {
  readonly routerId: string;
  readonly count: number;
  /** Prompt fingerprints of the router's counted decisions (pending prefix credit), oldest first. */
  readonly prompts: readonly Uint32Array[];
  /**
   * Per prompt, the directory's arrival order of its decision (serial numbers, claim-order.ts);
   * empty when the directory sent none.
   */
  readonly seqs: readonly number[];
  /** Summed predicted prefill tokens of the `prefillTokenDecisions` (≤ count) decisions that carried them. */
  readonly prefillTokens: number;
  readonly prefillTokenDecisions: number;
  /** The router's proxied requests there before their first token, and their prefill tokens (0 and 0: none reported). */
  readonly outstandingRequests: number;
  readonly outstandingTokens: number;
  /**
   * The oldest of them (the head the engine prefills first): its tokens (0: not reported), when
   * the router sent it and when it last saw a first token there (−∞: none), on this process's
   * monotonic clock (the ages as received, from when the update was received).
   */
  readonly headTokens: number;
  readonly headStartMs: number;
  readonly lastEndMs: number;
  /** Prompt fingerprints of the newest of them (pending prefix credit until their first token), oldest first. */
  readonly outstandingPrompts: readonly Uint32Array[];
  /** Per outstanding prompt, its prefill tokens; empty when the router sent none (claim order then takes the mean). */
  readonly outstandingPromptTokens: readonly number[];
  /** The seqs of the router's open claims here (claim order: it may still move them), oldest first; empty when none. */
  readonly openClaimSeqs: readonly number[];
}

/** No shares: a stale view's (nobody expires the other replicas' shares then), or no in-flight load. */
export const NO_SHARES: readonly InflightShare[] = Object.freeze([]);

/** One stream's identity and state as the view stream describes it (proto ViewStream). */
export interface ViewStreamState extends StreamIdentity {
  readonly streamId: StreamId;
  readonly blockSize: number;
  readonly hashSeed: bigint;
  /** The registration the stream was subscribed for ('' for static streams). */
  readonly incarnationId: string;
  readonly generation: bigint;
  readonly synchronized: boolean;
  /** `last`, −1n when none (kv-events §8). */
  readonly sequence: bigint;
  readonly error: string;
  /** engines.md §1; xllm when the directory did not say. */
  readonly engineKind: EngineKind;
}

/** One stream's identity and state; residency only in snapshots and resets. */
export interface DecodedViewStream extends ViewStreamState {
  /** N × 16 bytes, low64 LE || high64 LE (kv-events §4). */
  readonly keys: Uint8Array;
  /** N tier bytes: 1 Device, 2 Host, 3 both (0 = not resident, only in residency changes). */
  readonly tiers: Uint8Array;
}

export interface DecodedResidencyChanges {
  readonly streamId: StreamId;
  readonly keys: Uint8Array;
  readonly tiers: Uint8Array;
}

interface UpdateHead {
  readonly epoch: string;
  /** Snapshot: the version it reflects; delta: the new version; heartbeat: the current one. */
  readonly version: bigint;
  readonly sentAtMs: number;
}

export interface DecodedSnapshot extends UpdateHead {
  readonly kind: 'snapshot';
  readonly instances: readonly RouterInstance[];
  readonly streams: readonly DecodedViewStream[];
}

/** Applied in this field order (proto ViewDelta). */
export interface DecodedDelta extends UpdateHead {
  readonly kind: 'delta';
  readonly instanceRemovals: readonly string[];
  readonly instanceUpserts: readonly RouterInstance[];
  readonly streamRemovals: readonly StreamId[];
  readonly streamUpserts: readonly DecodedViewStream[];
  readonly streamResets: readonly DecodedViewStream[];
  readonly residency: readonly DecodedResidencyChanges[];
}

export interface DecodedHeartbeat extends UpdateHead {
  readonly kind: 'heartbeat';
}

/** One part of a multi-message snapshot; the cache assembles them (view-cache.ts). */
export interface DecodedSnapshotChunk extends UpdateHead {
  readonly kind: 'snapshot_chunk';
  readonly index: number;
  readonly last: boolean;
  readonly instances: readonly RouterInstance[];
  readonly streams: readonly DecodedViewStream[];
}

export type DecodedViewUpdate = DecodedSnapshot | DecodedDelta | DecodedHeartbeat | DecodedSnapshotChunk;

const INSTANCE_TYPES: readonly string[] = ['DEFAULT', 'PREFILL', 'DECODE', 'MIX'];
const INSTANCE_STATES: readonly string[] = ['ACTIVE', 'LEASE_LOST', 'SUSPECT'];
const EMPTY = new Uint8Array(0);

function bigintField(field: string, v: string | number | undefined | null): bigint {
  if (v === undefined || v === null || v === '') return 0n;
  if (typeof v === 'number') {
    if (!Number.isInteger(v)) throw new ViewProtocolError(`${field} is not an integer: ${v}`);
    return BigInt(v);
  }
  if (!/^-?\d+$/.test(v)) throw new ViewProtocolError(`${field} is not a decimal integer: ${JSON.stringify(v)}`);
  return BigInt(v);
}

function numberField(field: string, v: string | number | undefined | null): number {
  const n = bigintField(field, v);
  if (n > BigInt(Number.MAX_SAFE_INTEGER) || n < BigInt(Number.MIN_SAFE_INTEGER)) throw new ViewProtocolError(`${field} out of range: ${n}`);
  return Number(n);
}

function bytesField(v: Uint8Array | undefined | null): Uint8Array {
  return v ?? EMPTY;
}

function checkResidency(where: string, keys: Uint8Array, tiers: Uint8Array): void {
  if (keys.length !== tiers.length * 16) {
    throw new ViewProtocolError(`${where}: ${keys.length} key bytes for ${tiers.length} tier bytes (want 16 per tier byte)`);
  }
  for (let i = 0; i < tiers.length; i++) {
    if (tiers[i]! > 3) throw new ViewProtocolError(`${where}: tier bits ${tiers[i]} at ${i} (want 0..3)`);
  }
}

function decodeProfile(points: readonly WireProfilePoint[] | undefined | null): (readonly number[])[] {
  const out: (readonly number[])[] = [];
  if (!points) return out;
  for (const p of points) out.push(Object.freeze((p.values ?? []).slice()));
  return out;
}

function decodeLoad(name: string, l: WireViewLoad | undefined | null): InstanceLoad | null {
  if (!l) return null;
  return {
    waitingRequestsNum: numberField(`instance ${name} load.waiting_requests_num`, l.waiting_requests_num),
    gpuCacheUsagePerc: l.gpu_cache_usage_perc ?? 0,
    recentMaxTtftMs: l.recent_max_ttft ?? 0,
    recentMaxTbtMs: l.recent_max_tbt ?? 0,
    reportedAtMs: numberField(`instance ${name} load.reported_at_ms`, l.reported_at_ms),
  };
}

export function decodeInstance(w: WireViewInstance, receivedAtMs: number = performance.now()): RouterInstance {
  const name = w.name;
  if (!name) throw new ViewProtocolError('instance without a name');
  if (!INSTANCE_TYPES.includes(w.type)) throw new ViewProtocolError(`instance ${name}: unknown type ${JSON.stringify(w.type)}`);
  if (!INSTANCE_STATES.includes(w.state)) throw new ViewProtocolError(`instance ${name}: unknown state ${JSON.stringify(w.state)}`);
  const type = w.type as InstanceType;
  let role: InstanceRole | '' = '';
  // discovery.md: current_role is meaningful for MIX only, PREFILL by default.
  if (type === 'MIX') role = w.current_role === 'DECODE' ? 'DECODE' : 'PREFILL';
  return {
    name,
    type,
    currentRole: role,
    incarnationId: w.incarnation_id ?? '',
    registerTsMs: numberField(`instance ${name} register_ts_ms`, w.register_ts_ms),
    // discovery.md: dp_size 0 means 1.
    dpSize: w.dp_size > 0 ? w.dp_size : 1,
    state: w.state as InstanceState,
    schedulable: w.schedulable === true,
    load: decodeLoad(name, w.load),
    ttftProfile: decodeProfile(w.ttft_profiling_data),
    tpotProfile: decodeProfile(w.tpot_profiling_data),
    generation: bigintField(`instance ${name} generation`, w.generation),
    inflight: decodeInflight(name, w.inflight, receivedAtMs),
    models: decodeModels(name, w.models),
    source: w.source ?? '',
    ...(w.url !== undefined && w.url !== '' ? { url: w.url } : {}),
  };
}

function decodeModels(name: string, w: WireServedModels | undefined | null): ServedModelList {
  if (w === undefined || w === null) return null;
  const out: ServedModel[] = [];
  for (const m of w.data ?? []) {
    if (typeof m.name !== 'string' || m.name === '') throw new ViewProtocolError(`instance ${name}: a served model without a name`);
    out.push(Object.freeze({ name: m.name, parent: m.parent === undefined || m.parent === null || m.parent === '' ? null : m.parent }));
  }
  return Object.freeze(out);
}

function decodeEngineKind(where: string, v: string | undefined | null): EngineKind {
  if (v === undefined || v === null || v === '') return 'xllm';
  const kind = ENGINE_KINDS.find((k) => k === v);
  if (kind === undefined) throw new ViewProtocolError(`${where}: unknown engine_kind ${JSON.stringify(v)}`);
  return kind;
}

const NO_INFLIGHT: readonly InflightShare[] = Object.freeze([]);
const NO_PROMPTS: readonly Uint32Array[] = Object.freeze([]);
const NO_SEQS: readonly number[] = Object.freeze([]);

const NO_LEDGER_PROMPTS: LedgerPrompts = Object.freeze({ prompts: NO_PROMPTS, tokens: NO_SEQS });

/** A ledger gauge's prompts and, when it sends them, each one's prefill tokens (empty: not sent). */
interface LedgerPrompts {
  readonly prompts: readonly Uint32Array[];
  readonly tokens: readonly number[];
}

/**
 * A ledger gauge's prompts (OutstandingPrefill.prompts): at most PENDING_PROMPTS_PER_SHARE and
 * `requests`, each fingerprints; with `prompt_tokens`, one uint32 per prompt, at most `tokens`.
 */
function ledgerPrompts(name: string, router: string, o: WireOutstandingPrefill, requests: number, tokens: number): LedgerPrompts {
  const wire = o.prompts;
  if (wire === undefined || wire === null || wire.length === 0) return NO_LEDGER_PROMPTS;
  const most = Math.min(PENDING_PROMPTS_PER_SHARE, requests);
  if (wire.length > most) throw new ViewProtocolError(`instance ${name}: ${wire.length} outstanding_prefill.prompts of router ${JSON.stringify(router)}, at most ${most}`);
  const wireTokens = o.prompt_tokens ?? NO_SEQS;
  if (wireTokens.length !== 0 && (wireTokens.length !== wire.length || !wireTokens.every((t) => Number.isInteger(t) && t >= 0 && t <= tokens))) {
    throw new ViewProtocolError(`instance ${name}: outstanding_prefill.prompt_tokens of router ${JSON.stringify(router)}: expected one integer in [0, tokens (${tokens})] per prompt (${wire.length}), got ${JSON.stringify(wireTokens)}`);
  }
  const prompts: Uint32Array[] = [];
  const perPrompt: number[] = [];
  for (let i = 0; i < wire.length; i++) {
    const f = fingerprintsOf(wire[i]!);
    if (f === null) throw new ViewProtocolError(`instance ${name}: outstanding_prefill.prompts[${i}] of router ${JSON.stringify(router)}: expected ${FINGERPRINT_BYTES_EXPECTED}, got ${wire[i]!.length} bytes`);
    if (f.length === 0) continue;
    prompts.push(f);
    if (wireTokens.length !== 0) perPrompt.push(wireTokens[i]!);
  }
  return { prompts, tokens: perPrompt };
}

function decodeInflight(name: string, shares: readonly WireInflightShare[] | undefined | null, receivedAtMs: number): readonly InflightShare[] {
  if (shares === undefined || shares === null || shares.length === 0) return NO_INFLIGHT;
  return shares.map((s) => {
    if (!(Number.isInteger(s.count) && s.count >= 0)) throw new ViewProtocolError(`instance ${name}: inflight count ${String(s.count)} of router ${JSON.stringify(s.router_id)}`);
    const router = s.router_id ?? '';
    const wire = s.prompts ?? [];
    if (wire.length > PENDING_PROMPTS_PER_SHARE) throw new ViewProtocolError(`instance ${name}: ${wire.length} pending prompts of router ${JSON.stringify(router)}, at most ${PENDING_PROMPTS_PER_SHARE}`);
    const wireSeqs = s.prompt_seqs ?? [];
    if (wireSeqs.length !== 0 && wireSeqs.length !== wire.length) throw new ViewProtocolError(`instance ${name}: ${wireSeqs.length} prompt_seqs of router ${JSON.stringify(router)} for ${wire.length} pending prompts`);
    const prompts: Uint32Array[] = [];
    const seqs: number[] = [];
    for (let i = 0; i < wire.length; i++) {
      const f = fingerprintsOf(wire[i]!);
      if (f === null) throw new ViewProtocolError(`instance ${name}: pending prompt ${i} of router ${JSON.stringify(router)}: expected ${FINGERPRINT_BYTES_EXPECTED}, got ${wire[i]!.length} bytes`);
      if (f.length === 0) continue;
      prompts.push(f);
      if (wireSeqs.length !== 0) seqs.push(wireSeqs[i]!);
    }
    const prefillTokens = numberField(`instance ${name}: inflight prefill_tokens of router ${JSON.stringify(router)}`, s.prefill_tokens ?? 0);
    const prefillTokenDecisions = s.prefill_token_decisions ?? 0;
    if (!(prefillTokens >= 0) || !(Number.isInteger(prefillTokenDecisions) && prefillTokenDecisions >= 0 && prefillTokenDecisions <= s.count)) {
      throw new ViewProtocolError(`instance ${name}: inflight prefill_token_decisions ${String(s.prefill_token_decisions)} (prefill_tokens ${String(s.prefill_tokens)}) of router ${JSON.stringify(router)}: expected 0..count (${s.count}) decisions and tokens ≥ 0`);
    }
    const o = s.outstanding_prefill ?? null;
    const outstandingTokens = o === null ? 0 : numberField(`instance ${name}: outstanding_prefill.tokens of router ${JSON.stringify(router)}`, o.tokens);
    const outstandingRequests = o === null ? 0 : o.requests;
    if (!(outstandingTokens >= 0) || !(Number.isInteger(outstandingRequests) && outstandingRequests >= 0)) {
      throw new ViewProtocolError(`instance ${name}: outstanding_prefill of router ${JSON.stringify(router)}: expected tokens and requests ≥ 0, got ${String(o?.tokens)} and ${String(o?.requests)}`);
    }
    const headTokens = o === null || o.head_tokens === undefined ? 0 : numberField(`instance ${name}: outstanding_prefill.head_tokens of router ${JSON.stringify(router)}`, o.head_tokens);
    const headAge = o?.head_age_ms ?? 0;
    const lastEndAge = o?.last_end_age_ms ?? NO_LAST_END;
    if (!(headTokens >= 0 && headTokens <= outstandingTokens) || !(Number.isInteger(headAge) && headAge >= 0) || !(Number.isInteger(lastEndAge) && lastEndAge >= 0)) {
      throw new ViewProtocolError(
        `instance ${name}: outstanding_prefill of router ${JSON.stringify(router)}: expected head_tokens in [0, tokens] and ages ≥ 0, got ${String(o?.head_tokens)}, ${String(o?.head_age_ms)} and ${String(o?.last_end_age_ms)}`,
      );
    }
    const head = headTokens > 0 && outstandingRequests > 0;
    const ledger = o === null ? NO_LEDGER_PROMPTS : ledgerPrompts(name, router, o, outstandingRequests, outstandingTokens);
    const openClaimSeqs = s.open_claim_seqs ?? NO_SEQS;
    if (openClaimSeqs.length > s.count || !openClaimSeqs.every((q) => Number.isInteger(q) && q >= 0 && q <= 0xffffffff)) {
      throw new ViewProtocolError(`instance ${name}: open_claim_seqs of router ${JSON.stringify(router)}: expected at most count (${s.count}) uint32s, got ${JSON.stringify(openClaimSeqs)}`);
    }
    return {
      routerId: router,
      count: s.count,
      prompts,
      seqs,
      prefillTokens,
      prefillTokenDecisions,
      outstandingRequests,
      outstandingTokens,
      headTokens: head ? headTokens : 0,
      headStartMs: head ? receivedAtMs - headAge : Number.POSITIVE_INFINITY,
      // A gauge with no request left still carries its last first token (a newer directory keeps it).
      lastEndMs: carriesLastEnd(headTokens, outstandingRequests) && lastEndAge !== NO_LAST_END ? receivedAtMs - lastEndAge : Number.NEGATIVE_INFINITY,
      outstandingPrompts: ledger.prompts,
      outstandingPromptTokens: ledger.tokens,
      openClaimSeqs,
    };
  });
}

export function decodeStream(w: WireViewStream): DecodedViewStream {
  const where = `stream ${w.stream_id} (${w.instance_name} rank ${w.dp_rank})`;
  if (!(w.block_size >= 1)) throw new ViewProtocolError(`${where}: block_size ${w.block_size}`);
  const keys = bytesField(w.keys);
  const tiers = bytesField(w.tiers);
  checkResidency(where, keys, tiers);
  return {
    streamId: w.stream_id as StreamId,
    instanceName: w.instance_name,
    dpRank: w.dp_rank,
    blockSize: w.block_size,
    hashSeed: bigintField(`${where} hash_seed`, w.hash_seed),
    incarnationId: w.incarnation_id ?? '',
    generation: bigintField(`${where} generation`, w.generation),
    synchronized: w.synchronized === true,
    sequence: w.sequence === undefined || w.sequence === '' ? -1n : bigintField(`${where} sequence`, w.sequence),
    error: w.error ?? '',
    engineKind: decodeEngineKind(where, w.engine_kind),
    keys,
    tiers,
  };
}

function decodeResidency(w: WireResidencyChanges): DecodedResidencyChanges {
  const keys = bytesField(w.keys);
  const tiers = bytesField(w.tiers);
  checkResidency(`residency of stream ${w.stream_id}`, keys, tiers);
  return { streamId: w.stream_id as StreamId, keys, tiers };
}

/** Wire → domain; throws ViewProtocolError on anything the cache could not apply whole. */
export function decodeViewUpdate(w: WireViewUpdate, receivedAtMs: number = performance.now()): DecodedViewUpdate {
  const decodeInstanceAt = (i: WireViewInstance): RouterInstance => decodeInstance(i, receivedAtMs);
  const head = { epoch: w.epoch ?? '', version: bigintField('version', w.version), sentAtMs: numberField('sent_at_ms', w.sent_at_ms) };
  if (head.version < 0n) throw new ViewProtocolError(`negative version ${head.version}`);
  const body = w.body ?? (w.snapshot ? 'snapshot' : w.delta ? 'delta' : w.heartbeat ? 'heartbeat' : w.snapshot_chunk ? 'snapshot_chunk' : undefined);
  switch (body) {
    case 'snapshot': {
      const s = w.snapshot;
      if (!s) throw new ViewProtocolError('body says snapshot but none is set');
      return { ...head, kind: 'snapshot', instances: (s.instances ?? []).map(decodeInstanceAt), streams: (s.streams ?? []).map(decodeStream) };
    }
    case 'delta': {
      const d = w.delta;
      if (!d) throw new ViewProtocolError('body says delta but none is set');
      return {
        ...head,
        kind: 'delta',
        instanceRemovals: (d.instance_removals ?? []).slice(),
        instanceUpserts: (d.instance_upserts ?? []).map(decodeInstanceAt),
        streamRemovals: (d.stream_removals ?? []).map((id) => id as StreamId),
        streamUpserts: (d.stream_upserts ?? []).map(decodeStream),
        streamResets: (d.stream_resets ?? []).map(decodeStream),
        residency: (d.residency ?? []).map(decodeResidency),
      };
    }
    case 'heartbeat':
      return { ...head, kind: 'heartbeat' };
    case 'snapshot_chunk': {
      const c = w.snapshot_chunk;
      if (!c) throw new ViewProtocolError('body says snapshot_chunk but none is set');
      const index = numberField('snapshot_chunk.index', c.index);
      return { ...head, kind: 'snapshot_chunk', index, last: c.last === true, instances: (c.instances ?? []).map(decodeInstanceAt), streams: (c.streams ?? []).map(decodeStream) };
    }
    default:
      throw new ViewProtocolError(`update without a body (epoch ${JSON.stringify(head.epoch)}, version ${head.version})`);
  }
}
