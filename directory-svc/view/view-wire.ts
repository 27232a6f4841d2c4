/**
 * The view stream's messages as grpc-js / proto-loader see them (proto/kvdirectory.proto: wire
 * field names; 64-bit integers accepted as numbers or decimal strings, decoded as strings), and the
 * mapping from the directory's domain types. Wire names appear only here and in the .proto.
 */
import type { InstanceView } from '../discovery/instance-table.js';

export interface WireViewLoad {
  waiting_requests_num: number;
  gpu_cache_usage_perc: number;
  recent_max_ttft: number;
  recent_max_tbt: number;
  reported_at_ms: number;
}

export interface WireProfilePoint {
  values: number[];
}

export interface WireViewInstance {
  name: string;
  type: string;
  current_role: string;
  incarnation_id: string;
  register_ts_ms: number;
  dp_size: number;
  state: string;
  schedulable: boolean;
  /** Absent: no valid load report yet. */
  load?: WireViewLoad;
  ttft_profiling_data: WireProfilePoint[];
  tpot_profiling_data: WireProfilePoint[];
  generation: number;
  heartbeat_age_ms: number;
  excluded_reason: string;
  backend_type: string;
}

export interface WireViewStream {
  stream_id: number;
  instance_name: string;
  dp_rank: number;
  block_size: number;
  hash_seed: string;
  incarnation_id: string;
  generation: number;
  synchronized: boolean;
  sequence: string;
  error: string;
  device_blocks: number;
  host_blocks: number;
  /** Only in snapshots and stream resets. */
  keys?: Uint8Array;
  tiers?: Uint8Array;
}

export interface WireResidencyChanges {
  stream_id: number;
  keys: Uint8Array;
  tiers: Uint8Array;
}

export interface WireViewDelta {
  instance_removals: string[];
  instance_upserts: WireViewInstance[];
  stream_removals: number[];
  stream_upserts: WireViewStream[];
  stream_resets: WireViewStream[];
  residency: WireResidencyChanges[];
}

export interface WireViewSnapshot {
  instances: WireViewInstance[];
  streams: WireViewStream[];
}

/** One `ViewUpdate`, exactly one body set. */
export interface WireViewUpdate {
  epoch: string;
  version: number;
  sent_at_ms: number;
  snapshot?: WireViewSnapshot;
  delta?: WireViewDelta;
  heartbeat?: Record<string, never>;
}

export interface WireListInstancesResponse {
  instances: WireViewInstance[];
  etcd_connected: boolean;
}

/** The diagnostics-only fields of a `ListInstances` row. */
export interface InstanceDiagnostics {
  /** ms since the last accepted heartbeat; −1 when none. */
  readonly heartbeatAgeMs: number;
  /** Why the instance has no streams; '' when it has them or needs none. */
  readonly excludedReason: string;
}

/** `ViewInstance` of one instance-table row; diagnostics are 0 / '' in the view stream. */
export function toWireViewInstance(v: InstanceView, diag: InstanceDiagnostics | null = null): WireViewInstance {
  const reg = v.registration;
  const out: WireViewInstance = {
    name: v.name,
    type: reg.type,
    current_role: v.currentRole ?? '',
    incarnation_id: reg.incarnationId ?? '',
    register_ts_ms: reg.registerTsMs ?? 0,
    dp_size: reg.dpSize,
    state: v.state,
    schedulable: v.schedulable,
    ttft_profiling_data: reg.ttftProfile.map((p) => ({ values: [p[0], p[1]] })),
    tpot_profiling_data: reg.tpotProfile.map((p) => ({ values: [p[0], p[1], p[2]] })),
    generation: v.generation,
    heartbeat_age_ms: diag === null ? 0 : diag.heartbeatAgeMs,
    excluded_reason: diag === null ? '' : diag.excludedReason,
    backend_type: reg.backendType,
  };
  if (v.load !== null) {
    out.load = {
      waiting_requests_num: v.load.waitingRequests,
      gpu_cache_usage_perc: v.load.gpuCacheUsage,
      recent_max_ttft: v.load.recentMaxTtftMs ?? 0,
      recent_max_tbt: v.load.recentMaxTbtMs ?? 0,
      reported_at_ms: v.loadAtMs ?? 0,
    };
  }
  return out;
}
