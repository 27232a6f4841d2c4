/**
 * Prometheus metrics of the view stream, read from `ViewPublisher.stats()` when `/metrics` is
 * scraped: they wrap the publisher from outside and cost nothing between scrapes.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { ViewPublisherStats } from './view-publisher.js';

export interface ViewStatsSource {
  stats(): ViewPublisherStats;
}

/** Registers the view gauges and counters in `registry` (one per directory process). */
export function registerViewMetrics(registry: Registry, view: ViewStatsSource): void {
  const registers = [registry];
  const gauge = (name: string, help: string, read: (s: ViewPublisherStats) => number): void => {
    new Gauge({
      name,
      help,
      registers,
      collect() {
        this.set(read(view.stats()));
      },
    });
  };
  // Totals only grow; exposed as counters set to the publisher's running total on each scrape.
  const counter = (name: string, help: string, read: (s: ViewPublisherStats) => number): void => {
    new Counter({
      name,
      help,
      registers,
      collect() {
        this.reset();
        this.inc(read(view.stats()));
      },
    });
  };
  gauge('view_version', 'version of the latest view delta in this epoch', (s) => s.version);
  gauge('view_watchers', 'routers watching the view', (s) => s.watchers);
  gauge('view_change_log_entries', 'deltas held in the change log', (s) => s.logEntries);
  gauge('view_change_log_bytes', 'encoded bytes held in the change log', (s) => s.logBytes);
  counter('view_bytes_sent_total', 'encoded view updates written to watchers, all watchers', (s) => s.bytesSent);
  counter('view_deltas_total', 'deltas published', (s) => s.deltasPublished);
  counter('view_key_changes_total', 'incremental residency changes published', (s) => s.keyChangesPublished);
  counter('view_snapshots_total', 'full snapshots sent (fresh watches and unresumable resume points)', (s) => s.snapshotsSent);
  counter('view_resumes_total', 'watches resumed from the change log', (s) => s.resumes);
  counter('view_lagging_ended_total', 'watches ended because they fell behind the change log', (s) => s.laggingEnded);
}
