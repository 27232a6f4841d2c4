/**
 * The metric names the observability suite reads out of rule and dashboard expressions
 * (test/helpers/promql-names.ts): calls, keywords, label matchers, ranges and grouping labels are
 * not names; recorded series (with colons) are.
 */
import { expect } from 'chai';
import { promqlMetricNames } from '../../helpers/promql-names.js';

describe('PromQL metric names (observability suite helper)', () => {
  it('a histogram quantile names only its bucket series, not le, the grouping labels or the rate window', () => {
    expect(promqlMetricNames('histogram_quantile(0.99, sum by (le, policy) (rate(router_decision_latency_seconds_bucket[$__rate_interval])))')).to.deep.equal([
      'router_decision_latency_seconds_bucket',
    ]);
  });

  it('binary operators with on/ignoring, offsets and numbers; label values that look like names are not names', () => {
    const expr = 'a:b:mean5m{policy="CAR"} == 0 and on (policy) max_over_time(x_total{job="kv_stream_state"}[6h] offset 1h) > 1e3 unless ignoring(instance) y';
    expect(promqlMetricNames(expr)).to.deep.equal(['a:b:mean5m', 'x_total', 'y']);
  });

  it('a bare selector and a comparison', () => {
    expect(promqlMetricNames('kv_stream_state != 3')).to.deep.equal(['kv_stream_state']);
    expect(promqlMetricNames('sum(kvcm_ready) / count(kvcm_ready)')).to.deep.equal(['kvcm_ready']);
  });
});
