/**
 * The mapping from the directory's domain types to the view stream's messages (the shapes are
 * shared with the router: shared/view/view-wire.ts). Wire names appear only here, in the shared
 * shapes and in the .proto.
 */
import type { WireInflightShare, WireViewInstance, WireViewUpdate as AnyWireViewUpdate } from '../../shared/view/view-wire.js';
import type { InstanceView } from '../discovery/instance-table.js';

/** A `ViewUpdate` as the directory encodes it: version and sent_at_ms are the numbers it counts in. */
export type WireViewUpdate = AnyWireViewUpdate & { version: number; sent_at_ms: number };

/** The diagnostics-only fields of a `ListInstances` row. */
export interface InstanceDiagnostics {
  /** ms since the last accepted heartbeat; −1 when none. */
  readonly heartbeatAgeMs: number;
  /** Why the instance has no streams; '' when it has them or needs none. */
  readonly excludedReason: string;
}

/**
 * `ViewInstance.source`: where the directory learned of the instance ("etcd", "engines_file", or
 * "dns:<name>" for an engine an engines-file DNS entry resolved to, engines.md §6).
 */
export function instanceSource(v: Pick<InstanceView, 'source' | 'engine'>): string {
  const dns = v.engine?.dnsName ?? null;
  return dns === null ? v.source : `dns:${dns}`;
}

/**
 * `ViewInstance` of one instance-table row; diagnostics are 0 / '' in the view stream, which
 * carries the in-flight shares instead (routing.md "In-flight load").
 */
export function toWireViewInstance(v: InstanceView, diag: InstanceDiagnostics | null = null, inflight: readonly WireInflightShare[] | null = null): WireViewInstance {
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
    url: v.engine?.url ?? '',
    // cache-identity §1: unset = unknown; a known list, even empty, is sent as a message.
    models: v.models === null ? null : { data: v.models.map((m) => ({ name: m.name, parent: m.parent ?? '' })) },
    source: instanceSource(v),
  };
  if (inflight !== null && inflight.length > 0) out.inflight = [...inflight];
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
