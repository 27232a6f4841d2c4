// shared/metrics/scraped-metrics.ts: series are exactly what the sources hold at each scrape.
import { expect } from 'chai';
import { createMetricsRegistry } from '../../../shared/metrics/metrics-registry.js';
import { scrapedCounter, scrapedGauge } from '../../../shared/metrics/scraped-metrics.js';

describe('collect-at-scrape metrics (shared/metrics)', () => {
  it('a scraped counter reports each source\'s cumulative value and drops a source that is gone', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    const sources = new Map<string, number>([['a', 3], ['b', 0]]);
    scrapedCounter({
      name: 'demo_events_total',
      help: 'demo',
      labelNames: ['source'],
      registers: [registry],
      sample: (emit) => {
        for (const [source, n] of sources) emit({ source }, n);
      },
    });
    let text = await registry.metrics();
    expect(text).to.contain('# TYPE demo_events_total counter');
    expect(text).to.contain('demo_events_total{source="a"} 3');
    expect(text).to.contain('demo_events_total{source="b"} 0');

    sources.set('a', 5);
    sources.delete('b');
    text = await registry.metrics();
    expect(text).to.contain('demo_events_total{source="a"} 5');
    expect(text).not.to.contain('source="b"');
  });

  it('a scraped gauge reports negative values and nothing when there is no source', async () => {
    const registry = createMetricsRegistry({ processMetrics: false });
    let value: number | null = -1;
    scrapedGauge({ name: 'demo_sequence', help: 'demo', labelNames: ['source'], registers: [registry], sample: (emit) => value !== null && emit({ source: 'a' }, value) });
    expect(await registry.metrics()).to.contain('demo_sequence{source="a"} -1');
    value = null;
    expect(await registry.metrics()).not.to.contain('demo_sequence{');
  });

  it('every registry of a process shares its one set of process collectors, which prom-client never stops', async () => {
    // A second set would add another GC observer and another 10 ms event-loop-delay timer, for good.
    const a = createMetricsRegistry({ processMetricsPrefix: 'shared_collectors_' });
    const b = createMetricsRegistry({ processMetricsPrefix: 'shared_collectors_' });
    for (const name of ['shared_collectors_nodejs_gc_duration_seconds', 'shared_collectors_nodejs_eventloop_lag_seconds', 'shared_collectors_process_cpu_user_seconds_total']) {
      expect(a.getSingleMetric(name), name).not.to.equal(undefined);
      expect(b.getSingleMetric(name), name).to.equal(a.getSingleMetric(name));
    }
    expect(await b.metrics()).to.contain('shared_collectors_process_cpu_user_seconds_total');
    // Another prefix is another service's naming: its own set, once.
    expect(createMetricsRegistry({ processMetricsPrefix: 'other_prefix_' }).getSingleMetric('other_prefix_nodejs_gc_duration_seconds')).not.to.equal(undefined);
  });

  it('the service registry carries the default process metrics unless turned off', async () => {
    expect(await createMetricsRegistry().metrics()).to.contain('process_cpu_user_seconds_total');
    expect(await createMetricsRegistry({ processMetrics: false }).metrics()).not.to.contain('process_cpu_user_seconds_total');
  });
});
