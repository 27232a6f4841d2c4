/**
 * Preloaded into a service started for the docs (`node --import tsx --import ./scripts/docs/registry-hook.ts
 * <service main>`): it records every metric any prom-client `Registry` of the process registers —
 * name, type, help and label names, which `/metrics` text alone does not show for a labelled
 * metric with no series yet — and answers `docs:metrics` on the IPC channel with the list. The
 * service's own code is untouched: the hook wraps `Registry.prototype.registerMetric`, the one
 * call every metric of every registry goes through.
 */
import { Registry } from 'prom-client';

/** What the generator learns about one registered metric. */
export interface RegisteredMetric {
  readonly name: string;
  readonly type: string;
  readonly help: string;
  readonly labelNames: readonly string[];
}

interface MetricShape {
  readonly name: string;
  readonly help: string;
  readonly type?: string;
  readonly labelNames?: readonly string[];
}

// The metric objects themselves: a subclass sets `type` only after its base constructor has
// registered it, so the fields are read when asked, not at registration.
const registered = new Map<string, MetricShape>();
const register = Registry.prototype.registerMetric;

Registry.prototype.registerMetric = function (this: Registry, metric: Parameters<Registry['registerMetric']>[0]): void {
  const m = metric as unknown as MetricShape;
  registered.set(m.name, m);
  register.call(this, metric);
};

function describe(m: MetricShape): RegisteredMetric {
  return { name: m.name, type: m.type ?? 'untyped', help: m.help, labelNames: [...(m.labelNames ?? [])] };
}

if (process.send !== undefined) {
  process.on('message', (message: unknown) => {
    if (message === 'docs:metrics') process.send?.({ kind: 'docs:metrics', metrics: [...registered.values()].map(describe) });
  });
  // The channel must not keep a service alive after its own shutdown.
  process.channel?.unref();
}
