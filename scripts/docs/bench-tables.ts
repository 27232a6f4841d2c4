/**
 * The benchmarks page's tables, generated from `bench/results/latest.json`: one summary row per
 * benchmark (result beside its same-run baseline and target), the cluster policy runs, the
 * cluster targets and the load sweep. Pure.
 */
import { fmt, line, num, provenance, SWEEP_SERIES, type BenchLine, type BenchResults } from './bench-results.js';
import { code, markdownTable } from './markdown-table.js';

/** The page lives at docs/benchmarks.md: one level below the root. */
const TO_ROOT = '../';

function met(v: unknown): string {
  return v === true ? '**met**' : v === false ? 'not met' : '—';
}

/** Every benchmark's main numbers, one row each, with the baseline measured in the same run. */
export function summaryMarkdown(r: BenchResults): string {
  const rows: string[][] = [];
  const add = (bench: string, what: string, result: string, baseline: string, target: string): void => {
    rows.push([code(bench), what, result, baseline, target]);
  };
  const dec = line(r, 'decoder');
  if (dec) add('decoder', String(dec['shape']), `${fmt(num(dec, 'decoder_blocks_per_s'))} blocks/s`, `\`@msgpack/msgpack\` decode: ${fmt(num(dec, 'baseline_blocks_per_s'))} blocks/s`, `≥ baseline: ${fmt(num(dec, 'speedup_vs_baseline'), '×')}`);
  const car = line(r, 'car-decision');
  if (car) {
    add('car', `one CAR decision, ${num(car, 'streams')} streams, ${fmt(num(car, 'prompt_tokens'))}-token prompt, hashing included`, `p50 ${fmt(num(car, 'decide_p50_us'), 'µs', 1)}, p99 ${fmt(num(car, 'decide_p99_us'), 'µs', 1)} (best round ${fmt(num(car, 'decide_p99_best_round_us'), 'µs', 1)})`, `key chain alone: p50 ${fmt(num(car, 'baseline_chain_p50_us'), 'µs', 1)}, p99 ${fmt(num(car, 'baseline_chain_p99_us'), 'µs', 1)}`, `p99 ≤ 100 µs: ${met((num(car, 'decide_p99_us') ?? Infinity) <= 100)}`);
  }
  for (const streams of [1, 16]) {
    const ing = line(r, 'ingest', { name: 'ingest', streams });
    if (ing) add('ingest', `decode + index over real ZeroMQ, ${streams} stream${streams > 1 ? 's' : ''}`, `${fmt(num(ing, 'blocks_per_s'))} blocks/s (${fmt(num(ing, 'blocks_per_cpu_s'))} per CPU-s)`, `raw SUB + msgpack decode: ${fmt(num(ing, 'baseline_blocks_per_s'))} blocks/s`, `≥ 0.5 of baseline: ${fmt(num(ing, 'ratio'))} wall, ${fmt(num(ing, 'cpu_ratio'))} CPU`);
  }
  const scaling = r.lines.filter((l) => l.bench === 'query' && l['metric'] === 'prefix_match_scaling');
  if (scaling.length > 0) {
    const ratio = line(r, 'query', { metric: 'prefix_match_scaling_ratio' });
    const cells = scaling.map((l) => `${num(l, 'streams')} streams ${fmt(num(l, 'match_p50_us'), '', 2)} / ${fmt(num(l, 'match_p99_us'), '', 2)}`).join('; ');
    const lazy = scaling.map((l) => fmt(num(l, 'lazy_match_p50_us'), '', 1)).join(' / ');
    add('query', `prefix match of an 8k-token prompt, 16,384 blocks per stream (walk without hashing), p50 / p99 µs`, cells, `match with lazy hashing, p50: ${lazy} µs`, `p99 ≤ 20 µs at 128 streams: ${met((num(scaling.find((l) => num(l, 'streams') === 128), 'match_p99_us') ?? Infinity) <= 20)}; p50 at 128 over 8 streams ${fmt(num(ratio, 'p50_128_over_8'))} ≤ 1.5: ${met((num(ratio, 'p50_128_over_8') ?? Infinity) <= 1.5)}`);
  }
  const holder = line(r, 'query', { metric: 'bytes_per_holder_block' });
  if (holder) add('query', `memory per (stream, block), ${num(holder, 'streams')} streams, mix ${String(holder['mix'])}`, `${fmt(num(holder, 'heap_plus_array_buffers_per_holder_block'), 'B', 1)}`, '—', `≤ ${num(holder, 'target_bytes')} B: ${met((num(holder, 'heap_plus_array_buffers_per_holder_block') ?? Infinity) <= (num(holder, 'target_bytes') ?? 0))}`);
  const reset = line(r, 'query', { metric: 'stream_reset_cost' });
  if (reset) add('query', `clearing one stream from a group of ${fmt(num(reset, 'group_keys'))} keys`, `p50 ${fmt(num(reset, 'clear_p50_us'), 'µs', 0)}, max ${fmt(num(reset, 'clear_max_us'), 'µs', 0)}`, '—', 'a few ms');
  const routeCar = line(r, 'route', { name: 'route_car_8k' });
  const bare = line(r, 'route', { name: 'http_baseline' });
  const parsing = line(r, 'route', { name: 'http_parsing_baseline' });
  if (routeCar) add('route', `\`POST /v1/route\`, 8k token ids, ${num(routeCar, 'streams')} streams, concurrency ${num(routeCar, 'concurrency')}`, `${fmt(num(routeCar, 'decisions_per_s'))} decisions/s, p50 ${fmt(num(routeCar, 'p50_ms'), 'ms')}, p99 ${fmt(num(routeCar, 'p99_ms'), 'ms')}`, `server that parses the body only: ${fmt(num(parsing, 'requests_per_s'))}/s; bare node:http: ${fmt(num(bare, 'requests_per_s'))}/s`, `≥ 0.5 of the parsing server: ${fmt(num(routeCar, 'ratio_vs_parsing_baseline'))}`);
  const chat = line(r, 'route', { name: 'route_chat_8k' });
  if (chat) {
    const ids = chat['token_ids'] as Record<string, number> | undefined;
    add('route', '`route_chat_8k`: 8.7k-token chats as `messages`, tokenized by the router', `${fmt(num(chat, 'requests_per_s'))} chats/s, p99 ${fmt(num(chat, 'p99_ms'), 'ms')}`, `the same prompts as token ids: ${fmt(ids?.['requests_per_s'])}/s`, `≥ 0.5: ${fmt(num(chat, 'chat_over_token_ids_ratio'), '', 3)}`);
  }
  const prop = line(r, 'propagation', { name: 'propagation_latency' });
  const idx = line(r, 'propagation', { name: 'index_latency' });
  const bytes = line(r, 'propagation', { name: 'view_stream_bytes' });
  if (prop) add('propagation', `KV event to a router's view, ~${fmt(num(prop, 'events_per_s'))} block events/s`, `p50 ${fmt(num(prop, 'p50_ms'), 'ms')}, p99 ${fmt(num(prop, 'p99_ms'), 'ms')}; ${fmt(num(bytes, 'bytes_per_key_change'), 'B', 1)} per key change`, `event to the directory's index: p50 ${fmt(num(idx, 'p50_ms'), 'ms')}, p99 ${fmt(num(idx, 'p99_ms'), 'ms')}`, 'reported');
  const cfg = line(r, 'scale', { metric: 'config' });
  const memFull = line(r, 'scale', { metric: 'memory', fraction: 1 });
  const ingAll = line(r, 'scale', { metric: 'ingest', fraction: 'all' });
  const rec = line(r, 'scale', { metric: 'recovery_one_stream' });
  const fetch = line(r, 'scale', { metric: 'snapshot_fetch_baseline' });
  const view = line(r, 'scale', { metric: 'router_view_memory' });
  const snap = line(r, 'scale', { metric: 'snapshot_build' });
  if (cfg) {
    add('scale', `${num(cfg, 'streams')} streams × ${fmt(num(cfg, 'blocks_per_stream'))} blocks: directory memory per block at full`, `${fmt(num(memFull, 'bytes_per_block'), 'B', 1)}; router view ${fmt(num(view, 'bytes_per_block'), 'B', 1)}`, '—', `≤ 48 B: ${met((num(memFull, 'bytes_per_block') ?? Infinity) <= 48)}`);
    add('scale', 'ingest while filling; one stream\'s recovery', `${fmt(num(ingAll, 'blocks_per_s'))} blocks/s; recovery median ${fmt(num(rec, 'median_ms'), 'ms')}`, `raw receive ${fmt(num(ingAll, 'baseline_blocks_per_s'))} blocks/s; raw snapshot fetch ${fmt(num(fetch, 'median_ms'), 'ms')}`, `ratio ${fmt(num(ingAll, 'ratio_vs_baseline'))}; ${fmt(num(rec, 'over_raw_fetch'), '×')} the fetch`);
    add('scale', 'directory event-loop delay while a router joins (snapshot build)', `max ${fmt(num(snap, 'event_loop_delay_max_ms'), 'ms')}, p99 ${fmt(num(snap, 'event_loop_delay_p99_ms'), 'ms')}`, '—', 'a few ms');
  }
  for (const store of ['sqlite', 'redis']) {
    const add2 = line(r, 'meta', { store, name: 'report_event_add_throughput' });
    const look = line(r, 'meta', { store, name: 'get_cache_location_prefix' });
    const base = line(r, 'meta', { store, name: 'http_baseline' });
    if (add2) add('meta', `meta-svc on ${store === 'sqlite' ? 'SQLite' : 'Redis'}: reportEvent ADD, ${num(add2, 'blocks_per_request')} blocks/request`, `${fmt(num(add2, 'events_per_s'))} events/s (${fmt(num(add2, 'events_per_cpu_s'))} per CPU-s)`, '—', `${String(add2['target'])}: ${met(add2['met'])}`);
    if (look) add('meta', `meta-svc on ${store === 'sqlite' ? 'SQLite' : 'Redis'}: getCacheLocation prefix, ${num(look, 'prompt_keys')} keys`, `p50 ${fmt(num(look, 'p50_ms'), 'ms')}, p99 ${fmt(num(look, 'p99_ms'), 'ms')}`, `bare HTTP p50 ${fmt(num(base, 'p50_ms'), 'ms', 3)}`, `${String(look['target'])}: ${met(look['met'])}`);
  }
  const loop = line(r, 'meta', { name: 'directory_event_loop_delay' });
  if (loop) add('meta', 'directory event-loop delay p99 under MetaService load', `meta-svc as its own process: ${fmt(num(loop, 'after_split_p99_ms'), 'ms')}`, `MetaService inside the directory: ${fmt(num(loop, 'before_split_p99_ms'), 'ms')}`, 'reported');
  const tok = r.lines.filter((l) => l.bench === 'tokenizer_libs' && typeof l['library'] === 'string');
  if (tok.length > 0) add('tokenizer-libs', `encode of a ${fmt(num(tok[0], 'tokens'))}-token chat, p50`, tok.map((l) => `${String(l['library'])} ${fmt(num(l, 'encode_p50_ms'), 'ms', 1)}`).join('; '), 'each other', 'reported (ids agree)');
  const comp = line(r, 'template_render', { engine: 'compiled' });
  const interp = line(r, 'template_render', { engine: 'interpreted' });
  if (comp) add('template-render', `render of a ${num(comp, 'messages')}-message chat (Qwen3 template)`, `compiled p50 ${fmt(num(comp, 'render_p50_ms'), 'ms', 3)}, p99 ${fmt(num(comp, 'render_p99_ms'), 'ms', 3)}`, `interpreted p50 ${fmt(num(interp, 'render_p50_ms'), 'ms', 3)}, p99 ${fmt(num(interp, 'render_p99_ms'), 'ms', 3)}`, 'reported');
  const exec = line(r, 'report-executor', { name: 'report_event_add_executor' });
  const execBase = line(r, 'report-executor', { name: 'report_event_store_baseline' });
  if (exec) add('report-executor', `reportEvent ADD executor, ${num(exec, 'blocks_per_request')} blocks/request`, `${fmt(num(exec, 'events_per_s'))} events/s`, `store alone: ${fmt(num(execBase, 'events_per_s'))} events/s`, 'reported');
  for (const l of r.lines.filter((x) => x.bench === 'meta-libs')) {
    const what = l['name'] === 'json_parse' ? `parse a ${String(l['body'])} body (${fmt(num(l, 'body_bytes'))} B)` : `block cache probe + fill, budget ${fmt(num(l, 'capacity'))}`;
    add('meta-libs', what, `current ${fmt(num(l, 'current_ns')! / 1000, 'µs', 1)}`, `package: ${fmt(num(l, 'package_ns')! / 1000, 'µs', 1)}`, `package / current ${fmt(num(l, 'ratio'))} (> 1: ours is faster)`);
  }
  return [markdownTable(['benchmark', 'what', 'result', 'same-run baseline', 'target'], rows), '', provenance(r, TO_ROOT)].join('\n');
}

const CLUSTER_POLICIES = ['RR', 'SLO_AWARE', 'CAR_0.5', 'CAR_0.8', 'ORACLE_0.5', 'ORACLE_0.8'];

/** The closed-loop policy runs: hit ratio and TTFT per (workload, policy, routers). */
export function clusterMarkdown(r: BenchResults): string {
  const runs = r.lines.filter((l) => l.bench === 'cluster' && l['kind'] === undefined && typeof l['policy'] === 'string');
  const rows = runs
    .slice()
    .sort((a, b) => String(a['workload']).localeCompare(String(b['workload'])) || CLUSTER_POLICIES.indexOf(String(a['policy'])) - CLUSTER_POLICIES.indexOf(String(b['policy'])) || num(a, 'routers')! - num(b, 'routers')!)
    .map((l) => [
      String(l['workload']),
      code(String(l['policy'])),
      num(l, 'routers') === 0 ? 'oracle' : String(num(l, 'routers')),
      fmt(num(l, 'hit_ratio'), '', 3),
      fmt(num(l, 'ttft_p90_ms'), 'ms', 1),
      fmt(num(l, 'engine_ttft_p90_ms'), 'ms', 1),
      fmt(num(l, 'ttft_p90_vs_rr'), '×'),
      fmt(num(l, 'hit_vs_oracle'), '', 3),
      String(num(l, 'reps') ?? 1),
    ]);
  return [
    markdownTable(['workload', 'policy', 'routers', 'hit ratio', 'TTFT p90 (client)', 'TTFT p90 (engine)', 'RR p90 / this p90', 'hit / oracle hit', 'repetitions'], rows),
    '',
    provenance(r, TO_ROOT),
  ].join('\n');
}

/** Every `cluster_target` line: the target, its value and whether it was met. */
export function targetsMarkdown(r: BenchResults): string {
  const rows = r.lines
    .filter((l) => l.bench === 'cluster' && l['kind'] === 'cluster_target')
    .map((l) => {
      const where = [String(l['workload']), l['kv'] === undefined ? '' : `${String(l['kv'])} KV`].filter((s) => s !== '').join(', ');
      const ci = (l['per_rep'] as { reps: number; ci95: number[] } | undefined) ?? null;
      return [
        String(l['target']),
        where,
        `${code(String(l['policy']))}${num(l, 'routers') === 0 ? '' : `, ${num(l, 'routers')} router${num(l, 'routers') === 1 ? '' : 's'}`}`,
        fmt(num(l, 'value'), '', 4),
        ci === null ? '—' : `${fmt(ci.ci95[0], '', 4)} … ${fmt(ci.ci95[1], '', 4)} (${ci.reps} reps)`,
        met(l['met']),
      ];
    });
  return [markdownTable(['target', 'workload', 'policy', 'value', 'per-repetition 95% interval', 'verdict'], rows), '', provenance(r, TO_ROOT)].join('\n');
}


/** The open-loop load sweep: one table per (workload, KV size), engine-clock TTFT p90 and hit ratio. */
export function sweepMarkdown(r: BenchResults): string {
  const out: string[] = [];
  const knees = r.lines.filter((l) => l.bench === 'cluster' && l['kind'] === 'cluster_knee');
  for (const knee of knees) {
    const cells = (fraction: number): string[] =>
      SWEEP_SERIES.map((c) => {
        const l: BenchLine | undefined = line(r, 'cluster', { kind: 'cluster_sweep', workload: knee['workload'], kv: knee['kv'], load_fraction: fraction, policy: c.policy, routers: c.routers });
        if (l === undefined) return '—';
        const ratio = c.policy === 'RR' || fraction !== 0.9 ? '' : ` (${fmt(num(l, 'engine_ttft_p90_vs_rr'), '×', 1)})`;
        return `${fmt(num(l, 'engine_ttft_p90_ms'), 'ms', 0)}${ratio}, hit ${fmt(num(l, 'hit_ratio'), '', 2)}`;
      });
    const fractions = [...new Set(r.lines.filter((l) => l['kind'] === 'cluster_sweep' && l['workload'] === knee['workload'] && l['kv'] === knee['kv']).map((l) => num(l, 'load_fraction')!))].sort();
    const rows = fractions.map((f) => {
      const any = line(r, 'cluster', { kind: 'cluster_sweep', workload: knee['workload'], kv: knee['kv'], load_fraction: f });
      return [`${Math.round(f * 100)}% (${fmt(num(any, 'sessions_per_s'))} sessions/s, ${fmt(num(any, 'offered_rps'), 'req/s', 1)})`, ...cells(f)];
    });
    out.push(
      `**${String(knee['workload'])}, ${String(knee['kv'])} KV** (RR's knee ${fmt(num(knee, 'knee_sessions_per_s'))} sessions/s; RR unloaded p90 ${fmt(num(knee, 'unloaded_engine_ttft_p90_ms'), 'ms', 0)}). Cells: engine-clock TTFT p90, engines' hit ratio; at 90%, RR's p90 over the cell's in brackets.`,
      '',
      markdownTable(['offered load', ...SWEEP_SERIES.map((c) => c.label)], rows),
      '',
    );
  }
  out.push(provenance(r, TO_ROOT));
  return out.join('\n');
}

/** The last full-form scale run, kept beside latest.json because the quick runs do not reach its size. */
export const SCALE_FULL_FILE = 'bench/results/scale-full-issue13.jsonl';
/** The file has no header; when and where it ran, from the run's notes. */
const SCALE_FULL_PROVENANCE =
  'Measured once, 2026-12-01 23:00 – 2026-12-02 00:05 UTC, full form (`node --expose-gc --max-old-space-size=16384 --import tsx bench/scale/scale.bench.ts`), on the shared 2-core development VM at load average 3–12 (other sessions running).';

export function scaleFullMarkdown(lines: readonly BenchLine[]): string {
  const get = (metric: string, where: Readonly<Record<string, unknown>> = {}): BenchLine | undefined =>
    lines.find((l) => l['metric'] === metric && Object.entries(where).every(([k, v]) => l[k] === v));
  const cfg = get('config');
  const rows: string[][] = [];
  for (const f of [0.25, 0.5, 0.75, 1]) {
    const mem = get('memory', { fraction: f });
    const ing = get('ingest', { fraction: f });
    rows.push([`directory at ${Math.round(f * 100)}% full (${fmt(num(mem, 'indexed_blocks'))} blocks)`, `${fmt(num(mem, 'bytes_per_block'), 'B', 1)} per block, RSS ${fmt(num(mem, 'rss_mib'), 'MiB')}`, `ingest ${fmt(num(ing, 'blocks_per_s'))} blocks/s (${fmt(num(ing, 'blocks_per_cpu_s'))} per CPU-s)`]);
  }
  const all = get('ingest', { fraction: 'all' });
  const base = get('ingest_baseline');
  rows.push(['ingest, whole fill', `${fmt(num(all, 'blocks_per_s'))} blocks/s`, `raw receive ${fmt(num(base, 'blocks_per_s'))} blocks/s (ratio ${fmt(num(all, 'ratio_vs_baseline'))})`]);
  const rec = get('recovery_one_stream');
  const fetch = get('snapshot_fetch_baseline');
  rows.push([`one stream's snapshot recovery (${fmt(num(rec, 'blocks'))} blocks)`, `median ${fmt(num(rec, 'median_ms'), 'ms')}`, `raw snapshot fetch median ${fmt(num(fetch, 'median_ms'), 'ms')}`]);
  const recAll = get('recovery_all_streams');
  rows.push([`every stream recovering at once (${num(recAll, 'streams')} streams)`, `${fmt(num(recAll, 'seconds'), 's')}, ${num(recAll, 'timeouts')} timeouts, peak RSS ${fmt(num(recAll, 'peak_rss_mib'), 'MiB')}`, `max_concurrent_recoveries ${num(recAll, 'max_concurrent_recoveries')}`]);
  const view = get('router_view_memory');
  rows.push(['a router\'s copy of the whole view', `${fmt(num(view, 'heap_plus_array_buffers_bytes')! / 1048576, 'MiB', 1)} (${fmt(num(view, 'bytes_per_block'), 'B', 1)} per indexed block)`, '—']);
  for (const tokens of [1024, 8192, 32768]) {
    const q = get('prefix_match_latency', { prompt_tokens: tokens });
    const chain = get('key_chain_latency', { prompt_tokens: tokens });
    rows.push([`directory query, ${fmt(tokens)}-token prompt`, `p50 ${fmt(num(q, 'p50_us'), 'µs', 1)}, CPU p99 ${fmt(num(q, 'cpu_p99_us'), 'µs', 0)}`, `key chain alone p50 ${fmt(num(chain, 'p50_us'), 'µs', 1)}`]);
  }
  return [
    `${num(cfg, 'streams')} streams × ${fmt(num(cfg, 'blocks_per_stream'))} blocks (${fmt(num(cfg, 'total_blocks'))} blocks), block size ${num(cfg, 'block_size')}:`,
    '',
    markdownTable(['what', 'result', 'same-run baseline'], rows),
    '',
    `${SCALE_FULL_PROVENANCE} Source: [\`${SCALE_FULL_FILE}\`](${TO_ROOT}${SCALE_FULL_FILE}).`,
  ].join('\n');
}
