/**
 * Types for `parse-prometheus-text-format` 1.1.1, which ships none: the prom2json-like shape its
 * README documents. Values stay strings ("3.0", "NaN", "+Inf"): the caller decides what is a number.
 */
declare module 'parse-prometheus-text-format' {
  export interface PrometheusSample {
    readonly value?: string;
    readonly labels?: Readonly<Record<string, string>>;
    readonly timestamp_ms?: string;
    /** Histograms: bucket upper bound → count; summaries: quantile → value. */
    readonly buckets?: Readonly<Record<string, string>>;
    readonly quantiles?: Readonly<Record<string, string>>;
    readonly count?: string;
    readonly sum?: string;
  }
  export interface PrometheusFamily {
    readonly name: string;
    readonly help: string;
    /** GAUGE, COUNTER, HISTOGRAM, SUMMARY or UNTYPED. */
    readonly type: string;
    readonly metrics: readonly PrometheusSample[];
  }
  export default function parsePrometheusTextFormat(text: string): PrometheusFamily[];
}
