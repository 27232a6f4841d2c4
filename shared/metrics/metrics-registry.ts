/**
 * The one way a service process creates its Prometheus registry: a fresh `Registry` (never the
 * prom-client global, so tests can run several services in one process without name clashes)
 * with the default process metrics (CPU, memory, event-loop lag, GC) already registered.
 *
 * Those process metrics are collected once per process (and name prefix), whatever the number of
 * registries: prom-client's collectors never stop — each set enables an event-loop-delay monitor
 * (a timer every 10 ms) and adds a GC observer (a callback per collection) — so a process that
 * starts and closes many services (the cluster benchmark starts 1–4 routers per run, hundreds per
 * sweep) would run one set per service it ever started. Every registry shares the one set's
 * metric objects: the numbers are the process's either way.
 */
import { Registry, collectDefaultMetrics, type Metric } from 'prom-client';

export interface MetricsRegistryOptions {
  /** Register prom-client's default process metrics (default true). */
  readonly processMetrics?: boolean;
  /**
   * Prefix for the default process metrics only (default '': the conventional `process_*` and
   * `nodejs_*` names; Prometheus' `job` label tells the services apart).
   */
  readonly processMetricsPrefix?: string;
}

/** Per prefix, the metric objects of this process's one set of default collectors. */
const processMetrics = new Map<string, readonly Metric[]>();

export function createMetricsRegistry(opts: MetricsRegistryOptions = {}): Registry {
  const registry = new Registry();
  if (opts.processMetrics ?? true) {
    for (const metric of processMetricsOf(opts.processMetricsPrefix ?? '')) registry.registerMetric(metric);
  }
  return registry;
}

function processMetricsOf(prefix: string): readonly Metric[] {
  let metrics = processMetrics.get(prefix);
  if (metrics === undefined) {
    const owner = new Registry();
    collectDefaultMetrics({ register: owner, prefix });
    metrics = owner.getMetricsAsArray().map(({ name }) => owner.getSingleMetric(name)!);
    processMetrics.set(prefix, metrics);
  }
  return metrics;
}
