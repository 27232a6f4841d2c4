// routing.md "HTTP API" against real parts: router-svc (in process, the same RouterService main
// runs, or the real process for main's own behaviour) watching a real directory-svc process that
// discovers simulated engines through a real etcd and subscribes to their ZeroMQ events.
//
//   SimEngine ──etcd/heartbeat/ZMQ──▶ directory-svc ──WatchView──▶ [TcpProxy] ──▶ router ◀── HTTP (this test)
//                                    └──────── gRPC Query (compared with the router's query) ◀── this test
import { expect } from 'chai';
import { request as httpRequest } from 'node:http';
import { parseRouterFlags, type RouterFlags } from '../../shared/config/router-flags.js';
import { silentLogger } from '../../shared/log/logger.js';
import { RouterService } from '../../router-svc/router-service.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { DirectoryQueryClient, RouterProcess, RouterTestStack, spawnService, untilCandidates, type SimEngine, type WireQueryAnswer } from '../helpers/router-stack.js';
import type { ServiceProcess } from '../../shared/process/service-process.js';
import { TcpProxy } from '../helpers/tcp-proxy.js';

const NAMESPACE = 'router-http-test';
/** 3 blocks of 4 tokens (STACK_DISCOVERY block_size 4) plus a partial block. */
const PROMPT = [11, 12, 13, 14, 21, 22, 23, 24, 31, 32, 33, 34, 41];

interface Answer {
  status: number;
  body: any; // `any`: loosely typed response JSON read by tests
  text: string;
  headers: Headers;
}

async function call(url: string, init: { method?: string; body?: string | Buffer; headers?: Record<string, string> } = {}): Promise<Answer> {
  const res = await fetch(url, {
    method: init.method ?? (init.body === undefined ? 'GET' : 'POST'),
    body: init.body,
    headers: { 'content-type': 'application/json', ...(init.headers ?? {}) },
  });
  const text = await res.text();
  let body: unknown = null;
  try {
    body = JSON.parse(text);
  } catch {
    body = null;
  }
  return { status: res.status, body, text, headers: res.headers };
}

/** A body sent chunked, without Content-Length: the limit must hold while it streams. */
function postChunked(url: string, chunk: Buffer, times: number): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const req = httpRequest(url, { method: 'POST', headers: { 'content-type': 'application/json' } }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text }));
    });
    req.on('error', reject);
    let i = 0;
    const pump = (): void => {
      while (i < times) {
        i++;
        if (!req.write(chunk)) {
          req.once('drain', pump);
          return;
        }
      }
      req.end();
    };
    pump();
  });
}

function flagsOf(args: string[]): RouterFlags {
  const parsed = parseRouterFlags(args);
  if (parsed.kind !== 'flags') throw new Error('unexpected --help');
  return parsed.flags;
}

/** The gRPC answer with int64 `sequence` as the number the HTTP JSON carries. */
function normalizeGrpc(a: WireQueryAnswer): unknown {
  return { input_tokens: a.input_tokens, block_size: a.block_size, matches: a.matches.map((m) => ({ ...m, sequence: Number(m.sequence) })) };
}

describe('routing.md HTTP API (router-svc against directory-svc, etcd and simulated engines)', function () {
  this.timeout(60000);
  let stack: RouterTestStack;
  let directory: RouterTestStack['directory'];
  let routers: RouterService[] = [];
  let engines: SimEngine[] = [];
  let proxies: TcpProxy[] = [];
  let procs: ServiceProcess[] = [];
  let grpcClients: DirectoryQueryClient[] = [];

  before(async () => {
    stack = await RouterTestStack.start(NAMESPACE);
    directory = stack.directory;
  });
  after(async () => {
    await stack?.close();
  });
  afterEach(async () => {
    for (const r of routers) await r.close();
    for (const e of engines) await e.close();
    for (const p of proxies) await p.down();
    for (const p of procs) await p.kill();
    for (const c of grpcClients) c.close();
    routers = [];
    engines = [];
    proxies = [];
    procs = [];
    grpcClients = [];
  });

  async function startRouter(extra: string[] = [], directoryAddr = directory.address): Promise<{ router: RouterService; url: string }> {
    const router = await RouterService.start({
      flags: flagsOf([`--directory_addr=${directoryAddr}`, ...extra]),
      logger: silentLogger,
      host: '127.0.0.1',
      httpPort: 0,
    });
    routers.push(router);
    return { router, url: `http://127.0.0.1:${router.port}` };
  }

  async function startEngine(waiting = 0): Promise<SimEngine> {
    const e = await stack.startEngine({ waiting });
    engines.push(e);
    return e;
  }

  it('503 with the reason when the view holds no candidate (routing.md "Candidates")', async () => {
    const { router, url } = await startRouter(['--load_balance_policy=CAR']);
    await untilCandidates(router.view, []);
    const r = await call(`${url}/v1/route`, { body: JSON.stringify({ token_ids: PROMPT }) });
    expect(r.status).to.equal(503);
    expect(r.body.error).to.include({ type: 'ServiceUnavailableError', code: 503, param: null });
    expect(r.body.error.message).to.be.a('string').and.not.equal('');
    expect(r.text).to.not.match(/\n\s+at /); // no stack trace
    const rr = await call(`${url}/v1/route`, { body: JSON.stringify({ prompt_tokens: 10 }) });
    expect(rr.status).to.equal(503);
  });

  it('400 names the field in the OpenAI error object: malformed JSON, token_ids type and range, prompt_tokens', async () => {
    const { url } = await startRouter();
    const cases: { path: string; body: string; field: RegExp; param: string | null }[] = [
      { path: '/v1/internal/kv-cache/query', body: '{"token_ids": [1, 2', field: /JSON/, param: null },
      { path: '/v1/internal/kv-cache/query', body: '[1,2,3]', field: /JSON object/, param: null },
      { path: '/v1/internal/kv-cache/query', body: '{}', field: /token_ids/, param: 'token_ids' },
      { path: '/v1/internal/kv-cache/query', body: '{"token_ids": "1 2 3"}', field: /token_ids/, param: 'token_ids' },
      { path: '/v1/internal/kv-cache/query', body: '{"token_ids": [1, -1]}', field: /token_ids\[1\]/, param: 'token_ids' },
      { path: '/v1/internal/kv-cache/query', body: '{"token_ids": [2147483648]}', field: /token_ids\[0\]/, param: 'token_ids' },
      { path: '/v1/internal/kv-cache/query', body: '{"token_ids": [1.5]}', field: /token_ids\[0\]/, param: 'token_ids' },
      { path: '/v1/route', body: '{}', field: /^token_ids, prompt, messages or prompt_tokens is required$/, param: 'token_ids' },
      { path: '/v1/route', body: '{"token_ids": {"0": 1}}', field: /token_ids/, param: 'token_ids' },
      { path: '/v1/route', body: '{"prompt_tokens": -3}', field: /prompt_tokens/, param: 'prompt_tokens' },
      { path: '/v1/route', body: '{"prompt_tokens": "12"}', field: /prompt_tokens/, param: 'prompt_tokens' },
      { path: '/v1/completions', body: '{"prompt": 42}', field: /prompt/, param: 'prompt' },
      { path: '/v1/chat/completions', body: '{"messages": "hi"}', field: /messages/, param: 'messages' },
    ];
    for (const c of cases) {
      const r = await call(`${url}${c.path}`, { body: c.body });
      expect(r.status, `${c.path} ${c.body}`).to.equal(400);
      expect(Object.keys(r.body as object), c.body).to.deep.equal(['error']);
      expect(r.body.error, c.body).to.include({ type: 'BadRequestError', code: 400, param: c.param });
      expect(r.body.error.message, c.body).to.match(c.field);
    }
  });

  it('unknown paths answer 404 and wrong methods 405, both as OpenAI error objects', async () => {
    const { url } = await startRouter();
    const missing = await call(`${url}/v1/nothing`, { body: '{}' });
    expect(missing.status).to.equal(404);
    expect(missing.body).to.deep.equal({ error: { message: 'not found', type: 'NotFoundError', param: null, code: 404 } });
    const wrongMethod = await call(`${url}/v1/route`);
    expect(wrongMethod.status).to.equal(405);
    expect(wrongMethod.body.error).to.include({ message: 'method not allowed', code: 405 });
  });

  it('401 on internal endpoints without the right X-Internal-Token when --internal_api_token is set', async () => {
    const { url } = await startRouter(['--internal_api_token=s3cret']);
    const body = JSON.stringify({ token_ids: PROMPT });
    const missing = await call(`${url}/v1/internal/kv-cache/query`, { body });
    expect(missing.status).to.equal(401);
    expect(missing.body).to.deep.equal({ error: { message: 'invalid internal token', type: 'AuthenticationError', param: null, code: 401 } });
    const wrong = await call(`${url}/v1/internal/kv-cache/query`, { body, headers: { 'x-internal-token': 's3cre' } });
    expect(wrong.status).to.equal(401);
    expect(wrong.text).to.not.include('s3cre');
    const right = await call(`${url}/v1/internal/kv-cache/query`, { body, headers: { 'x-internal-token': 's3cret' } });
    expect(right.status).to.equal(200);
    expect(right.body.input_tokens).to.equal(PROMPT.length);
  });

  it('413 for a body over 8 MiB, declared or streamed without Content-Length', async () => {
    const { url } = await startRouter();
    const big = Buffer.alloc(8 * 1024 * 1024 + 1, 0x20);
    const declared = await call(`${url}/v1/internal/kv-cache/query`, { body: big });
    expect(declared.status).to.equal(413);
    expect(declared.body.error).to.include({ type: 'RequestTooLargeError', code: 413 });
    const streamed = await postChunked(`${url}/v1/route`, Buffer.alloc(64 * 1024, 0x20), 129);
    expect(streamed.status).to.equal(413);
    // Exactly 8 MiB is still read (and then fails as JSON, not as size).
    const atLimit = await call(`${url}/v1/route`, { body: Buffer.alloc(8 * 1024 * 1024, 0x20) });
    expect(atLimit.status).to.equal(400);
  });

  it('431 as an OpenAI error object for request headers over 16 KiB, and the router keeps answering', async () => {
    const { url } = await startRouter();
    const huge = await call(`${url}/health`, { headers: { 'x-padding': 'a'.repeat(20 * 1024) } });
    expect(huge.status).to.equal(431);
    expect(huge.body).to.deep.equal({ error: { message: 'request headers too large', type: 'RequestHeaderFieldsTooLargeError', param: null, code: 431 } });
    expect((await call(`${url}/health`)).status).to.equal(200);
  });

  it('query JSON is identical to the directory gRPC Query for the same tokens, and empty token_ids gives state only', async () => {
    const engine = await startEngine();
    const { router, url } = await startRouter();
    await untilCandidates(router.view, [engine.name]);
    await engine.sim.admitPrompt(PROMPT);
    const grpc = new DirectoryQueryClient(directory.address);
    grpcClients.push(grpc);
    // The view is an asynchronous copy: wait until both sides show the prompt's 3 blocks.
    let httpAnswer: Answer | null = null;
    let grpcAnswer: unknown = null;
    await waitFor(
      async () => {
        grpcAnswer = normalizeGrpc(await grpc.query(PROMPT));
        httpAnswer = await call(`${url}/v1/internal/kv-cache/query`, { body: JSON.stringify({ token_ids: PROMPT }) });
        const mine = (httpAnswer.body as WireQueryAnswer).matches.find((m) => m.instance_name === engine.name);
        return mine?.device_hit_tokens === 12 && JSON.stringify(httpAnswer.body) === JSON.stringify(grpcAnswer);
      },
      15000,
      'router query equal to the directory Query with 12 hit tokens',
    );
    expect(httpAnswer!.status).to.equal(200);
    expect(httpAnswer!.body).to.deep.equal(grpcAnswer);
    const mine = (httpAnswer!.body as WireQueryAnswer).matches.find((m) => m.instance_name === engine.name)!;
    expect(mine).to.include({ synchronized: true, device_hit_tokens: 12, reusable_prefix_tokens: 12, device_blocks: 3, error: '' });

    const empty = await call(`${url}/v1/internal/kv-cache/query`, { body: '{"token_ids": []}' });
    expect(empty.status).to.equal(200);
    expect(empty.body).to.deep.equal(normalizeGrpc(await grpc.query([])));
    const state = (empty.body as WireQueryAnswer).matches.find((m) => m.instance_name === engine.name)!;
    expect(state).to.include({ device_hit_tokens: 0, device_blocks: 3, synchronized: true });
  });

  it('/v1/route: CAR picks the instance holding the prefix and explains every candidate', async () => {
    const holder = await startEngine();
    const other = await startEngine();
    const { router, url } = await startRouter(['--load_balance_policy=CAR']);
    await untilCandidates(router.view, [holder.name, other.name]);
    await holder.sim.admitPrompt(PROMPT);
    await waitFor(() => router.view.query(PROMPT, Date.now()).matches.some((m) => m.instance_name === holder.name && m.device_hit_tokens === 12), 15000, 'holder hits in the view');

    const r = await call(`${url}/v1/route`, { body: JSON.stringify({ token_ids: PROMPT }) });
    expect(r.status).to.equal(200);
    expect(r.body.policy).to.equal('CAR');
    expect(r.body.prefill.name).to.equal(holder.name);
    expect(r.body.prefill.incarnation_id).to.equal(holder.control.incarnationId);
    const byName = new Map<string, Record<string, unknown>>((r.body.candidates as Record<string, unknown>[]).map((c) => [c['instance_name'] as string, c]));
    expect(byName.get(holder.name)).to.include({ hit_tokens: 12, kv_hit_ratio: 12 / PROMPT.length });
    expect(byName.get(other.name)).to.include({ hit_tokens: 0, kv_hit_ratio: 0 });
    for (const c of byName.values()) expect(c).to.include.all.keys('instance_name', 'incarnation_id', 'role', 'hit_tokens', 'device_hit_tokens', 'host_only_hit_tokens', 'kv_hit_ratio', 'queue_cost', 'score');

    // A token count alone: routed by queue cost, no hits.
    const byCount = await call(`${url}/v1/route`, { body: JSON.stringify({ prompt_tokens: 13 }) });
    expect(byCount.status).to.equal(200);
    for (const c of byCount.body.candidates as { hit_tokens: number }[]) expect(c.hit_tokens).to.equal(0);

    const metrics = await call(`${url}/metrics`);
    expect(metrics.status).to.equal(200);
    expect(metrics.text).to.match(/router_decisions_total\{policy="CAR",outcome="ok"\} 2/);
    expect(metrics.text).to.include('router_decision_kv_hit_ratio_bucket');
    expect(metrics.text).to.include('router_decision_latency_seconds_bucket');
    expect(metrics.text).to.match(/router_view_version \d+/);
    expect(metrics.text).to.match(/router_view_stale_seconds 0/);
    expect(metrics.text).to.include('router_view_lag_seconds');
  });

  it('/ready answers 200 while the view is fresh and 503 once it is stale; /health stays 200', async () => {
    const tcp = new TcpProxy(await freePort(), directory.grpcPort);
    proxies.push(tcp);
    await tcp.up();
    const { url } = await startRouter(['--view_stale_after_ms=300'], tcp.address);
    expect((await call(`${url}/ready`)).status).to.equal(200);
    expect((await call(`${url}/health`)).status).to.equal(200);

    await tcp.down(); // the directory vanishes: no heartbeats reach the router
    const stale = await waitFor(async () => {
      const r = await call(`${url}/ready`);
      return r.status === 503 ? r : null;
    }, 15000, '/ready 503');
    expect(stale.body.ready).to.equal(false);
    expect(stale.body.error).to.be.a('string').and.not.equal('');
    expect((await call(`${url}/health`)).status).to.equal(200);
    const metrics = await call(`${url}/metrics`);
    expect(metrics.text).to.not.match(/router_view_stale_seconds 0\n/);

    await tcp.up();
    await waitFor(async () => (await call(`${url}/ready`)).status === 200, 20000, '/ready 200 again');
  });

  describe('main.ts (the real router-svc process)', () => {
    it('--help prints the flags and exits 0; a bad flag exits 2 with one line naming it', async () => {
      const help = spawnService('router-svc', 'router-svc/main.ts', ['--help']);
      procs.push(help);
      expect((await help.waitForExit()).code).to.equal(0);
      expect(logOf(help)).to.include('--load_balance_policy');
      const bad = spawnService('router-svc', 'router-svc/main.ts', ['--load_balance_policy=FASTEST']);
      procs.push(bad);
      expect((await bad.waitForExit()).code).to.equal(2);
      expect(bad.output).to.have.length(1);
      expect(logOf(bad)).to.include('--load_balance_policy');
    });

    it('SIGTERM while still waiting for the first view stops it with exit 0', async () => {
      const { proc: router } = await RouterProcess.spawn(`127.0.0.1:${await freePort()}`);
      procs.push(router);
      await waitFor(() => logOf(router).includes('waiting for the first view snapshot'), 20000, 'router waiting for the view');
      expect((await router.stop()).code).to.equal(0);
      expect(logOf(router)).to.include('"msg":"stopped"');
    });

    it('the port opens only once the first view snapshot is applied; SIGTERM stops it with exit 0', async () => {
      const tcp = new TcpProxy(await freePort(), directory.grpcPort); // down: the directory is unreachable
      proxies.push(tcp);
      const { proc: router, url: routerUrl } = await RouterProcess.spawn(tcp.address, ['--log_level=info']);
      procs.push(router);
      await waitFor(() => logOf(router).includes('waiting for the first view snapshot'), 20000, 'router waiting for the view');
      const refused = await fetch(`${routerUrl}/health`).then(
        () => false,
        () => true,
      );
      expect(refused, 'port open before the view').to.equal(true);

      // The directory stays unreachable across several retries: the process must keep waiting.
      await waitFor(() => logOf(router).split('view: stream lost').length > 3, 20000, 'three failed watches');
      expect(router.isRunning, 'router still running').to.equal(true);
      await tcp.up();
      await waitFor(
        async () => {
          if (!router.isRunning) throw new Error(`router exited while waiting:\n${logOf(router)}`);
          return (await fetch(`${routerUrl}/ready`).catch(() => null))?.status === 200;
        },
        30000,
        'router ready',
      ).catch((e: Error) => {
        throw new Error(`${e.message}; router log:\n${logOf(router)}`);
      });
      expect(logOf(router)).to.include('router-svc ready');
      // routing.md: an empty view (no streams) warns once at startup, never more.
      expect(logOf(router).split('no cache credit').length - 1).to.be.at.most(1);
      for (const line of router.output) expect(() => JSON.parse(line), line).to.not.throw();

      expect((await router.stop()).code).to.equal(0);
    });
  });
});

/** Everything the process printed, one line each. */
function logOf(proc: ServiceProcess): string {
  return proc.output.join('\n');
}
