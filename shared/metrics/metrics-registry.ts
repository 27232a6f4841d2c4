/**
 * The one way a service process creates its Prometheus registry: a fresh `Registry` (never the
 * prom-client global, so tests can run several services in one process without name clashes)
 * with the default process metrics (CPU, memory, event-loop lag, GC) already registered.
 */
import { Registry, collectDefaultMetrics } from 'prom-client';

export interface MetricsRegistryOptions {
  /**
   * Register prom-client's default process metrics (default true). Unit tests that build many
   * registries may turn them off: each registration adds a GC observer to the process.
   */
  readonly processMetrics?: boolean;
  /**
   * Prefix for the default process metrics only (default '': the conventional `process_*` and
   * `nodejs_*` names; Prometheus' `job` label tells the services apart).
   */
  readonly processMetricsPrefix?: string;
}

export function createMetricsRegistry(opts: MetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
  if (opts.processMetrics ?? true) {
    collectDefaultMetrics({ register: registry, prefix: opts.processMetricsPrefix ?? '' });
  }
  return registry;
}
