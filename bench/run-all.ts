/**
 * `npm run bench`: runs every scenario benchmark in its own process (so one benchmark's heap and
 * sockets never disturb the next), echoes their JSON lines and writes them all to
 * bench/results/latest.json. `--quick` (default under CI=true) uses the short forms.
 *
 * Each benchmark prints one JSON object per line; lines that do not parse as JSON are shown as
 * log lines and not recorded.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { arch, cpus, loadavg } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const quick = process.argv.includes('--quick') || process.env.CI === 'true';
const only = process.argv.find((a) => a.startsWith('--only='))?.slice('--only='.length);

const benches: { name: string; file: string; nodeArgs?: string[] }[] = [
  // Micro-benchmarks beside the code they measure, then the scenario benchmarks.
  { name: 'decoder', file: 'directory-svc/decoder/live-frame-decoder.bench.ts' },
  { name: 'car', file: 'router-svc/policy/car-policy.bench.ts' },
  { name: 'report-executor', file: 'meta-svc/report/report-event-executor.bench.ts' },
  { name: 'ingest', file: 'bench/ingest/ingest.bench.ts' },
  { name: 'query', file: 'bench/query/query.bench.ts', nodeArgs: ['--expose-gc', '--max-old-space-size=8192'] },
  { name: 'meta', file: 'bench/meta/meta.bench.ts' },
  { name: 'meta-libs', file: 'bench/meta/libraries.bench.ts' },
  { name: 'tokenizer-libs', file: 'bench/tokenize/tokenizer-libs.bench.ts' },
  { name: 'template-render', file: 'bench/tokenize/template-render.bench.ts' },
  { name: 'route', file: 'bench/route/route.bench.ts' },
  { name: 'propagation', file: 'bench/propagation/propagation.bench.ts' },
  { name: 'scale', file: 'bench/scale/scale.bench.ts', nodeArgs: ['--expose-gc', '--max-old-space-size=16384'] },
  { name: 'cluster', file: 'bench/cluster/cluster.bench.ts' },
  // Issue 26: two base models, an adapter and two salted tenants on one fleet (per-identity hit ratio vs ORACLE).
  { name: 'cluster-identity', file: 'bench/cluster/identity.bench.ts' },
];

// The machine the numbers come from (the docs print it under every table): these runs share their
// cores with whatever else runs, so the load average at the start is part of the provenance.
const machine = { cpus: cpus().length, cpu_model: cpus()[0]?.model.trim() ?? '', arch: arch(), loadavg_start: loadavg().map((l) => Math.round(l * 10) / 10) };

const results: unknown[] = [];
for (const b of benches) {
  if (only && only !== b.name) continue;
  const file = join(root, b.file);
  if (!existsSync(file)) {
    console.error(`[bench] ${b.name}: ${b.file} not present, skipped`);
    continue;
  }
  console.error(`[bench] ${b.name}: running ${b.file}${quick ? ' --quick' : ''}`);
  const args = [...(b.nodeArgs ?? []), '--import', 'tsx', file, ...(quick ? ['--quick'] : [])];
  const r = spawnSync(process.execPath, args, { cwd: root, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 64 << 20 });
  for (const line of (r.stdout ?? '').split('\n')) {
    if (!line.trim()) continue;
    try {
      const obj = JSON.parse(line) as Record<string, unknown>;
      results.push({ bench: b.name, ...obj });
      console.log(line);
    } catch {
      console.error(`[bench] ${b.name}: ${line}`);
    }
  }
  if (r.status !== 0) console.error(`[bench] ${b.name}: exited with ${r.status}`);
}

mkdirSync(join(root, 'bench', 'results'), { recursive: true });
writeFileSync(
  join(root, 'bench', 'results', 'latest.json'),
  JSON.stringify({ measured_at: new Date().toISOString(), quick, node: process.version, machine, results }, null, 2) + '\n',
);
console.error(`[bench] wrote bench/results/latest.json (${results.length} results)`);
