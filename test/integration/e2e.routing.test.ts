/**
 * Routing acceptance across real processes (architecture.md, routing.md, discovery.md):
 *
 *   etcd ◀─ lease + key ── engine A (DEFAULT)      ── ZMQ events/snapshots ──▶ directory-svc
 *        ◀──────────────── engine B (DEFAULT)      ── heartbeats (HTTP) ─────▶   │ gRPC WatchView
 *        ◀──────────────── engine C (PREFILL, DP=2)                              ▼
 *                                                          router 1, router 2 (CAR), router 3 (late)
 *                                                          └─ OpenAI proxy ──▶ engines
 *
 * With no DECODE instance, routing.md restricts P to DEFAULT: the proxy chooses between A and B
 * only, so "sent twice, lands on the same engine" does not depend on which rank of a DP engine
 * took the first request; C's two streams still show in every query answer, per rank.
 * Every process is stopped in afterEach; waits poll a condition, nothing asserts a duration.
 */
import { expect } from 'chai';
import { writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EtcdServer } from '../helpers/etcd-server.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { ServiceProcess, stopAllProcesses } from '../../shared/process/service-process.js';
import { RouterProcess } from '../helpers/router-stack.js';
import { findFreeEngineBase, layoutEngines, type PlannedEngine } from '../../tools/stack/port-plan.js';
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';

const BLOCK_SIZE = 16;
/** Small so the stale case is quick; well above the directory's 500 ms view heartbeat. */
const VIEW_STALE_AFTER_MS = 2000;
const START_MS = 90000;
const CONVERGE_MS = 30000;
const INSTANCE_HEADER = 'x-kv-router-instance';
const ENGINES = [
  { type: 'DEFAULT', dpSize: 1 },
  { type: 'DEFAULT', dpSize: 1 },
  { type: 'PREFILL', dpSize: 2 },
] as const;
/** Streams the directory subscribes: A, B and C's two ranks. */
const STREAMS = 4;

/** 4 complete blocks plus a partial one; `salt` keeps prompts of different tests apart. */
function prompt(salt: number): number[] {
  return Array.from({ length: 4 * BLOCK_SIZE + 5 }, (_, k) => salt * 1000 + k);
}
const RESIDENT_TOKENS = 4 * BLOCK_SIZE;

class Router {
  constructor(
    readonly proc: ServiceProcess,
    readonly url: string,
  ) {}

  async query(tokenIds: readonly number[]): Promise<QueryResult> {
    return (await post(`${this.url}/v1/internal/kv-cache/query`, { token_ids: tokenIds })).json as QueryResult;
  }

  /** A dry run (routing.md "In-flight load"): explained, not counted, so polling it leaves the queues alone. */
  async route(tokenIds: readonly number[]): Promise<RouteAnswer> {
    return (await post(`${this.url}/v1/route`, { token_ids: tokenIds, dry_run: true })).json as RouteAnswer;
  }

  /** Through the proxy: the engine that served it and what it reused. */
  async complete(tokenIds: readonly number[]): Promise<{ status: number; engine: string | null; cachedTokens: number }> {
    const res = await post(`${this.url}/v1/completions`, { model: 'e2e', prompt: tokenIds, max_tokens: 2 });
    const usage = (res.json as { usage?: { prompt_tokens_details?: { cached_tokens?: number } } }).usage;
    return { status: res.status, engine: res.headers.get(INSTANCE_HEADER), cachedTokens: usage?.prompt_tokens_details?.cached_tokens ?? 0 };
  }
}

interface RouteAnswer {
  prefill: { name: string };
  candidates: { instance_name: string; role: string; hit_tokens: number; kv_hit_ratio: number; queue_cost: number }[];
}

class Cluster {
  etcd!: EtcdServer;
  engines: PlannedEngine[] = [];
  directory!: ServiceProcess;
  routers: Router[] = [];
  private grpcPort = 0;
  private httpPort = 0;
  private configFile = '';
  private readonly dir = mkdtempSync(join(tmpdir(), 'e2e-routing-'));

  async start(): Promise<void> {
    this.etcd = await EtcdServer.start();
    this.grpcPort = await freePort();
    this.httpPort = await freePort();
    this.configFile = join(this.dir, 'kv-events.json');
    writeFileSync(
      this.configFile,
      JSON.stringify({ discovery: { enabled: true, block_size: BLOCK_SIZE, topic: '', event_port_offset: 10000, replay_port_offset: 30000, refresh_interval_ms: 200 } }),
    );
    await this.startDirectory();
    this.engines = layoutEngines(ENGINES, await findFreeEngineBase(ENGINES, new Set([this.grpcPort, this.httpPort])));
    const engines = this.engines.map((e, i) =>
      ServiceProcess.spawn({
        name: `engine-${i}`,
        entry: 'tools/engine-sim/cli.ts',
        args: [
          `--name=127.0.0.1:${e.httpPort}`,
          `--type=${e.type}`,
          `--dp_size=${e.dpSize}`,
          `--block_size=${BLOCK_SIZE}`,
          `--etcd_addr=${this.etcd.address}`,
          `--directory_http=127.0.0.1:${this.httpPort}`,
        ],
      }),
    );
    await Promise.all(engines.map((p) => p.waitForLog((l) => l['msg'] === 'engine simulator ready', START_MS, 'engine simulator ready')));
    this.routers = await Promise.all([this.startRouter('router-1'), this.startRouter('router-2')]);
    // Every engine stream subscribed, recovered and in both routers' views.
    for (const r of this.routers) await waitFor(async () => allSynchronized(await r.query([])), CONVERGE_MS, `${r.proc.name}: ${STREAMS} synchronized streams`);
  }

  get nameA(): string {
    return `127.0.0.1:${this.engines[0]!.httpPort}`;
  }

  get nameC(): string {
    return `127.0.0.1:${this.engines[2]!.httpPort}`;
  }

  async startDirectory(): Promise<void> {
    this.directory = ServiceProcess.spawn({
      name: 'directory',
      entry: 'directory-svc/main.ts',
      args: [
        `--etcd_addr=${this.etcd.address}`,
        `--kv_events_config_file=${this.configFile}`,
        `--grpc_port=${this.grpcPort}`,
        `--http_port=${this.httpPort}`,
      ],
    });
    await this.directory.waitForLog((l) => l['msg'] === 'directory-svc started', START_MS, 'directory-svc started');
  }

  async startRouter(name: string): Promise<Router> {
    const router = await RouterProcess.start(`127.0.0.1:${this.grpcPort}`, ['--load_balance_policy=CAR', `--view_stale_after_ms=${VIEW_STALE_AFTER_MS}`], { name, readyTimeoutMs: START_MS });
    return new Router(router.proc, router.url);
  }

  /** Sends `tokens` straight to an engine's own OpenAI endpoint (no router). */
  async completeAt(engine: string, tokens: readonly number[]): Promise<void> {
    const res = await post(`http://${engine}/v1/completions`, { prompt: tokens, max_tokens: 1 });
    expect(res.status).to.equal(200);
  }

  async stop(): Promise<void> {
    await stopAllProcesses();
    await this.etcd?.destroy();
    rmSync(this.dir, { recursive: true, force: true });
  }
}

async function post(url: string, body: unknown): Promise<{ status: number; json: unknown; headers: Headers }> {
  const res = await fetch(url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(10000) });
  const text = await res.text();
  return { status: res.status, json: text === '' ? null : (JSON.parse(text) as unknown), headers: res.headers };
}

function allSynchronized(q: QueryResult): boolean {
  return q.matches.length === STREAMS && q.matches.every((m) => m.synchronized);
}

function rankHits(q: QueryResult, instance: string): number[] {
  return q.matches.filter((m: StreamMatch) => m.instance_name === instance).map((m) => (m.synchronized ? m.device_hit_tokens + m.host_only_hit_tokens : 0));
}

describe('e2e routing: etcd, 3 simulated engines (one DP=2), directory-svc and CAR routers as real processes', function () {
  this.timeout(4 * START_MS);
  let cluster: Cluster;

  beforeEach(async () => {
    cluster = new Cluster();
    await cluster.start();
  });

  afterEach(async () => {
    await cluster.stop();
  });

  it('both routers return identical query answers, per DP rank, once the directory has the prompt', async () => {
    const p = prompt(1);
    const [r1, r2] = cluster.routers as [Router, Router];
    const served = await r1.complete(p);
    expect(served.status).to.equal(200);
    // One request to the DP=2 engine lands on one rank: its ranks differ, and both routers say so.
    await cluster.completeAt(cluster.nameC, p);

    const expectResident = (q: QueryResult): boolean =>
      Math.max(...rankHits(q, served.engine!)) >= RESIDENT_TOKENS && rankHits(q, cluster.nameC).filter((h) => h >= RESIDENT_TOKENS).length === 1;
    const [a, b] = await waitFor(
      async () => {
        const answers = await Promise.all([r1.query(p), r2.query(p)]);
        return expectResident(answers[0]) && expectResident(answers[1]) && JSON.stringify(answers[0]) === JSON.stringify(answers[1]) ? answers : null;
      },
      CONVERGE_MS,
      'both routers showing the prompt on the serving engine and on one rank of the DP engine, identically',
    );
    expect(a).to.deep.equal(b);
    expect(a.matches.map((m) => [m.instance_name, m.dp_rank])).to.deep.equal(
      [...a.matches].sort((x, y) => (x.instance_name < y.instance_name ? -1 : x.instance_name > y.instance_name ? 1 : x.dp_rank - y.dp_rank)).map((m) => [m.instance_name, m.dp_rank]),
    );
    expect(rankHits(a, cluster.nameC)).to.have.length(2);
    // routing.md: a multi-DP instance gets the minimum over its ranks, so C has no credit yet.
    expect(Math.min(...rankHits(a, cluster.nameC))).to.equal(0);
  });

  it('a prompt sent twice through the proxy lands on the same engine the second time with a non-zero hit', async () => {
    const p = prompt(2);
    const r1 = cluster.routers[0]!;
    const first = await r1.complete(p);
    expect(first.status).to.equal(200);
    expect(first.engine).to.be.a('string');
    expect(first.cachedTokens).to.equal(0);
    await waitFor(async () => Math.max(...rankHits(await r1.query(p), first.engine!)) >= RESIDENT_TOKENS, CONVERGE_MS, 'prompt resident in the router view');

    // A heartbeat sent while the first request was in flight may still be the engine's latest
    // load in the view; CAR rightly weighs that queue, so compare once every engine reads idle.
    const route = await waitFor(
      async () => {
        const r = await r1.route(p);
        return r.candidates.every((c) => c.queue_cost === 0) ? r : null;
      },
      CONVERGE_MS,
      'every candidate idle in the router view',
    );
    expect(route.prefill.name, JSON.stringify(route)).to.equal(first.engine);
    const credited = route.candidates.find((c) => c.instance_name === first.engine)!;
    expect(credited.hit_tokens).to.equal(RESIDENT_TOKENS);

    const second = await r1.complete(p);
    expect(second.status).to.equal(200);
    expect(second.engine).to.equal(first.engine);
    expect(second.cachedTokens).to.equal(RESIDENT_TOKENS);
  });

  it('killing the directory leaves routers serving by load with zero credit once the view is stale; a restarted directory brings credit back to the same routers', async () => {
    const p = prompt(3);
    const routers = cluster.routers;
    const first = await routers[0]!.complete(p);
    expect(first.status).to.equal(200);
    for (const r of routers) await waitFor(async () => Math.max(...rankHits(await r.query(p), first.engine!)) >= RESIDENT_TOKENS, CONVERGE_MS, `${r.proc.name}: prompt resident`);
    const routerPids = routers.map((r) => r.proc.pid);

    await cluster.directory.kill();
    for (const r of routers) {
      const stale = await waitFor(
        async () => {
          const q = await r.query(p);
          return q.matches.length > 0 && q.matches.every((m) => !m.synchronized && m.error === 'directory view stale') ? q : null;
        },
        CONVERGE_MS,
        `${r.proc.name}: stale view`,
      );
      expect(stale.matches.every((m) => m.device_hit_tokens === 0 && m.host_only_hit_tokens === 0)).to.equal(true);
      // Still routing, by load only: every candidate has zero credit.
      const route = await r.route(p);
      expect(route.candidates.every((c) => c.hit_tokens === 0 && c.kv_hit_ratio === 0)).to.equal(true);
      const served = await r.complete(p);
      expect(served.status).to.equal(200);
    }

    await cluster.startDirectory();
    for (const r of routers) {
      await waitFor(
        async () => {
          const q = await r.query(p);
          return allSynchronized(q) && Math.max(...rankHits(q, first.engine!)) >= RESIDENT_TOKENS;
        },
        CONVERGE_MS,
        `${r.proc.name}: credit back after the directory restart`,
      );
      // The streams can be back in the view a moment before their instances are schedulable
      // again (the restarted directory learns load from the next heartbeat); until then /v1/route
      // has no candidates to credit. Credit must come back within the same bound.
      let last: unknown = null;
      await waitFor(
        async () => {
          const route = await r.route(p);
          last = route;
          return Array.isArray(route.candidates) && route.candidates.some((c) => c.hit_tokens >= RESIDENT_TOKENS);
        },
        CONVERGE_MS,
        `${r.proc.name}: /v1/route credits the prompt after the directory restart`,
      ).catch((e: Error) => {
        throw new Error(`${e.message}; last answer: ${JSON.stringify(last)}`);
      });
    }
    expect(routers.map((r) => r.proc.pid)).to.deep.equal(routerPids);
    expect(routers.every((r) => r.proc.isRunning)).to.equal(true);
  });

  it('a router started after the others converges to the same view', async () => {
    const p = prompt(4);
    const r1 = cluster.routers[0]!;
    const served = await r1.complete(p);
    expect(served.status).to.equal(200);
    await cluster.completeAt(cluster.nameA, prompt(5));
    await waitFor(async () => Math.max(...rankHits(await r1.query(p), served.engine!)) >= RESIDENT_TOKENS, CONVERGE_MS, 'prompt resident in router-1');

    const late = await cluster.startRouter('router-3');
    for (const tokens of [p, prompt(5), []]) {
      const [a, b] = await waitFor(
        async () => {
          const answers = await Promise.all([r1.query(tokens), late.query(tokens)]);
          return JSON.stringify(answers[0]) === JSON.stringify(answers[1]) ? answers : null;
        },
        CONVERGE_MS,
        'router-3 answering like router-1',
      );
      expect(b).to.deep.equal(a);
    }
    const q = await late.query(p);
    expect(Math.max(...rankHits(q, served.engine!))).to.equal(RESIDENT_TOKENS);
    expect(Math.max(...rankHits(await late.query(prompt(5)), cluster.nameA))).to.equal(RESIDENT_TOKENS);
  });
});
