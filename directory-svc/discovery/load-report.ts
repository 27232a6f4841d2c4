/**
 * Pure validation of load reports (discovery.md "Heartbeats"): the heartbeat body engines POST to
 * the directory and the legacy `XLLM:LOADMETRICS:<name>` value. A bad report is an
 * `invalid_load` DiscoveryError (the HTTP edge answers 400).
 */
import { DiscoveryError } from './discovery-errors.js';
import type { InstanceLoad } from '../load/instance-load.js';

export type MixRole = 'PREFILL' | 'DECODE';


/** One validated heartbeat. */
export interface HeartbeatReport {
  readonly name: string;
  readonly incarnationId: string | null;
  /** Only meaningful for MIX instances; null = not sent (MIX then defaults to PREFILL). */
  readonly currentRole: MixRole | null;
  /** null when the heartbeat carried no `load_metrics` (liveness only). */
  readonly load: InstanceLoad | null;
}

/**
 * Validates a parsed heartbeat body. `name` is returned even when the rest is bad (via the
 * error's `name` argument) so the caller can mark that instance's load invalid.
 */
export function parseHeartbeat(json: unknown): HeartbeatReport {
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw bad('body is not a JSON object');
  const o = json as Record<string, unknown>;
  const name = o['name'];
  if (typeof name !== 'string' || name === '') throw bad('name: required non-empty string');
  const inc = o['incarnation_id'];
  if (inc !== undefined && inc !== null && typeof inc !== 'string') throw bad('incarnation_id: expected a string');
  const role = o['current_role'];
  if (role !== undefined && role !== null && role !== 'PREFILL' && role !== 'DECODE') throw bad('current_role: expected PREFILL or DECODE');
  // `cache_event` is deprecated: accepted and ignored (KV metadata comes only from ZMQ streams).
  const lm = o['load_metrics'];
  let load: InstanceLoad | null = null;
  if (lm !== undefined && lm !== null) {
    const latency = o['latency_metrics'];
    if (latency !== undefined && latency !== null && !isObject(latency)) throw bad('latency_metrics: expected an object');
    load = parseLoadMetrics(lm, latency ?? null);
  }
  return Object.freeze({
    name,
    incarnationId: typeof inc === 'string' && inc !== '' ? inc : null,
    currentRole: role === 'PREFILL' || role === 'DECODE' ? role : null,
    load,
  });
}

/** The name of a heartbeat body, when it has one, even if the rest is invalid. */
export function heartbeatName(json: unknown): string | null {
  if (!isObject(json)) return null;
  const name = json['name'];
  return typeof name === 'string' && name !== '' ? name : null;
}

/**
 * `{"waiting_requests_num": u64, "gpu_cache_usage_perc": 0..1}` (heartbeat `load_metrics` and the
 * LOADMETRICS key). A missing field counts as 0; a present one must be a finite, non-negative
 * number, and usage at most 1.
 */
export function parseLoadMetrics(value: unknown, latency: unknown = null): InstanceLoad {
  if (!isObject(value)) throw bad('load_metrics: expected an object');
  const waiting = num(value, 'waiting_requests_num', 'load_metrics');
  if (waiting !== null && !Number.isInteger(waiting)) throw bad('load_metrics.waiting_requests_num: expected an integer');
  const usage = num(value, 'gpu_cache_usage_perc', 'load_metrics');
  if (usage !== null && usage > 1) throw bad('load_metrics.gpu_cache_usage_perc: expected 0..1');
  let ttft: number | null = null;
  let tbt: number | null = null;
  if (isObject(latency)) {
    ttft = num(latency, 'recent_max_ttft', 'latency_metrics');
    tbt = num(latency, 'recent_max_tbt', 'latency_metrics');
  }
  return Object.freeze({ waitingRequests: waiting ?? 0, gpuCacheUsage: usage ?? 0, recentMaxTtftMs: ttft, recentMaxTbtMs: tbt });
}

function num(o: Record<string, unknown>, field: string, parent: string): number | null {
  const v = o[field];
  if (v === undefined || v === null) return null;
  // JSON.parse turns 1e400 into Infinity, so "non-finite" is reachable from a body.
  if (typeof v !== 'number' || !Number.isFinite(v) || v < 0) throw bad(`${parent}.${field}: expected a finite non-negative number`);
  return v;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function bad(detail: string): DiscoveryError {
  return new DiscoveryError('invalid_load', detail);
}
