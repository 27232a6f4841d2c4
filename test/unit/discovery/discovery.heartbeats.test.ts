// discovery.md "Heartbeats": body validation (the HTTP edge maps invalid_load to 400).
import { expect } from 'chai';
import { heartbeatName, parseHeartbeat, parseLoadMetrics } from '../../../directory-svc/discovery/load-report.js';
import { errorClass } from './discovery-fixtures.js';

describe('discovery.md Heartbeats (body)', () => {
  it('the spec example parses into a fresh load with the MIX role', () => {
    const hb = parseHeartbeat({
      name: '10.0.0.5:8000',
      incarnation_id: 'a1b2c3',
      current_role: 'PREFILL',
      load_metrics: { waiting_requests_num: 3, gpu_cache_usage_perc: 0.42 },
      latency_metrics: { recent_max_ttft: 35, recent_max_tbt: 9 },
    });
    expect(hb).to.deep.equal({
      name: '10.0.0.5:8000',
      incarnationId: 'a1b2c3',
      currentRole: 'PREFILL',
      load: { waitingRequests: 3, gpuCacheUsage: 0.42, recentMaxTtftMs: 35, recentMaxTbtMs: 9 },
    });
  });

  it('a deprecated cache_event is accepted and ignored; no load_metrics is liveness only', () => {
    const hb = parseHeartbeat({ name: 'h:1', cache_event: { stored: [1] } });
    expect(hb.load).to.equal(null);
  });

  it('no name, negative or non-finite numbers and usage outside [0,1] are invalid', () => {
    const bad: unknown[] = [
      null,
      [],
      { load_metrics: {} },
      { name: '' },
      { name: 'h:1', load_metrics: { waiting_requests_num: -1 } },
      { name: 'h:1', load_metrics: { waiting_requests_num: Infinity } },
      { name: 'h:1', load_metrics: { waiting_requests_num: 1.5 } },
      { name: 'h:1', load_metrics: { gpu_cache_usage_perc: 1.01 } },
      { name: 'h:1', load_metrics: { gpu_cache_usage_perc: -0.1 } },
      { name: 'h:1', load_metrics: { gpu_cache_usage_perc: '0.5' } },
      { name: 'h:1', load_metrics: {}, latency_metrics: { recent_max_ttft: -3 } },
      { name: 'h:1', current_role: 'MIX' },
    ];
    for (const b of bad) expect(errorClass(() => parseHeartbeat(b)), JSON.stringify(b)).to.equal('invalid_load');
  });

  it('heartbeatName finds the name of an otherwise invalid body', () => {
    expect(heartbeatName({ name: 'h:1', load_metrics: 5 })).to.equal('h:1');
    expect(heartbeatName('x')).to.equal(null);
  });

  it('LOADMETRICS values use the same rules', () => {
    expect(parseLoadMetrics({ waiting_requests_num: 2, gpu_cache_usage_perc: 1 }).gpuCacheUsage).to.equal(1);
    expect(errorClass(() => parseLoadMetrics({ gpu_cache_usage_perc: 2 }))).to.equal('invalid_load');
  });
});
