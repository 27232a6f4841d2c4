/**
 * The WatchView and ListInstances messages of `proto/kvdirectory.proto` as grpc-js sees them under
 * KVDIRECTORY_LOADER_OPTIONS (architecture.md "The view stream"): wire field names, `bytes` as
 * Buffer (a server may also hand grpc-js a Uint8Array), the `body` oneof named by its `body`
 * discriminator. Wire names appear only here and in the .proto; both the directory (serving) and
 * the router (watching) use these shapes. Messages whose generated shape (proto/generated/,
 * `npm run proto:types`) is exactly what both sides need are aliases of it; the rest are kept by
 * hand because they are narrower (the `body` discriminator, int64 fields a server fills with
 * numbers, `bytes` a server hands over as Uint8Array).
 */
import type { MovedClaim__Output } from '../../proto/generated/kvdirectory/v1/MovedClaim.js';
import type { InflightShare__Output } from '../../proto/generated/kvdirectory/v1/InflightShare.js';
import type { ProfilePoint__Output } from '../../proto/generated/kvdirectory/v1/ProfilePoint.js';
import type { WatchViewRequest__Output } from '../../proto/generated/kvdirectory/v1/WatchViewRequest.js';

/**
 * A 64-bit integer field. Decoded (longs: String) it is always a decimal string; an encoder
 * accepts a decimal string or a safe-integer number, and the directory serves the counts it
 * keeps as numbers (versions, generations, block counts, timestamps).
 */
export type WireInt64 = string | number;

/** `epoch` empty = fresh watch (snapshot); `version` a uint64 as a decimal string. */
export type WireWatchViewRequest = WatchViewRequest__Output;

/** One point: [input_tokens, ttft_ms] or [batch_size, total_tokens, tpot_ms]. */
export type WireProfilePoint = ProfilePoint__Output;

export interface WireViewLoad {
  waiting_requests_num: WireInt64;
  gpu_cache_usage_perc: number;
  recent_max_ttft: number;
  recent_max_tbt: number;
  reported_at_ms: WireInt64;
}

export interface WireViewInstance {
  name: string;
  type: string;
  current_role: string;
  incarnation_id: string;
  register_ts_ms: WireInt64;
  dp_size: number;
  state: string;
  schedulable: boolean;
  /** null (or absent) = no valid load report yet. */
  load?: WireViewLoad | null;
  ttft_profiling_data: WireProfilePoint[];
  tpot_profiling_data: WireProfilePoint[];
  generation: WireInt64;
  /** ListInstances only: ms since the last accepted heartbeat, −1 when none (0 in the view stream). */
  heartbeat_age_ms?: WireInt64;
  /** ListInstances only: why the instance has no streams ('' in the view stream). */
  excluded_reason?: string;
  backend_type?: string;
  /** Engines-file instances: OpenAI base URL; '' or absent = `http://<name>`. */
  url?: string;
  /** In-flight load per reporting router (routing.md "In-flight load"); absent = none. */
  inflight?: WireInflightShare[];
  /** cache-identity §1: served models; null or absent = unknown. `parent` '' = a base model. */
  models?: WireServedModels | null;
  /** "etcd", "engines_file" or "dns:<name>" (engines.md §6); '' or absent from older directories. */
  source?: string;
}

export interface WireServedModels {
  data: { name: string; parent: string }[];
}

/**
 * prompt_seqs is absent from directories that do not order claims (and from the instance listing);
 * prefill_tokens and prefill_token_decisions from directories without them, and whenever no counted
 * decision carried prefill tokens (both 0).
 */
export type WireInflightShare = Omit<InflightShare__Output, 'prompt_seqs' | 'prefill_tokens' | 'prefill_token_decisions' | 'outstanding_prefill' | 'open_claim_seqs'> & {
  prompt_seqs?: number[];
  /** The seqs of the router's open claims here (claim order), oldest first; absent: none or an older peer. */
  open_claim_seqs?: number[];
  prefill_tokens?: WireInt64;
  prefill_token_decisions?: number;
  /** The router's proxied requests still before their first token there (absent or null: none reported). */
  outstanding_prefill?: WireOutstandingPrefill | null;
};

/** A router's queued prefill work on one instance: requests before their first token, and their prefill tokens. */
export interface WireOutstandingPrefill {
  tokens: WireInt64;
  requests: number;
  /** The oldest request's prefill tokens and its age; the age of the last first token (NO_LAST_END: none). Absent from older peers. */
  head_tokens?: WireInt64;
  head_age_ms?: number;
  last_end_age_ms?: number;
  /** Fingerprints of the newest ledger entries' prompts (at most PENDING_PROMPTS_PER_SHARE), oldest first. */
  prompts?: Buffer[];
  /** Per entry of `prompts`, its prefill tokens (claim order takes out those ordered after a claim). Absent from older peers. */
  prompt_tokens?: number[];
}

/** `last_end_age_ms` when no first token was seen (the uint32 maximum). */
export const NO_LAST_END = 0xffffffff;

/**
 * Whether a gauge's `last_end_age_ms` means anything: with a head (the engine has worked on it
 * since the later of its send and that end), or with no request left (the engine's next head,
 * another router's, was worked on only since then). One rule for the router that sends it, the
 * directory that keeps and relays it, and the routers that read it.
 */
export function carriesLastEnd(headTokens: number, requests: number): boolean {
  return headTokens > 0 || requests <= 0;
}

export interface WireViewStream {
  stream_id: number;
  instance_name: string;
  dp_rank: number;
  block_size: number;
  hash_seed: string;
  incarnation_id: string;
  generation: WireInt64;
  synchronized: boolean;
  /** uint64 as a decimal string (may pass 2^53). */
  sequence: string;
  error: string;
  device_blocks: WireInt64;
  host_blocks: WireInt64;
  /** engines.md §1: "xllm", "vllm" or "sglang"; '' or absent from older directories (xllm). */
  engine_kind?: string;
  /**
   * N × 16 bytes (low64 LE || high64 LE, kv-events §4); snapshots and resets only (the directory
   * leaves it out of stream upserts; decoded, an absent field is empty).
   */
  keys?: Uint8Array;
  /** N tier bytes: 1 Device, 2 Host, 3 both. */
  tiers?: Uint8Array;
}

export interface WireResidencyChanges {
  stream_id: number;
  keys: Uint8Array;
  /** New tier bits per key; 0 = no longer resident. */
  tiers: Uint8Array;
}

export interface WireViewSnapshot {
  instances: WireViewInstance[];
  streams: WireViewStream[];
}

/** One part of a snapshot sent in several messages (see the .proto). */
export interface WireViewSnapshotChunk {
  index: number;
  last: boolean;
  instances: WireViewInstance[];
  streams: WireViewStream[];
}

/** Applied in field order (see the .proto): removals, upserts, stream resets, then residency. */
export interface WireViewDelta {
  instance_removals: string[];
  instance_upserts: WireViewInstance[];
  stream_removals: number[];
  stream_upserts: WireViewStream[];
  stream_resets: WireViewStream[];
  residency: WireResidencyChanges[];
}

export interface WireViewUpdate {
  epoch: string;
  version: WireInt64;
  /** The `oneofs: true` discriminator. */
  body?: 'snapshot' | 'delta' | 'heartbeat' | 'snapshot_chunk';
  snapshot?: WireViewSnapshot | null;
  snapshot_chunk?: WireViewSnapshotChunk | null;
  delta?: WireViewDelta | null;
  heartbeat?: Record<string, never> | null;
  sent_at_ms: WireInt64;
}

export interface WireListInstancesResponse {
  instances: WireViewInstance[];
  etcd_connected: boolean;
  /** Absent from older directories (and from unit fixtures): etcd in use. */
  etcd_disabled?: boolean;
}

/** `ReportInflight` client-stream message (routing.md "In-flight load"). */
export interface WireInflightReport {
  router_id: string;
  decisions: WireInflightDecisions[];
}

/** Kept by hand: a router may leave `answered` out (older routers), which the generated shape requires. */
export interface WireInflightDecisions {
  instance_name: string;
  count: number;
  /** ms from the newest of these decisions to the send, on the router's monotonic clock. */
  age_ms: number;
  /** This router's earlier-reported decisions for the instance the engine has answered since (absent or 0 from older routers). */
  answered?: number;
  /** Per decision, oldest first, its prompt fingerprints (little-endian uint32s); at most `count`, absent from routers without them. */
  prompts?: Uint8Array[];
  /** This router's decisions for the instance it moved elsewhere (claim order), by their prompt_seqs: exactly those end (absent from older routers). */
  withdrawn_seqs?: number[];
  /** Per decision, oldest first, its predicted prefill tokens; at most `count`, absent from routers without them. */
  prefill_tokens?: number[];
  /** The router's outstanding-prefill gauge for the instance (replaces the last; 0 requests clears it); absent: unchanged. */
  outstanding_prefill?: WireOutstandingPrefill | null;
  /** Claims moved here (claim order) that keep their seq: prompts[prompt_index] is numbered seq (absent from older routers). */
  moved_claims?: WireMovedClaim[];
  /** Indexes into prompts of the claims still being ordered (absent from older routers: settled from the start). */
  open_claims?: number[];
  /** This router's open claims here, by seq, that settled (stayed); absent from older routers. */
  settled_seqs?: number[];
}

export type WireMovedClaim = MovedClaim__Output;
