// routing.md "OpenAI-compatible proxy", pods that vanish (issue 30 item 6): the chosen engine
// refuses the connection or resets it before any byte of its answer (a pod that just died, before
// its health probe fails), so the router sends the request once to the decision's next-best
// candidate and counts it; never after a byte was relayed; a second failure is one 502 naming both.
//
//   router-svc (in process, CAR λ=1) ──POST──▶ HttpFaultProxy ×3 ──▶ SimProcess ×3 (vLLM kind)
//        ▲ WatchView                              ▲ GET /health, /metrics (always pass)
//   directory-svc --engines_file (urls = the proxies) ──SUB/DEALER──▶ the sims' ZeroMQ ports
//
// The directory's scrapes (GET) always pass the proxies; a refused port fails them too, but an
// instance turns SUSPECT only after two failed probes 5 s apart, long after the test's request:
// it stays a candidate meanwhile, as a just-died pod does.
// CAR with λ = 1 ranks by cache misses alone: each test's prompt is resident in full on `a` and
// half on `b`, so `a` is chosen and `b` is the next-best (over `c`, which holds none of it).
import { expect } from 'chai';
import { parseRouterFlags } from '../../shared/config/router-flags.js';
import { silentLogger } from '../../shared/log/logger.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { RouterService } from '../../router-svc/router-service.js';
import { FleetDirectory, SimProcess } from '../helpers/engines-fleet.js';
import { HttpFaultProxy } from '../helpers/http-fault-proxy.js';
import { freePort, waitFor } from '../helpers/ports.js';
import { untilCandidates } from '../helpers/router-stack.js';

const INSTANCE_HEADER = 'x-kv-router-instance';

describe('routing.md proxy: an engine that vanished before answering costs no request (real processes)', function () {
  this.timeout(180000);
  let dir: FleetDirectory;
  let router: RouterService;
  let url: string;
  const sims: SimProcess[] = [];
  const proxies: HttpFaultProxy[] = [];
  let promptBase = 1000;

  before(async () => {
    for (const name of ['a', 'b', 'c']) sims.push(await SimProcess.start(name, { args: ['--token_interval_ms=40'] }));
    for (const s of sims) proxies.push(await HttpFaultProxy.start(await freePort(), s.port));
    dir = await FleetDirectory.start(
      sims.map((s, i) => s.entry({ url: proxies[i]!.url })),
      { refreshIntervalMs: 5000 },
    );
    const parsed = parseRouterFlags([`--directory_addr=127.0.0.1:${dir.grpcPort}`, '--load_balance_policy=CAR', '--car_prefill_lambda=1']);
    if (parsed.kind !== 'flags') throw new Error('unexpected --help');
    router = await RouterService.start({ flags: parsed.flags, logger: silentLogger, host: '127.0.0.1', httpPort: 0 });
    url = `http://127.0.0.1:${router.port}`;
    await untilCandidates(router.view, ['a', 'b', 'c'], 60000);
  });

  after(async () => {
    await router?.close();
    for (const p of proxies) await p.close();
    await dir?.close();
    await stopAllProcesses();
  });

  afterEach(async () => {
    for (const p of proxies) await p.set('pass');
  });

  const [a, b] = [0, 1];

  /**
   * A fresh 16-token prompt (4 blocks) resident in full on `a` and its first 8 tokens on `b`, as
   * the router's view shows it. Sent straight to the engines (not through the proxies); resent
   * until credited, since a PUB drops what it sends before the directory's SUB has joined.
   */
  async function preparePrompt(): Promise<number[]> {
    const prompt = Array.from({ length: 16 }, (_, k) => promptBase + k);
    promptBase += 100;
    await waitFor(
      async () => {
        await sims[a]!.complete(prompt);
        await sims[b]!.complete(prompt.slice(0, 8));
        const hit = (name: string): number => {
          const m = router.view.query(prompt, Date.now()).matches.filter((x) => x.instance_name === name);
          return m.length > 0 ? Math.min(...m.map((x) => x.device_hit_tokens)) : -1;
        };
        return hit('a') === 16 && hit('b') === 8 && hit('c') === 0;
      },
      30000,
      'the prompt credited on a (16 tokens) and b (8 tokens)',
    );
    return prompt;
  }

  async function complete(prompt: readonly number[], extra: Record<string, unknown> = {}): Promise<Response> {
    return fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ model: 'm', prompt, max_tokens: 3, ...extra }) });
  }

  async function retries(reason: string): Promise<number> {
    const text = await router.metrics.registry.getSingleMetricAsString('router_upstream_retries_total');
    const m = new RegExp(`router_upstream_retries_total\\{reason="${reason}"\\} (\\d+)`).exec(text);
    return m === null ? -1 : Number(m[1]);
  }

  it('the chosen engine (a) is the one holding the prompt while nothing fails', async () => {
    const prompt = await preparePrompt();
    const res = await complete(prompt);
    expect(res.status).to.equal(200);
    expect(res.headers.get(INSTANCE_HEADER)).to.equal('a');
    await res.arrayBuffer();
  });

  it('a reset before any answer byte: sent once to the next-best (b), answered 200, counted reason="reset"', async () => {
    const prompt = await preparePrompt();
    const before = await retries('reset');
    await proxies[a]!.set('reset_before_answer');
    const aPosts = proxies[a]!.posts;
    const res = await complete(prompt);
    expect(res.status).to.equal(200);
    expect(res.headers.get(INSTANCE_HEADER)).to.equal('b');
    const body = (await res.json()) as { object: string };
    expect(body.object).to.equal('text_completion');
    expect(proxies[a]!.posts - aPosts, 'a was asked first, once').to.equal(1);
    expect(await retries('reset')).to.equal(before + 1);
  });

  it('a refused connection: sent once to the next-best (b), answered 200, counted reason="refused"', async () => {
    const prompt = await preparePrompt();
    const before = await retries('refused');
    const port = proxies[a]!.port;
    await proxies[a]!.refuse();
    try {
      const res = await complete(prompt);
      expect(res.status).to.equal(200);
      expect(res.headers.get(INSTANCE_HEADER)).to.equal('b');
      await res.arrayBuffer();
      expect(await retries('refused')).to.equal(before + 1);
    } finally {
      proxies[a] = await HttpFaultProxy.start(port, sims[a]!.port);
    }
  });

  it('a reset after the first answer bytes is not retried: the client sees its stream cut, no other engine is asked', async () => {
    const prompt = await preparePrompt();
    const total = (await retries('reset')) + (await retries('refused')) + (await retries('unreachable'));
    await proxies[a]!.set('reset_after_first_chunk');
    const others = proxies[b]!.posts + proxies[2]!.posts;
    const res = await complete(prompt, { stream: true, max_tokens: 50 });
    expect(res.status).to.equal(200);
    expect(res.headers.get(INSTANCE_HEADER)).to.equal('a');
    let cut: unknown = null;
    try {
      await res.text();
    } catch (e) {
      cut = e;
    }
    expect(cut, 'reading the cut stream fails').to.be.instanceOf(Error);
    expect((await retries('reset')) + (await retries('refused')) + (await retries('unreachable'))).to.equal(total);
    expect(proxies[b]!.posts + proxies[2]!.posts, 'b and c were never asked').to.equal(others);
    const metrics = await router.metrics.registry.getSingleMetricAsString('router_proxy_requests_total');
    expect(metrics).to.match(/router_proxy_requests_total\{path="\/v1\/completions",outcome="upstream_error"\} [1-9]/);
  });

  it('a second failure before any answer byte answers 502 naming both instances (one retry, not two)', async () => {
    const prompt = await preparePrompt();
    const before = await retries('reset');
    await proxies[a]!.set('reset_before_answer');
    await proxies[b]!.set('reset_before_answer');
    await proxies[2]!.set('pass');
    const cPosts = proxies[2]!.posts;
    const res = await complete(prompt);
    expect(res.status).to.equal(502);
    const text = await res.text();
    expect(text).to.include('upstream a failed').and.include('upstream b failed');
    expect(await retries('reset')).to.equal(before + 1);
    expect(proxies[2]!.posts, 'c was never asked').to.equal(cPosts);
  });
});
