/**
 * The WatchView messages of `proto/kvdirectory.proto` as grpc-js sees them under
 * KVDIRECTORY_LOADER_OPTIONS (architecture.md "The view stream"): wire field names, 64-bit
 * integers as decimal strings, `bytes` as Buffer (a server may also hand grpc-js a Uint8Array),
 * the `body` oneof named by its `body` discriminator. Wire names appear only here and in the
 * .proto; both the directory (serving) and the router (watching) use these shapes.
 */

export interface WireWatchViewRequest {
  router_id: string;
  /** Empty = fresh watch (snapshot). */
  epoch: string;
  /** uint64 as a decimal string. */
  version: string;
}

/** One point: [input_tokens, ttft_ms] or [batch_size, total_tokens, tpot_ms]. */
export interface WireProfilePoint {
  values: number[];
}

export interface WireViewLoad {
  waiting_requests_num: string;
  gpu_cache_usage_perc: number;
  recent_max_ttft: number;
  recent_max_tbt: number;
  reported_at_ms: string;
}

export interface WireViewInstance {
  name: string;
  type: string;
  current_role: string;
  incarnation_id: string;
  register_ts_ms: string;
  dp_size: number;
  state: string;
  schedulable: boolean;
  /** null (or absent) = no valid load report yet. */
  load?: WireViewLoad | null;
  ttft_profiling_data: WireProfilePoint[];
  tpot_profiling_data: WireProfilePoint[];
  generation: string;
  heartbeat_age_ms?: string;
  excluded_reason?: string;
  backend_type?: string;
}

export interface WireViewStream {
  stream_id: number;
  instance_name: string;
  dp_rank: number;
  block_size: number;
  hash_seed: string;
  incarnation_id: string;
  generation: string;
  synchronized: boolean;
  sequence: string;
  error: string;
  device_blocks: string;
  host_blocks: string;
  /** N × 16 bytes (low64 LE || high64 LE, kv-events §4); snapshots and resets only. */
  keys: Uint8Array;
  /** N tier bytes: 1 Device, 2 Host, 3 both. */
  tiers: Uint8Array;
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
  version: string;
  /** The `oneofs: true` discriminator. */
  body?: 'snapshot' | 'delta' | 'heartbeat';
  snapshot?: WireViewSnapshot | null;
  delta?: WireViewDelta | null;
  heartbeat?: Record<string, never> | null;
  sent_at_ms: string;
}
