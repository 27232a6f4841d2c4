/**
 * The three services started for real, once, to read what they serve: every metric their
 * registries hold (through registry-hook.ts), the metric families their `/metrics` prints, and
 * which HTTP routes answer. The metrics reference is generated from these facts and the docs test
 * checks the references against them, so a metric or route added to a service cannot stay out of
 * the docs. The docs test also runs the pages' `stack` commands against this fleet. Everything
 * runs from source through tsx (no build needed), on free loopback ports, with no etcd and no GPU:
 *
 *   engine-sim (vLLM kind, serving qwen3 and its adapter sql-lora) ──ZMQ events, /health, /metrics,
 *     /v1/models──▶ directory-svc (engines file) ◀── router-svc (CAR)
 *   meta-svc on SQLite; meta-svc on Redis (a redis-server of its own)
 */
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { RPC_NAMES } from '../../meta-svc/wire/response-defaults.js';
import { freePort, freePortRange } from '../../test/helpers/ports.js';
import { RedisServer } from '../../test/helpers/redis-server.js';
import type { RegisteredMetric } from './registry-hook.js';

export type ServiceName = 'directory-svc' | 'router-svc' | 'meta-svc';
export const SERVICE_NAMES: readonly ServiceName[] = ['directory-svc', 'router-svc', 'meta-svc'];

/** A route that answered: any status but 404 (unknown path) and 405 (known path, other method). */
export interface ServedRoute {
  readonly method: 'GET' | 'POST';
  readonly path: string;
}

/** A registered metric and the configurations of the service that register it. */
export interface LiveMetric extends RegisteredMetric {
  /** '' = every configuration started; otherwise e.g. 'Redis store only'. */
  readonly only: string;
}

export interface LiveFacts {
  readonly metrics: ReadonlyMap<ServiceName, readonly LiveMetric[]>;
  /** Metric family names printed by each service's `GET /metrics`. */
  readonly exposed: ReadonlyMap<ServiceName, readonly string[]>;
  readonly routes: ReadonlyMap<ServiceName, readonly ServedRoute[]>;
}

/** The fleet's ports, beside the defaults the docs' commands use. */
export interface FleetPorts {
  readonly routerHttp: number;
  readonly directoryGrpc: number;
  readonly directoryHttp: number;
  readonly metaHttp: number;
}

const HOOK = 'scripts/docs/registry-hook.ts';
const READY_MS = 90000;
const ENGINE_BLOCK_SIZE = 16;
/** The engine's `--served_models`: what the pages' examples name (`qwen3`, its adapter `sql-lora`). */
const SERVED_MODELS = 'qwen3,sql-lora';

/** Where each service's path literals live: the candidates probed for routes. */
const ROUTE_SOURCES: Readonly<Record<ServiceName, readonly string[]>> = {
  'directory-svc': ['directory-svc/http'],
  'router-svc': ['router-svc'],
  'meta-svc': ['meta-svc/http'],
};

interface Started {
  readonly name: ServiceName | 'engine';
  readonly variant: string;
  readonly proc: ServiceProcess;
  readonly baseUrl: string;
}

export class LiveFleet {
  private constructor(
    private readonly root: string,
    private readonly dir: string,
    private readonly started: Started[],
    private readonly redis: RedisServer | null,
    readonly ports: FleetPorts,
  ) {}

  /**
   * Starts everything and waits until each service answers; stops what it started on failure.
   * `fromDist`: run the built `dist/` entries (faster to start; the caller makes sure the build is
   * current) instead of the sources through tsx.
   */
  static async start(root: string, opts: { readonly fromDist?: boolean } = {}): Promise<LiveFleet> {
    const dir = mkdtempSync(join(tmpdir(), 'docs-live-'));
    const started: Started[] = [];
    let redis: RedisServer | null = null;
    try {
      const [grpcPort, dirHttp, routerHttp, metaSqlite, metaRedis, etcdPort] = await Promise.all([freePort(), freePort(), freePort(), freePort(), freePort(), freePort()]);
      // The engine's HTTP port, then its one rank's event and replay ports (offsets 1 and 2).
      const enginePort = await freePortRange(3);
      const zmqBase = enginePort + 1;
      const enginesFile = join(dir, 'engines.json');
      writeFileSync(
        enginesFile,
        JSON.stringify({
          engines: [
            {
              name: 'docs-vllm-0',
              url: `http://127.0.0.1:${enginePort}`,
              kind: 'vllm',
              event_endpoint: `tcp://127.0.0.1:${zmqBase}`,
              replay_endpoint: `tcp://127.0.0.1:${zmqBase + 1}`,
              block_size: ENGINE_BLOCK_SIZE,
            },
          ],
        }),
      );
      redis = await RedisServer.start();
      const tokenizer = bundledQwen3TokenizerDir();
      const spawn = (name: Started['name'], variant: string, source: string, port: number, args: string[], hook: boolean): Started => {
        const entry = opts.fromDist === true ? join('dist', source.replace(/\.ts$/, '.js')) : source;
        const proc = ServiceProcess.spawn({
          name: `${name}${variant === '' ? '' : ` (${variant})`}`,
          command: process.execPath,
          args: ['--import', 'tsx', ...(hook ? ['--import', join(root, HOOK)] : []), join(root, entry), ...args],
          cwd: root,
          ipc: hook,
        });
        const s: Started = { name, variant, proc, baseUrl: `http://127.0.0.1:${port}` };
        started.push(s);
        return s;
      };
      spawn('engine', '', 'tools/engine-sim/cli.ts', enginePort, [
        '--engine_kind=vllm',
        `--name=127.0.0.1:${enginePort}`,
        `--block_size=${ENGINE_BLOCK_SIZE}`,
        '--event_port_offset=1',
        '--replay_port_offset=2',
        `--tokenizer=${tokenizer}`,
        // A base model and an adapter, so the pages' commands naming a model or a LoRA run as written.
        `--served_models=${SERVED_MODELS}`,
      ], false);
      const directory = spawn('directory-svc', '', 'directory-svc/main.ts', dirHttp, [
        `--grpc_port=${grpcPort}`,
        `--http_port=${dirHttp}`,
        `--etcd_addr=127.0.0.1:${etcdPort}`,
        `--engines_file=${enginesFile}`,
        '--engines_refresh_interval_ms=250',
        '--log_level=warn',
      ], true);
      const sqlite = spawn('meta-svc', 'SQLite store', 'meta-svc/main.ts', metaSqlite, [`--http_port=${metaSqlite}`, `--meta_store=sqlite:${join(dir, 'kvcm.db')}`, '--log_level=warn'], true);
      const onRedis = spawn('meta-svc', 'Redis store', 'meta-svc/main.ts', metaRedis, [`--http_port=${metaRedis}`, `--meta_store=${redis.url(0)}`, '--node_id=docs', '--log_level=warn'], true);
      await directory.proc.waitForHttp(`${directory.baseUrl}/health`, READY_MS);
      // The router opens its port only after the directory's first view snapshot (routing.md).
      const router = spawn('router-svc', '', 'router-svc/main.ts', routerHttp, [
        `--directory_addr=127.0.0.1:${grpcPort}`,
        `--http_port=${routerHttp}`,
        '--load_balance_policy=CAR',
        `--tokenizer=${tokenizer}`,
        '--log_level=warn',
      ], true);
      await Promise.all([router, sqlite, onRedis].map((s) => s.proc.waitForHttp(`${s.baseUrl}/health`, READY_MS)));
      return new LiveFleet(root, dir, started, redis, { routerHttp, directoryGrpc: grpcPort, directoryHttp: dirHttp, metaHttp: metaSqlite });
    } catch (e) {
      await stopAll(started, redis, dir);
      throw e;
    }
  }

  /** Until the router's view holds the engine with a synchronized stream: routes then succeed. */
  async untilRoutable(timeoutMs = READY_MS): Promise<void> {
    const router = this.service('router-svc', '');
    try {
      await router.proc.waitUntil(
        'the engine synchronized in the router view',
        async () => {
          const res = await fetch(`${router.baseUrl}/v1/internal/kv-cache/query`, { method: 'POST', body: '{"token_ids":[]}', headers: { 'content-type': 'application/json' } });
          const body = (await res.json()) as { matches?: { synchronized: boolean }[] };
          return res.status === 200 && (body.matches ?? []).some((m) => m.synchronized);
        },
        timeoutMs,
      );
    } catch (e) {
      const tails = ['engine', 'directory-svc'].map((n) => `--- ${n} (tail) ---\n${this.service(n as Started['name'], '').proc.tail(20)}`);
      throw new Error(`${e instanceof Error ? e.message : String(e)}\n${tails.join('\n')}`);
    }
  }

  /**
   * Reads every fact. `extraPaths` are probed too (the paths a reference documents), so a
   * documented route that is not served shows up as missing from `routes`.
   */
  async facts(extraPaths: ReadonlyMap<ServiceName, readonly string[]> = new Map()): Promise<LiveFacts> {
    const metrics = new Map<ServiceName, LiveMetric[]>();
    const exposed = new Map<ServiceName, string[]>();
    const routes = new Map<ServiceName, ServedRoute[]>();
    for (const name of SERVICE_NAMES) {
      const variants = this.started.filter((s) => s.name === name);
      const perVariant = await Promise.all(variants.map((s) => registeredMetrics(s.proc)));
      metrics.set(name, mergeVariants(variants.map((v) => v.variant), perVariant));
      const texts = await Promise.all(variants.map((s) => fetchText(`${s.baseUrl}/metrics`)));
      exposed.set(name, [...new Set(texts.flatMap(metricFamilies))].sort());
      const candidates = [...routeCandidates(this.root, name), ...(extraPaths.get(name) ?? [])];
      routes.set(name, await probeRoutes(variants[0]!.baseUrl, candidates));
    }
    return { metrics, exposed, routes };
  }

  async stop(): Promise<void> {
    await stopAll(this.started, this.redis, this.dir);
  }

  private service(name: Started['name'], variant: string): Started {
    const s = this.started.find((x) => x.name === name && x.variant === variant);
    if (s === undefined) throw new Error(`no ${name} ${variant} in the fleet`);
    return s;
  }
}

/** Starts the fleet, reads the facts, stops it: what `npm run docs` needs. */
export async function collectLiveFacts(root: string): Promise<LiveFacts> {
  const fleet = await LiveFleet.start(root);
  try {
    return await fleet.facts();
  } finally {
    await fleet.stop();
  }
}

async function stopAll(started: readonly Started[], redis: RedisServer | null, dir: string): Promise<void> {
  // The router first (it watches the directory), then the rest together.
  const router = started.filter((s) => s.name === 'router-svc');
  await Promise.all(router.map((s) => s.proc.stop()));
  await Promise.all(started.filter((s) => s.name !== 'router-svc').map((s) => s.proc.stop()));
  await redis?.destroy();
  rmSync(dir, { recursive: true, force: true });
}

/** The registry-hook's list, asked for over IPC. */
function registeredMetrics(proc: ServiceProcess): Promise<RegisteredMetric[]> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${proc.name}: no answer to docs:metrics (is ${HOOK} preloaded?)`)), 10000);
    proc.onMessage((m) => {
      const msg = m as { kind?: string; metrics?: RegisteredMetric[] };
      if (msg.kind !== 'docs:metrics' || msg.metrics === undefined) return;
      clearTimeout(timer);
      resolve(msg.metrics);
    });
    proc.send('docs:metrics');
  });
}

/** One list per service: a metric only some configurations register says which. */
function mergeVariants(variants: readonly string[], lists: readonly RegisteredMetric[][]): LiveMetric[] {
  const byName = new Map<string, { m: RegisteredMetric; in: string[] }>();
  lists.forEach((list, i) => {
    for (const m of list) {
      const seen = byName.get(m.name);
      if (seen === undefined) byName.set(m.name, { m, in: [variants[i]!] });
      else seen.in.push(variants[i]!);
    }
  });
  return [...byName.values()].map(({ m, in: where }) => ({ ...m, only: where.length === variants.length ? '' : `${where.join(', ')} only` }));
}

/** Family names of a Prometheus text exposition (`# TYPE name type` lines). */
export function metricFamilies(text: string): string[] {
  const out: string[] = [];
  for (const line of text.split('\n')) {
    const m = /^# TYPE (\S+) /.exec(line);
    if (m !== null) out.push(m[1]!);
  }
  return out;
}

/** Path-shaped string literals in a service's source: every route it could serve. */
export function routeCandidates(root: string, name: ServiceName): string[] {
  const out = new Set<string>(['/']);
  for (const d of ROUTE_SOURCES[name]) {
    for (const file of tsFiles(join(root, d))) {
      for (const m of readFileSync(file, 'utf8').matchAll(/['"`](\/[A-Za-z0-9_\-./]*)['"`]/g)) out.add(m[1]!);
    }
  }
  if (name === 'meta-svc') for (const rpc of RPC_NAMES) out.add(`/api/${rpc}`);
  return [...out].sort();
}

/** The (method, path) pairs among `paths` that `baseUrl` serves: GET and POST `{}` tried on each. */
export async function probeRoutes(baseUrl: string, paths: readonly string[]): Promise<ServedRoute[]> {
  const out: ServedRoute[] = [];
  for (const path of [...new Set(paths)].sort()) {
    for (const method of ['GET', 'POST'] as const) {
      // dry_run: a probe of /v1/route must not count as an in-flight decision.
      const init: RequestInit = method === 'GET' ? { method } : { method, body: '{"dry_run":true}', headers: { 'content-type': 'application/json' } };
      const res = await fetch(`${baseUrl}${path}`, { ...init, signal: AbortSignal.timeout(10000) });
      await res.arrayBuffer();
      if (res.status !== 404 && res.status !== 405) out.push({ method, path });
    }
  }
  return out;
}

async function fetchText(url: string): Promise<string> {
  const res = await fetch(url, { signal: AbortSignal.timeout(10000) });
  return res.text();
}

function tsFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir)) {
    const p = join(dir, entry);
    if (statSync(p).isDirectory()) out.push(...tsFiles(p));
    else if (entry.endsWith('.ts') && !entry.endsWith('.bench.ts') && !entry.endsWith('.test.ts')) out.push(p);
  }
  return out;
}
