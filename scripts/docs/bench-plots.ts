/**
 * The benchmarks page's plots, drawn from `bench/results/latest.json` with Vega-Lite and rendered
 * to SVG headless (`vega.View(...).toSVG()`, no browser, no canvas): the load sweep's TTFT per
 * policy, prefix-match cost against fleet size, and propagation latency. The same input always
 * renders the same bytes, so the docs test can tell a stale plot from a fresh one.
 */
import * as vega from 'vega';
import * as vl from 'vega-lite';
import type { TopLevelSpec } from 'vega-lite';
import { line, num, SWEEP_SERIES, type BenchResults } from './bench-results.js';

/** A plot file under docs/ and the spec that draws it. */
export interface Plot {
  /** Path relative to the repository root. */
  readonly file: string;
  readonly spec: TopLevelSpec;
}

const WIDTH = 260;
const HEIGHT = 180;
const FONT = 'Helvetica, Arial, sans-serif';
const CONFIG = { font: FONT, view: { stroke: '#ddd' }, axis: { labelFontSize: 11, titleFontSize: 11, labelLimit: 320 }, legend: { labelFontSize: 11, titleFontSize: 11, labelLimit: 320 } };

const PLOTTED = SWEEP_SERIES.filter((s) => s.plotted);

export function benchPlots(r: BenchResults): Plot[] {
  const date = r.measuredAt.slice(0, 10);
  return [sweepPlot(r, date), prefixMatchPlot(r, date), propagationPlot(r, date)];
}

function sweepPlot(r: BenchResults, date: string): Plot {
  const values = r.lines
    .filter((l) => l.bench === 'cluster' && l['kind'] === 'cluster_sweep')
    .flatMap((l) => {
      const s = PLOTTED.find((x) => x.policy === l['policy'] && x.routers === l['routers']);
      return s === undefined ? [] : [{ workload: String(l['workload']), kv: `${String(l['kv'])} KV`, load: Math.round(num(l, 'load_fraction')! * 100), ttft: num(l, 'engine_ttft_p90_ms'), series: s.label }];
    });
  return {
    file: 'docs/benchmarks/load-sweep-ttft.svg',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: { text: `TTFT p90 (engine clock) against offered load, 8 engines — ${date}`, fontSize: 13 },
      config: CONFIG,
      data: { values },
      facet: { row: { field: 'kv', type: 'nominal', title: null }, column: { field: 'workload', type: 'nominal', title: null } },
      spec: {
        width: WIDTH,
        height: HEIGHT,
        mark: { type: 'line', point: true },
        encoding: {
          x: { field: 'load', type: 'quantitative', title: "offered load, % of RR's knee", scale: { domain: [40, 100] } },
          y: { field: 'ttft', type: 'quantitative', title: 'TTFT p90 (ms, log)', scale: { type: 'log' } },
          color: { field: 'series', type: 'nominal', title: 'policy', sort: PLOTTED.map((s) => s.label) },
          strokeDash: { condition: { test: "indexof(datum.series, '4 routers') >= 0", value: [4, 3] }, value: [1, 0] },
        },
      },
      resolve: { scale: { y: 'independent' } },
    } as TopLevelSpec,
  };
}

function prefixMatchPlot(r: BenchResults, date: string): Plot {
  const values = r.lines
    .filter((l) => l.bench === 'query' && l['metric'] === 'prefix_match_scaling')
    .flatMap((l) => [
      { streams: num(l, 'streams'), us: num(l, 'match_p50_us'), series: 'walk, p50' },
      { streams: num(l, 'streams'), us: num(l, 'match_p99_us'), series: 'walk, p99' },
      { streams: num(l, 'streams'), us: num(l, 'lazy_match_p50_us'), series: 'walk + lazy hashing, p50' },
      { streams: num(l, 'streams'), us: num(l, 'lazy_match_p99_us'), series: 'walk + lazy hashing, p99' },
    ]);
  return {
    file: 'docs/benchmarks/prefix-match-scaling.svg',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: { text: `Prefix match of an 8k-token prompt against fleet size — ${date}`, subtitle: '16,384 blocks per stream; one walk covers every stream of a (block size, seed) group', fontSize: 13 },
      config: CONFIG,
      width: 2 * WIDTH,
      height: HEIGHT,
      data: { values },
      mark: { type: 'line', point: true },
      encoding: {
        x: { field: 'streams', type: 'quantitative', title: 'streams (engine DP ranks), log', scale: { type: 'log', base: 2 }, axis: { values: [8, 16, 32, 64, 128] } },
        y: { field: 'us', type: 'quantitative', title: 'µs per prompt', scale: { zero: true } },
        color: { field: 'series', type: 'nominal', title: null },
      },
    } as TopLevelSpec,
  };
}

function propagationPlot(r: BenchResults, date: string): Plot {
  const prop = line(r, 'propagation', { name: 'propagation_latency' });
  const index = line(r, 'propagation', { name: 'index_latency' });
  const values = [
    ...(['p50', 'p99', 'max'] as const).map((q) => ({ path: "event → directory index (baseline)", q, ms: num(index, `${q}_ms`) })),
    ...(['p50', 'p99', 'max'] as const).map((q) => ({ path: "event → router's view", q, ms: num(prop, `${q}_ms`) })),
  ];
  return {
    file: 'docs/benchmarks/propagation-latency.svg',
    spec: {
      $schema: 'https://vega.github.io/schema/vega-lite/v6.json',
      title: { text: `KV event propagation at ~${Math.round((num(prop, 'events_per_s') ?? 0) / 1000)}k block events/s — ${date}`, fontSize: 13 },
      config: CONFIG,
      width: 2 * WIDTH,
      height: HEIGHT,
      data: { values },
      mark: 'bar',
      encoding: {
        y: { field: 'path', type: 'nominal', title: null },
        yOffset: { field: 'q', sort: ['p50', 'p99', 'max'] },
        x: { field: 'ms', type: 'quantitative', title: 'ms' },
        color: { field: 'q', type: 'nominal', title: 'quantile', sort: ['p50', 'p99', 'max'] },
      },
    } as TopLevelSpec,
  };
}

/** The SVG text of one plot. */
export async function renderPlot(plot: Plot): Promise<string> {
  const view = new vega.View(vega.parse(vl.compile(plot.spec).spec), { renderer: 'none' });
  try {
    return `${await view.toSVG()}\n`;
  } finally {
    view.finalize();
  }
}
