/**
 * TT10 (docs/concepts.md "Routing by predicted time to first token", issue 27) across real processes: two router-svc processes
 * with `--load_balance_policy=TTFT` watching one directory-svc process, which discovers two
 * simulated engines through a real etcd. The engines run the prefill cost model (1 ms per
 * uncached token), so a long prompt really waits in an engine's queue.
 *
 *   SimEngine X, Y ──etcd/heartbeat/ZMQ──▶ directory-svc ◀──ReportInflight── router 1, router 2
 *                                                └────────WatchView─────────▶ (both)
 *
 * Each engine heartbeats once (X waiting 0, Y waiting 2) and then not for the test's length, so
 * both routers read the same stale queues. Router 1 proxies a 3,000-token prompt: it goes to X
 * (Y's two waiting requests are worth 3,000 tokens each to a router that has sent nothing yet).
 * Router 2, which never saw that request, hears of it through the directory (router 1's prefill
 * ledger: one request, 3,000 tokens, until its first token), and sends the next short request to
 * Y: 3,000 tokens queued on X against two short waiting requests on Y. CAR, counting requests,
 * would send it to X (1 in flight < 2 waiting).
 * Waits poll a condition; nothing asserts a duration.
 */
import { expect } from 'chai';
import { waitFor } from '../helpers/ports.js';
import { RouterProcess, RouterTestStack, type SimEngine } from '../helpers/router-stack.js';

const NAMESPACE = 'router-ttft-test';
const LONG = Array.from({ length: 3000 }, (_, i) => 100_000 + i);
const SHORT = Array.from({ length: 16 }, (_, i) => 900_000 + i);

interface Candidate {
  instance_name: string;
  role: string;
  predicted_ms: number;
  queued_tokens: number;
  worked_off_tokens: number;
  own_prefill_tokens: number;
  waiting_reported: number;
  waiting_inflight_other: number;
  ledger_requests_other: number;
  ledger_tokens_other: number;
}
interface RouteAnswer {
  policy: string;
  prefill: { name: string };
  candidates: Candidate[];
}

async function route(url: string, tokenIds: number[]): Promise<RouteAnswer> {
  const res = await fetch(`${url}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ token_ids: tokenIds, dry_run: true }) });
  expect(res.status).to.equal(200);
  return (await res.json()) as RouteAnswer;
}

/** A proxied completion of `tokenIds` (one token, so its answer marks its first token); resolves with the serving instance. */
async function complete(url: string, tokenIds: number[]): Promise<string> {
  const res = await fetch(`${url}/v1/completions`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ prompt: tokenIds, max_tokens: 1 }) });
  const text = await res.text();
  expect(res.status, text).to.equal(200);
  return res.headers.get('x-kv-router-instance') ?? '';
}

describe('TT10 TTFT policy: two router processes, a long prompt queued on one engine steers the next short request to the other', function () {
  this.timeout(90000);
  let stack: RouterTestStack;
  const engines: SimEngine[] = [];
  const routers: RouterProcess[] = [];

  before(async () => {
    stack = await RouterTestStack.start(NAMESPACE);
    const prefill = { baseUs: 1000, usPerToken: 1000, hostUsPerToken: 250, concurrency: 1 };
    engines.push(...(await stack.startQuietEngines([0, 2].map((waiting) => ({ waiting, prefill })))));
    const args = ['--load_balance_policy=TTFT', '--ttft_prefill_tokens_per_s=1000', '--log_level=warn'];
    routers.push(
      ...(await stack.spawnRouters(
        2,
        args,
        async (r) => {
          const res = await route(r.url, SHORT).catch(() => null);
          return res !== null && res.candidates.filter((c) => c.role === 'prefill' && c.waiting_reported === (c.instance_name === engines[1]!.name ? 2 : 0)).length === 2;
        },
        'router sees both engines with their reported queues',
      )),
    );
  });

  after(async () => {
    for (const r of routers) await r.stop();
    for (const e of engines) await e.close();
    await stack?.close();
  });

  it('TT10 router 2 learns of router 1\'s long prompt with its prefill tokens and sends the short request to the other engine', async () => {
    const [r1, r2] = routers as [RouterProcess, RouterProcess];
    const [x, y] = [engines[0]!.name, engines[1]!.name];
    const long = complete(r1.url, LONG);
    // Router 2 hears of it through the directory: router 1's prefill ledger holds one request of
    // 3,000 prefill tokens on X (until its first token, whatever load reports come meanwhile).
    const seen = await waitFor(
      async () => {
        const c = (await route(r2.url, SHORT)).candidates.find((k) => k.instance_name === x)!;
        return c.ledger_requests_other === 1 ? c : null;
      },
      10000,
      "router 2's view carries router 1's long prompt on X",
    );
    expect(seen).to.include({ ledger_tokens_other: 3000, waiting_inflight_other: 1 });
    // Its head and its age came with it: X has been prefilling it since router 1 sent it (at the
    // prior's 1 token per ms, a few ms' worth by now), and that much is no longer queued.
    expect(seen.worked_off_tokens).to.be.within(0, 1000);
    expect(seen.queued_tokens).to.be.closeTo(3000 - seen.worked_off_tokens, 1e-6);
    const short = await complete(r2.url, SHORT);
    expect(short).to.equal(y);
    // The long prompt was queued on X all along (it is still being prefilled when the short one is answered).
    expect(await long).to.equal(x);
  });

  it("TT7 first tokens seen by the proxy feed each router's metrics and throughput estimate", async () => {
    const [r1] = routers as [RouterProcess, RouterProcess];
    const text = await (await fetch(`${r1.url}/metrics`)).text();
    expect(text).to.match(/router_first_token_seconds_count\{policy="TTFT"\} [1-9]/);
    expect(text).to.match(new RegExp(`router_ttft_prefill_throughput_tokens_per_second\\{instance="${engines[0]!.name.replace(/\./g, '\\.')}"\\} \\d`));
    expect(text).to.match(/router_ttft_prediction_ratio_count [1-9]/);
  });
});
