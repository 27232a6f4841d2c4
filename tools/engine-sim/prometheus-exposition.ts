/**
 * The simulator's `GET /metrics` for `--engine_kind=vllm|sglang` (engines.md §5): Prometheus text
 * as the Python `prometheus_client` writes it (`# HELP`, `# TYPE`, samples with labels, floats in
 * Go's spelling: `3.0`, `1.70056712345e+09`), with the engine's §4.2 metric names and, unless
 * turned off, the client's standard process metrics (`process_start_time_seconds`, §4.3).
 * Pure: the load and the start time come in.
 */
export type MetricsEngineKind = 'vllm' | 'sglang';

export interface SimMetricsInput {
  readonly kind: MetricsEngineKind;
  readonly model: string;
  /** Requests queued (the heartbeat's waiting_requests_num). */
  readonly waitingRequests: number;
  readonly runningRequests: number;
  /** Per DP rank, 0..1: each rank's own pool occupancy (one label set per rank). */
  readonly cacheUsageByRank: readonly number[];
  /** null: no process metrics (the client's multiprocess mode, `--no_process_metrics`). */
  readonly processStartTimeS: number | null;
  readonly residentMemoryBytes?: number;
}

/** prometheus_client's `floatToGoString`: Python's repr, switched to an exponent as Go does. */
export function goFloat(d: number): string {
  if (d === Infinity) return '+Inf';
  if (d === -Infinity) return '-Inf';
  if (Number.isNaN(d)) return 'NaN';
  // Python's repr: integral floats keep `.0`, exponents have at least two digits (1e-07).
  const s = Number.isInteger(d) && Math.abs(d) < 1e16 ? d.toFixed(1) : String(d).replace(/e([+-])(\d)$/, 'e$10$2');
  const dot = s.indexOf('.');
  if (d > 0 && dot > 6) {
    const mantissa = `${s.slice(0, 1)}.${s.slice(1, dot)}${s.slice(dot + 1)}`.replace(/\.?0+$/, '');
    return `${mantissa}e+0${dot - 1}`;
  }
  return s;
}

/** The exposition text, families in the order vLLM / SGLang print them. */
export function renderSimMetrics(m: SimMetricsInput): string {
  const lines: string[] = [];
  if (m.processStartTimeS !== null) {
    family(lines, 'process_resident_memory_bytes', 'Resident memory size in bytes.', 'gauge', [['', m.residentMemoryBytes ?? 0]]);
    family(lines, 'process_start_time_seconds', 'Start time of the process since unix epoch in seconds.', 'gauge', [['', m.processStartTimeS]]);
  }
  if (m.kind === 'vllm') {
    const base = `model_name="${escapeLabel(m.model)}"`;
    // vLLM V1 labels its scheduler gauges per DP engine; the queue is the engine's as a whole here.
    family(lines, 'vllm:num_requests_running', 'Number of requests in model execution batches.', 'gauge', [[`{engine="0",${base}}`, m.runningRequests]]);
    family(lines, 'vllm:num_requests_waiting', 'Number of requests waiting to be processed.', 'gauge', [[`{engine="0",${base}}`, m.waitingRequests]]);
    family(
      lines,
      'vllm:kv_cache_usage_perc',
      'KV-cache usage. 1 means 100 percent usage.',
      'gauge',
      m.cacheUsageByRank.map((u, r) => [`{engine="${r}",${base}}`, u] as const),
    );
  } else {
    const base = `engine_type="unified",model_name="${escapeLabel(m.model)}"`;
    family(lines, 'sglang:num_running_reqs', 'The number of running requests.', 'gauge', [[`{${base},tp_rank="0"}`, m.runningRequests]]);
    family(lines, 'sglang:num_queue_reqs', 'The number of requests in the waiting queue.', 'gauge', [[`{${base},tp_rank="0"}`, m.waitingRequests]]);
    family(
      lines,
      'sglang:token_usage',
      'The token usage.',
      'gauge',
      m.cacheUsageByRank.map((u, r) => [`{dp_rank="${r}",${base},tp_rank="0"}`, u] as const),
    );
  }
  return `${lines.join('\n')}\n`;
}

function family(lines: string[], name: string, help: string, type: string, samples: readonly (readonly [string, number])[]): void {
  lines.push(`# HELP ${name} ${help}`, `# TYPE ${name} ${type}`);
  for (const [labels, value] of samples) lines.push(`${name}${labels} ${goFloat(value)}`);
}

function escapeLabel(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');
}
