// View stream metrics hooks (version, watchers, bytes sent) as /metrics shows them.
import { expect } from 'chai';
import { Registry } from 'prom-client';
import { ViewPublisher } from '../../../directory-svc/view/view-publisher.js';
import { registerViewMetrics } from '../../../directory-svc/view/view-metrics.js';

describe('view stream metrics', () => {
  let publisher: ViewPublisher | null = null;
  afterEach(() => {
    publisher?.close();
    publisher = null;
  });

  it('version, watchers and bytes sent are read from the publisher at scrape time', async () => {
    const p = new ViewPublisher({ flushIntervalMs: 3_600_000 });
    publisher = p;
    const registry = new Registry();
    registerViewMetrics(registry, p);
    p.addStream({ instanceName: 'e:1', dpRank: 0, blockSize: 4, hashSeed: 1024n }).streamClosed?.();
    const sent: Buffer[] = [];
    p.watch({ routerId: 'r', epoch: '', version: 0 }, { write: (b) => sent.push(b) > 0, onDrain: () => undefined, end: () => undefined });
    const text = await registry.metrics();
    expect(text).to.match(/^view_watchers 1$/m);
    expect(text).to.match(/^view_version 0$/m);
    expect(text).to.match(new RegExp(`^view_bytes_sent_total ${sent[0]!.length}$`, 'm'));
    expect(text).to.match(/^view_snapshots_total 1$/m);
  });
});
