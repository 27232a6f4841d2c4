// engines.md §4.1–§4.3: load and identity from an engine's Prometheus /metrics (pure mapping),
// the health/load rules of one engines-file engine, and the simulator's exposition read back.
import { expect } from 'chai';
import { EngineMetricsError, readEngineMetrics } from '../../../directory-svc/engines/engine-metrics.js';
import { EngineHealthState } from '../../../directory-svc/engines/engine-scraper.js';
import { goFloat, renderSimMetrics } from '../../../tools/engine-sim/prometheus-exposition.js';

// The shape vLLM V1 exports with two DP engines (trimmed), as prometheus_client writes it.
const VLLM_DP2 = `# HELP python_gc_objects_collected_total Objects collected during gc
# TYPE python_gc_objects_collected_total counter
python_gc_objects_collected_total{generation="0"} 12345.0
# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.
# TYPE process_start_time_seconds gauge
process_start_time_seconds 1.71234567891e+09
# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="meta-llama/Llama-3.1-8B"} 4.0
vllm:num_requests_running{engine="1",model_name="meta-llama/Llama-3.1-8B"} 2.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="meta-llama/Llama-3.1-8B"} 3.0
vllm:num_requests_waiting{engine="1",model_name="meta-llama/Llama-3.1-8B"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="meta-llama/Llama-3.1-8B"} 0.5
vllm:kv_cache_usage_perc{engine="1",model_name="meta-llama/Llama-3.1-8B"} 0.25
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{engine="0",model_name="meta-llama/Llama-3.1-8B"} 1.2e+06
`;

// Older vLLM (V0): gpu_cache_usage_perc; multiprocess mode: no process metrics.
const VLLM_V0 = `# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{model_name="m"} 7.0
# HELP vllm:gpu_cache_usage_perc GPU KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:gpu_cache_usage_perc gauge
vllm:gpu_cache_usage_perc{model_name="m"} 0.75
`;

const SGLANG = `# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{engine_type="unified",model_name="qwen",tp_rank="0"} 5.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{engine_type="unified",model_name="qwen",tp_rank="0"} 1.0
sglang:num_queue_reqs{engine_type="unified",model_name="qwen",tp_rank="1"} 1.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{engine_type="unified",model_name="qwen",tp_rank="0"} 0.1
`;

const load = (waitingRequests: number, gpuCacheUsage: number) => ({ waitingRequests, gpuCacheUsage, recentMaxTtftMs: null, recentMaxTbtMs: null });

describe('engines.md §4.2–§4.3 load and identity from /metrics', () => {
  it('E12 vLLM: waiting and running are summed over label sets, KV usage per DP engine averaged, identity is process_start_time_seconds', () => {
    const r = readEngineMetrics(VLLM_DP2, 'vllm');
    expect(r.load).to.deep.equal(load(5, 0.375));
    expect(r.runningRequests).to.equal(6);
    expect(r.identity).to.equal('1.71234567891e+09');
  });

  it('E12 vLLM without kv_cache_usage_perc falls back to gpu_cache_usage_perc; without process metrics there is no identity', () => {
    const r = readEngineMetrics(VLLM_V0, 'vllm');
    expect(r.load).to.deep.equal(load(7, 0.75));
    expect(r.identity).to.equal(null);
  });

  it('E12 SGLang names: num_queue_reqs summed, token_usage', () => {
    const r = readEngineMetrics(SGLANG, 'sglang');
    expect(r.load).to.deep.equal(load(2, 0.1));
    expect(r.runningRequests).to.equal(5);
  });

  it("E12 an exposition lacking the kind's waiting metric has no load (the previous one stays)", () => {
    expect(readEngineMetrics(SGLANG, 'vllm').load).to.equal(null);
    expect(readEngineMetrics(VLLM_DP2.replace(/^vllm:num_requests_waiting\{engine="1".*$/m, 'vllm:num_requests_waiting{engine="1"} NaN'), 'vllm').load).to.equal(null);
    expect(readEngineMetrics('', 'vllm')).to.deep.equal({ load: null, runningRequests: null, identity: null });
  });

  it('E12 text the parser refuses is a metrics error', () => {
    expect(() => readEngineMetrics('vllm:num_requests_waiting{engine="0" 3\n', 'vllm')).to.throw(EngineMetricsError, /^metrics: not Prometheus text/);
  });

  it("E12 the simulator's exposition reads back with the same load and identity, for both kinds", () => {
    for (const kind of ['vllm', 'sglang'] as const) {
      const text = renderSimMetrics({ kind, model: 'sim', waitingRequests: 3, runningRequests: 1, cacheUsageByRank: [0.5, 0.25], processStartTimeS: 1712345678.91 });
      const r = readEngineMetrics(text, kind);
      expect(r.load).to.deep.equal(load(3, 0.375));
      expect(r.identity).to.equal('1.71234567891e+09');
      expect(readEngineMetrics(renderSimMetrics({ kind, model: 'sim', waitingRequests: 0, runningRequests: 0, cacheUsageByRank: [0], processStartTimeS: null }), kind).identity).to.equal(null);
    }
  });

  it("writes floats as prometheus_client's floatToGoString does", () => {
    expect([0, 3, 0.5, 1712345678.91, 80244736, 123456, 1e-7].map(goFloat)).to.deep.equal(['0.0', '3.0', '0.5', '1.71234567891e+09', '8.0244736e+07', '123456.0', '1e-07']);
  });
});

describe('engines.md §4.1–§4.2 one engine’s health and load rules', () => {
  const reading = (waiting: number | null, identity: string | null = 'a') => ({
    load: waiting === null ? null : load(waiting, 0),
    runningRequests: null,
    identity,
  });

  it('E12 ACTIVE needs a first healthy probe and a first load', () => {
    const s = new EngineHealthState(2, 3000);
    expect(s.admissible).to.equal(false);
    s.probe(true);
    expect(s.admissible).to.equal(false);
    s.reading(reading(null), 0);
    expect(s.admissible).to.equal(false);
    s.reading(reading(1), 10);
    expect(s.admissible).to.equal(true);
  });

  it('E12 a new load is published once; a scrape without load keeps it; older than 3 × interval it is withdrawn until a good scrape', () => {
    const s = new EngineHealthState(2, 3000);
    s.probe(true);
    s.reading(reading(4), 0);
    expect(s.loadUpdate(0)).to.deep.equal(load(4, 0));
    expect(s.loadUpdate(100)).to.equal('unchanged');
    s.reading(reading(null), 1000);
    expect(s.loadUpdate(2999)).to.equal('unchanged');
    expect(s.loadUpdate(3001)).to.equal(null);
    expect(s.loadUpdate(3500)).to.equal('unchanged');
    s.reading(reading(2), 4000);
    expect(s.loadUpdate(4000)).to.deep.equal(load(2, 0));
  });

  it('E12 SUSPECT after the configured consecutive failed probes; one healthy probe clears it', () => {
    const s = new EngineHealthState(2, 3000);
    s.probe(true);
    s.probe(false);
    expect([s.healthy, s.suspect]).to.deep.equal([false, false]);
    s.probe(false);
    expect(s.suspect).to.equal(true);
    s.probe(true);
    expect([s.healthy, s.suspect]).to.deep.equal([true, false]);
  });

  it('E12 the identity follows the latest successful scrape (undefined before any)', () => {
    const s = new EngineHealthState(2, 3000);
    expect(s.identity).to.equal(undefined);
    s.reading(reading(1, '1.7e+09'), 0);
    expect(s.identity).to.equal('1.7e+09');
    s.reading(reading(1, null), 1);
    expect(s.identity).to.equal(null);
  });
});
