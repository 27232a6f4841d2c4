/**
 * Resident memory of a running stack's services under a steady load, for sizing their Kubernetes
 * requests and limits (deploy/kubernetes/, docs: deploy page). Sends `--concurrency` loops of
 * token-id completions through the router's OpenAI proxy (prompts of `--prompt_blocks` blocks
 * sharing 64 system prefixes, so the engines' caches and the directory's index fill up) and, every
 * 2 s, reads each service's own RSS gauge from its /metrics (directory-svc and meta-svc
 * `process_resident_memory_bytes`, router-svc `router_process_resident_memory_bytes`) and the
 * directory's index size. Prints one JSON line per sample and a last line with each peak.
 *
 *   npm start -- --engine_kind=vllm --device_capacity_blocks=16384     # in one terminal
 *   node --import tsx bench/deploy/service-rss.ts --router=http://127.0.0.1:8888 \
 *     --directory=http://127.0.0.1:8889 --meta=http://127.0.0.1:6382 --seconds=120
 *
 * Fixed seed; the first sample is taken before the load starts (the idle baseline).
 */
import { parseArgs } from 'node:util';
import { seededRandom } from '../lib/seeded-random.js';

const { values } = parseArgs({
  options: {
    router: { type: 'string', default: 'http://127.0.0.1:8888' },
    directory: { type: 'string', default: 'http://127.0.0.1:8889' },
    meta: { type: 'string', default: 'http://127.0.0.1:6382' },
    seconds: { type: 'string', default: '120' },
    concurrency: { type: 'string', default: '8' },
    block_size: { type: 'string', default: '16' },
    prompt_blocks: { type: 'string', default: '64' },
  },
});
const seconds = Number(values.seconds);
const concurrency = Number(values.concurrency);
const blockSize = Number(values.block_size);
const promptBlocks = Number(values.prompt_blocks);

/** Sum of every series of `name` in an exposition text; null when it has none. */
function gauge(text: string, name: string): number | null {
  let sum: number | null = null;
  for (const m of text.matchAll(new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'gm'))) sum = (sum ?? 0) + Number(m[1]);
  return sum;
}

async function metrics(url: string): Promise<string> {
  try {
    return await (await fetch(`${url}/metrics`, { signal: AbortSignal.timeout(5000) })).text();
  } catch {
    return '';
  }
}

interface Sample {
  t_s: number;
  requests: number;
  failed: number;
  directory_rss_mib: number | null;
  router_rss_mib: number | null;
  meta_rss_mib: number | null;
  index_blocks: number | null;
  index_mib: number | null;
}

const MIB = 1024 * 1024;
const mib = (v: number | null): number | null => (v === null ? null : Math.round((v / MIB) * 10) / 10);

async function sample(t0: number, requests: number, failed: number): Promise<Sample> {
  const [d, r, m] = await Promise.all([metrics(values.directory!), metrics(values.router!), metrics(values.meta!)]);
  return {
    t_s: Math.round((performance.now() - t0) / 100) / 10,
    requests,
    failed,
    directory_rss_mib: mib(gauge(d, 'process_resident_memory_bytes')),
    router_rss_mib: mib(gauge(r, 'router_process_resident_memory_bytes')),
    meta_rss_mib: mib(gauge(m, 'process_resident_memory_bytes')),
    index_blocks: gauge(d, 'kv_index_blocks'),
    index_mib: mib(gauge(d, 'kv_index_bytes')),
  };
}

async function main(): Promise<void> {
  const t0 = performance.now();
  let requests = 0;
  let failed = 0;
  const samples: Sample[] = [await sample(t0, 0, 0)];
  process.stdout.write(`${JSON.stringify(samples[0])}\n`);
  const endAt = t0 + seconds * 1000;
  const loop = async (seed: number): Promise<void> => {
    const rand = seededRandom(seed);
    while (performance.now() < endAt) {
      // 64 system prefixes of 4 blocks, then distinct blocks: caches fill, prefixes are shared.
      const family = Math.floor(rand() * 64);
      const tail = Math.floor(rand() * 2 ** 30);
      const prompt = Array.from({ length: promptBlocks * blockSize }, (_, k) => (k < 4 * blockSize ? 1_000_000 + family * 1000 + k : (tail + k * 7919) % 2_000_000_000));
      try {
        const res = await fetch(`${values.router}/v1/completions`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ model: 'm', prompt, max_tokens: 4 }),
          signal: AbortSignal.timeout(30000),
        });
        await res.arrayBuffer();
        if (res.status !== 200) failed++;
      } catch {
        failed++;
      }
      requests++;
    }
  };
  const loops = Array.from({ length: concurrency }, (_, i) => loop(7 + i * 7919));
  const timer = setInterval(() => {
    void sample(t0, requests, failed).then((s) => {
      samples.push(s);
      process.stdout.write(`${JSON.stringify(s)}\n`);
    });
  }, 2000);
  await Promise.all(loops);
  clearInterval(timer);
  samples.push(await sample(t0, requests, failed));
  const peak = (k: keyof Sample): number | null => samples.reduce<number | null>((a, s) => (s[k] === null ? a : Math.max(a ?? 0, s[k] as number)), null);
  process.stdout.write(
    `${JSON.stringify({
      peak: true,
      seconds,
      concurrency,
      requests,
      failed,
      idle: { directory_rss_mib: samples[0]!.directory_rss_mib, router_rss_mib: samples[0]!.router_rss_mib, meta_rss_mib: samples[0]!.meta_rss_mib },
      directory_rss_mib: peak('directory_rss_mib'),
      router_rss_mib: peak('router_rss_mib'),
      meta_rss_mib: peak('meta_rss_mib'),
      index_blocks: peak('index_blocks'),
      index_mib: peak('index_mib'),
    })}\n`,
  );
}

await main();
