/**
 * The metrics reference, generated from what each service's registries hold when it runs
 * (live-services.ts): name, type, label names and the help text the service registers. prom-client's
 * default process metrics are listed apart, folded, since they mean the same in every Node
 * process. Pure.
 */
import type { LiveMetric, ServiceName } from './live-services.js';
import { code, markdownTable } from './markdown-table.js';

/** prom-client's collectDefaultMetrics names, with or without a service prefix (`router_`). */
const PROCESS_METRIC = /^([a-z]+_)?(process|nodejs)_/;

export function isProcessMetric(m: LiveMetric): boolean {
  return PROCESS_METRIC.test(m.name) && !m.name.startsWith('kv_') && !m.name.startsWith('kvcm_');
}

/** One service's section body: its own metrics, then its process metrics folded. */
export function metricsMarkdown(service: ServiceName, metrics: readonly LiveMetric[]): string {
  const own = metrics.filter((m) => !isProcessMetric(m));
  const proc = metrics.filter(isProcessMetric);
  const out = [markdownTable(['metric', 'type', 'labels', 'meaning'], own.map(row))];
  if (proc.length > 0) {
    out.push(
      '',
      '<details>',
      `<summary>${service}: ${proc.length} process metrics of prom-client's <code>collectDefaultMetrics</code> (CPU, memory, event-loop lag, GC, handles)</summary>`,
      '',
      markdownTable(['metric', 'type', 'labels', 'meaning'], proc.map(row)),
      '',
      '</details>',
    );
  } else {
    out.push('', `${service} registers no process metrics.`);
  }
  return out.join('\n');
}

function row(m: LiveMetric): string[] {
  const labels = m.labelNames.length === 0 ? '—' : m.labelNames.map((l) => code(l)).join(', ');
  const help = m.only === '' ? m.help : `${m.help} (${m.only})`;
  return [code(m.name), m.type, labels, help];
}
