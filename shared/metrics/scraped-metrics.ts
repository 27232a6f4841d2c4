/**
 * Counters and gauges whose values are read at scrape time from state the core already keeps
 * (e.g. a subscriber's live §10 counters), through prom-client's `collect()` callback. The hot
 * path does no metric work at all: nothing is incremented per event, and a scrape costs one pass
 * over the sources per metric.
 *
 * Each scrape first resets the metric and then re-emits every series, so a series whose source
 * is gone (a removed stream) disappears from the next scrape without any explicit removal.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

/** Emits one series: its labels and its current value (a counter's value is cumulative). */
export type EmitSample<L extends string> = (labels: Readonly<Partial<Record<L, string | number>>>, value: number) => void;

export interface ScrapedMetricOptions<L extends string> {
  readonly name: string;
  readonly help: string;
  readonly labelNames: readonly L[];
  readonly registers: readonly Registry[];
  /** Called once per scrape; calls `emit` once per series. Must not block or throw. */
  readonly sample: (emit: EmitSample<L>) => void;
}

/**
 * A counter whose series are the cumulative values `sample` reports. Values must never decrease
 * while their source lives; a source that goes and comes back restarts at 0, which Prometheus'
 * rate() reads as an ordinary counter reset.
 */
export function scrapedCounter<L extends string>(opts: ScrapedMetricOptions<L>): Counter<L> {
  const { sample } = opts;
  return new Counter<L>({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames,
    registers: [...opts.registers],
    collect() {
      this.reset();
      // inc(labels, 0) still creates the series, so known label values show up as 0 from the first scrape.
      sample((labels, value) => this.inc(labels as Partial<Record<L, string | number>>, value));
    },
  });
}

/** A gauge whose series are exactly those `sample` reports at each scrape. */
export function scrapedGauge<L extends string>(opts: ScrapedMetricOptions<L>): Gauge<L> {
  const { sample } = opts;
  return new Gauge<L>({
    name: opts.name,
    help: opts.help,
    labelNames: opts.labelNames,
    registers: [...opts.registers],
    collect() {
      this.reset();
      sample((labels, value) => this.set(labels as Partial<Record<L, string | number>>, value));
    },
  });
}
