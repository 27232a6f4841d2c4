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

  it('the service registry carries the default process metrics unless turned off', async () => {
    expect(await createMetricsRegistry().metrics()).to.contain('process_cpu_user_seconds_total');
    expect(await createMetricsRegistry({ processMetrics: false }).metrics()).not.to.contain('process_cpu_user_seconds_total');
  });
});
