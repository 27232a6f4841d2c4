/**
 * The benchmark numbers the docs show, read from `bench/results/latest.json` (written by
 * `npm run bench`), never copied by hand: the README's headline table and the benchmarks page's
 * tables are generated from the same file the benchmark run wrote, each number beside the baseline
 * measured in the same run. A result the file lacks (a partial run) shows as "not in this run".
 * Pure apart from reading the file.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { markdownTable } from './markdown-table.js';

export const RESULTS_FILE = 'bench/results/latest.json';

/** One JSON line a benchmark printed, tagged with its benchmark's name. */
export type BenchLine = Readonly<Record<string, unknown>> & { readonly bench: string };

export interface BenchResults {
  readonly measuredAt: string;
  readonly quick: boolean;
  readonly node: string;
  /** `machine` as run-all.ts records it; null in files written before it did. */
  readonly machine: string | null;
  readonly lines: readonly BenchLine[];
}

/**
 * The machine of a results file that predates run-all.ts recording it: the run of 2026-12-03
 * was on a fresh 2-core development VM with nothing else running (its notes said so).
 */
const UNRECORDED_MACHINE = '2-core x86-64 development VM, nothing else running (not recorded in the file)';

export function readBenchResults(root: string): BenchResults {
  const raw = JSON.parse(readFileSync(join(root, RESULTS_FILE), 'utf8')) as {
    measured_at: string;
    quick: boolean;
    node: string;
    machine?: { cpus?: number; cpu_model?: string; arch?: string; loadavg_start?: number[] };
    results: BenchLine[];
  };
  return { measuredAt: raw.measured_at, quick: raw.quick, node: raw.node, machine: machineText(raw.machine), lines: raw.results };
}

function machineText(m: { cpus?: number; cpu_model?: string; arch?: string; loadavg_start?: number[] } | undefined): string | null {
  if (m === undefined) return null;
  const load = m.loadavg_start === undefined ? '' : `, load average ${m.loadavg_start[0]?.toFixed(1)} at the start`;
  return `${m.cpus ?? '?'} × ${m.cpu_model ?? 'CPU'} (${m.arch ?? '?'})${load}`;
}

/**
 * "Measured <date> by npm run bench -- --quick, Node …, <machine>": the provenance line under every
 * table. `toRoot` is the page's relative path to the repository root ('' for the README).
 */
export function provenance(r: BenchResults, toRoot: string): string {
  const date = r.measuredAt.slice(0, 10);
  const time = r.measuredAt.slice(11, 16);
  return `Measured ${date} (run finished ${time} UTC) by \`npm run bench${r.quick ? ' -- --quick' : ''}\`, Node ${r.node}, ${r.machine ?? UNRECORDED_MACHINE}. Source: [\`${RESULTS_FILE}\`](${toRoot}${RESULTS_FILE}).`;
}

/** The first line of `bench` whose fields equal `where`. */
export function line(r: BenchResults, bench: string, where: Readonly<Record<string, unknown>> = {}): BenchLine | undefined {
  return r.lines.find((l) => l.bench === bench && Object.entries(where).every(([k, v]) => l[k] === v));
}

export function num(l: BenchLine | undefined, field: string): number | undefined {
  const v = l?.[field];
  return typeof v === 'number' ? v : undefined;
}

/** A number with its unit, thousands separated, at most `digits` decimals; "—" when absent. */
export function fmt(v: number | undefined, unit = '', digits = 2): string {
  if (v === undefined) return '—';
  const abs = Math.abs(v);
  const d = abs >= 100 ? 0 : abs >= 10 ? Math.min(1, digits) : digits;
  const text = v.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: 0 });
  return unit === '' ? text : unit === '×' || unit === '%' ? `${text}${unit}` : `${text} ${unit}`;
}

function pct(v: number | undefined): string {
  return v === undefined ? '—' : `${(v * 100).toFixed(v < 0.01 ? 2 : 1)}%`;
}

const MISSING = 'not in this run';

/** The load sweep's series, in the order tables and plots show them (the plot leaves ORACLE λ 0.5 out). */
export const SWEEP_SERIES: readonly { policy: string; routers: number; label: string; plotted: boolean }[] = [
  { policy: 'RR', routers: 1, label: 'RR', plotted: true },
  { policy: 'CAR_0.5', routers: 1, label: 'CAR λ 0.5, 1 router', plotted: true },
  { policy: 'CAR_0.5', routers: 4, label: 'CAR λ 0.5, 4 routers', plotted: true },
  { policy: 'CAR_0.8', routers: 1, label: 'CAR λ 0.8, 1 router', plotted: true },
  { policy: 'CAR_0.8', routers: 4, label: 'CAR λ 0.8, 4 routers', plotted: true },
  { policy: 'ORACLE_0.5', routers: 0, label: 'ORACLE λ 0.5', plotted: false },
  { policy: 'ORACLE_0.8', routers: 0, label: 'ORACLE λ 0.8', plotted: true },
];

/** The README's five headline rows, each against the baseline measured in the same run. */
export function headlineMarkdown(r: BenchResults): string {
  const sweep = (policy: string, routers: number): BenchLine | undefined =>
    line(r, 'cluster', { kind: 'cluster_sweep', workload: 'multi_turn', kv: 'pressured', load_fraction: 0.9, policy, routers });
  const car = sweep('CAR_0.8', 1);
  const rr = sweep('RR', 1);
  const oracle = line(r, 'cluster', { kind: 'cluster_target', target: 'hit_ratio >= 0.95 * ORACLE', workload: 'multi_turn', policy: 'CAR_0.8', routers: 4 });
  const replicas = line(r, 'cluster', { kind: 'cluster_target', target: '4 replicas hit_ratio within 2% of 1', workload: 'multi_turn', policy: 'CAR_0.8' });
  const prop = line(r, 'propagation', { name: 'propagation_latency' });
  const index = line(r, 'propagation', { name: 'index_latency' });
  const route = line(r, 'route', { name: 'route_car_8k' });
  const parsing = line(r, 'route', { name: 'http_parsing_baseline' });
  const rows = [
    [
      'Time to first token, p90 (engine clock), multi-turn chat at 90% of round robin\'s saturation load, 8 simulated engines',
      car === undefined ? MISSING : `CAR (λ 0.8): ${fmt(num(car, 'engine_ttft_p90_ms'), 'ms')}`,
      rr === undefined ? MISSING : `round robin: ${fmt(num(rr, 'engine_ttft_p90_ms'), 'ms')}`,
      car === undefined || rr === undefined ? '—' : `${fmt(num(rr, 'engine_ttft_p90_ms')! / num(car, 'engine_ttft_p90_ms')!, '×', 1)} faster`,
    ],
    [
      'KV cache hit ratio against an omniscient router, multi-turn chat, 4 router replicas',
      oracle === undefined ? MISSING : `CAR (λ 0.8): ${fmt(num(oracle, 'value'), '', 3)} of the oracle's`,
      'omniscient oracle (true pools and queues at decision time)',
      oracle === undefined ? '—' : `${pct(num(oracle, 'value'))} of the oracle`,
    ],
    [
      'Hit ratio, 4 router replicas against 1 router, multi-turn chat',
      replicas === undefined ? MISSING : `4 replicas: ${fmt(num(replicas, 'four'), '', 4)}`,
      replicas === undefined ? MISSING : `1 router: ${fmt(num(replicas, 'one'), '', 4)}`,
      replicas === undefined ? '—' : `${pct(num(replicas, 'value'))} apart`,
    ],
    [
      'KV event to every router\'s view, at ~50k block events/s',
      prop === undefined ? MISSING : `p50 ${fmt(num(prop, 'p50_ms'), 'ms', 1)}, p99 ${fmt(num(prop, 'p99_ms'), 'ms', 1)}`,
      index === undefined ? MISSING : `event to the directory's index: p50 ${fmt(num(index, 'p50_ms'), 'ms', 1)}`,
      prop === undefined || index === undefined ? '—' : `+${fmt(num(prop, 'p50_ms')! - num(index, 'p50_ms')!, 'ms', 1)} at p50 for the view stream`,
    ],
    [
      '`POST /v1/route` decisions, 8k-token prompts, 128 streams, CAR',
      route === undefined ? MISSING : `${fmt(num(route, 'decisions_per_s'))} decisions/s, p99 ${fmt(num(route, 'p99_ms'), 'ms', 1)}`,
      parsing === undefined ? MISSING : `an HTTP server that only parses the same bodies: ${fmt(num(parsing, 'requests_per_s'))} requests/s`,
      route === undefined ? '—' : `${fmt(num(route, 'ratio_vs_parsing_baseline'), '', 2)} of the parsing server`,
    ],
  ];
  return [markdownTable(['what', 'measured', 'same-run baseline', 'result'], rows), '', provenance(r, '')].join('\n');
}
