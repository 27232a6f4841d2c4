/**
 * Pure: an engine's Prometheus `/metrics` text → its load (engines.md §4.2) and identity (§4.3).
 * Parsing is `parse-prometheus-text-format` (a port of the Python client's parser), never regexes;
 * this module only picks the families of the engine's kind and sums their samples.
 *
 * Cost: one parse of the whole exposition per scrape (every engines_refresh_interval_ms per
 * engine, off any request path); a vLLM exposition is a few hundred lines.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import parsePrometheusTextFormat, { type PrometheusFamily } from 'parse-prometheus-text-format';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import type { InstanceLoad } from '../load/instance-load.js';

/** The metric names of one engine kind (engines.md §4.2 table). */
export interface EngineMetricNames {
  readonly waiting: string;
  readonly running: string;
  /** In order of preference: the first family present is used. */
  readonly cacheUsage: readonly string[];
}

export const ENGINE_METRIC_NAMES: Readonly<Record<EngineKind, EngineMetricNames>> = {
  vllm: { waiting: 'vllm:num_requests_waiting', running: 'vllm:num_requests_running', cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'] },
  sglang: { waiting: 'sglang:num_queue_reqs', running: 'sglang:num_running_reqs', cacheUsage: ['sglang:token_usage'] },
  // An xLLM engine listed in the file (no etcd): its /metrics is read with vLLM's names, the
  // de-facto standard that xLLM's OpenAI server also exports.
  xllm: { waiting: 'vllm:num_requests_waiting', running: 'vllm:num_requests_running', cacheUsage: ['vllm:kv_cache_usage_perc', 'vllm:gpu_cache_usage_perc'] },
};

/** The standard process metric of the Prometheus client (absent in its multiprocess mode). */
export const PROCESS_START_TIME_METRIC = 'process_start_time_seconds';

export interface EngineMetricsReading {
  /** null: the waiting metric is missing or not a number — the previous load stays (§4.2). */
  readonly load: InstanceLoad | null;
  /** Running requests summed over label sets; null when absent (diagnostics only). */
  readonly runningRequests: number | null;
  /** `process_start_time_seconds` as exported; null when absent (no identity source, §4.3). */
  readonly identity: string | null;
}

export class EngineMetricsError extends DomainError {
  readonly class = 'metrics' as const;
}

/** Reads load and identity from one exposition; throws `EngineMetricsError` when it is not Prometheus text. */
export function readEngineMetrics(text: string, kind: EngineKind): EngineMetricsReading {
  let families: PrometheusFamily[];
  try {
    families = parsePrometheusTextFormat(text);
  } catch (e) {
    throw new EngineMetricsError(`not Prometheus text: ${e instanceof Error ? e.message.split('\n')[0]! : String(e)}`);
  }
  const byName = new Map<string, PrometheusFamily>();
  for (const f of families) byName.set(f.name, f);
  const names = ENGINE_METRIC_NAMES[kind];
  const waiting = summedGauge(byName.get(names.waiting));
  let usage: number | null = null;
  for (const n of names.cacheUsage) {
    const f = byName.get(n);
    if (f === undefined) continue;
    usage = meanGauge(f);
    break;
  }
  const load: InstanceLoad | null =
    waiting === null
      ? null
      : Object.freeze({
          // Gauges are floats in the text format ("3.0"); the load field counts requests.
          waitingRequests: Math.round(waiting),
          gpuCacheUsage: usage === null ? 0 : Math.min(1, usage),
          recentMaxTtftMs: null,
          recentMaxTbtMs: null,
        });
  return { load, runningRequests: summedGauge(byName.get(names.running)), identity: processIdentity(byName.get(PROCESS_START_TIME_METRIC)) };
}

/** The sum over every label set; null when the family is absent, empty, or a value is not a finite number ≥ 0. */
function summedGauge(f: PrometheusFamily | undefined): number | null {
  if (f === undefined || f.metrics.length === 0) return null;
  let sum = 0;
  for (const s of f.metrics) {
    const v = sampleValue(s.value);
    if (v === null) return null;
    sum += v;
  }
  return sum;
}

/**
 * KV usage is a fraction of each engine's own pool, so label sets (one per DP engine) are
 * averaged rather than summed: a sum would exceed 1 and break the D-side score's 0..1 term.
 */
function meanGauge(f: PrometheusFamily): number | null {
  const sum = summedGauge(f);
  return sum === null ? null : sum / f.metrics.length;
}

function sampleValue(text: string | undefined): number | null {
  if (text === undefined) return null;
  const v = Number(text);
  return Number.isFinite(v) && v >= 0 ? v : null;
}

/** The first sample's value as exported (one process, one start time); null when absent or not a positive number. */
function processIdentity(f: PrometheusFamily | undefined): string | null {
  const text = f?.metrics[0]?.value;
  if (text === undefined) return null;
  const v = sampleValue(text);
  return v === null || v === 0 ? null : text.trim();
}
