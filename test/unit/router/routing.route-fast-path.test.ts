/**
 * routing.md `POST /v1/route` on the raw node:http fast path (route-fast-path.ts) answers exactly
 * what the Koa app answers: the same status line, headers (in order, Date aside) and body, for
 * every kind of outcome. `POST /v1/route` takes the fast path; `POST /v1/route?via=koa` is the
 * same endpoint through Koa (the fast path takes only the exact request line). Real sockets, a
 * real ViewCache with the CAR policy; a: holds the prompt's first two blocks, b: busier and nothing
 * cached, so no decision is tied and repeated requests get the same answer.
 */
import { expect } from 'chai';
import { request } from 'node:http';
import { RouteDecider } from '../../../router-svc/http/route-decider.js';
import { ROUTE_PATH, RouterHttpServer } from '../../../router-svc/http/router-http-server.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import { createPolicy } from '../../../router-svc/policy/create-policy.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { apply, blockKeys, DEVICE, residency, snapshot, tokens, wireInstance, wireLoad, wireStream } from './view-fixtures.js';

const FLAGS = { loadBalancePolicy: 'CAR', carPrefillLambda: 0.5, carHostHitWeight: 0.5, targetTtftMs: null, targetTpotMs: null } as const;
const MAX_BODY_BYTES = 4096;
const KOA_ROUTE_PATH = `${ROUTE_PATH}?via=koa`;

interface RawAnswer {
  readonly statusLine: string;
  /** Header name/value pairs as sent, Date left out (it is the clock's). */
  readonly headers: string[];
  readonly body: string;
}

function post(port: number, path: string, body: Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method: 'POST', headers: { 'content-type': 'application/json', 'content-length': body.length } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (d: Buffer) => chunks.push(d));
      res.on('end', () => {
        const headerPairs: string[] = [];
        for (let i = 0; i < res.rawHeaders.length; i += 2) {
          if (res.rawHeaders[i]!.toLowerCase() !== 'date') headerPairs.push(`${res.rawHeaders[i]}: ${res.rawHeaders[i + 1]}`);
        }
        resolve({ statusLine: `${res.statusCode} ${res.statusMessage}`, headers: headerPairs, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('routing.md POST /v1/route: the fast path answers what the Koa route answers', () => {
  let server: RouterHttpServer;
  let empty: RouterHttpServer;
  let metrics: RouterMetrics;
  let prompt: number[];

  before(async () => {
    prompt = tokens(12);
    const keys = await blockKeys(prompt);
    const view = new ViewCache({ staleAfterMs: 600_000 });
    await apply(
      view,
      snapshot('e1', 1, [wireInstance('a:1', { load: wireLoad(1) }), wireInstance('b:1', { load: wireLoad(3) })], [
        wireStream(1, 'a:1', { ...residency(keys.slice(0, 2), [DEVICE, DEVICE]), device_blocks: '2' }),
        wireStream(2, 'b:1'),
      ]),
      Date.now(),
    );
    metrics = new RouterMetrics(() => ({ version: 1, lagMs: 0, staleForMs: 0 }));
    const decider = new RouteDecider(createPolicy(FLAGS), view, metrics, 'CAR');
    server = await RouterHttpServer.start({ port: 0, host: '127.0.0.1', view, decider, proxy: null, metrics, internalApiToken: '', maxBodyBytes: MAX_BODY_BYTES });
    const emptyView = new ViewCache({ staleAfterMs: 600_000 });
    await apply(emptyView, snapshot('e2', 1, [], []), Date.now());
    const emptyMetrics = new RouterMetrics(() => ({ version: 1, lagMs: 0, staleForMs: 0 }));
    const emptyDecider = new RouteDecider(createPolicy(FLAGS), emptyView, emptyMetrics, 'CAR');
    empty = await RouterHttpServer.start({ port: 0, host: '127.0.0.1', view: emptyView, decider: emptyDecider, proxy: null, metrics: emptyMetrics, internalApiToken: '' });
  });

  after(async () => {
    await server.close();
    await empty.close();
  });

  async function expectSameAnswer(port: number, body: Buffer, status: number): Promise<RawAnswer> {
    const fast = await post(port, ROUTE_PATH, body);
    const koa = await post(port, KOA_ROUTE_PATH, body);
    expect(fast.statusLine.startsWith(`${status} `), fast.statusLine).to.equal(true);
    expect(fast).to.deep.equal(koa);
    return fast;
  }

  it('200: token_ids, prompt_tokens alone, dry_run, a text prompt and messages (no tokenizer: estimated, with the reason)', async () => {
    const answer = await expectSameAnswer(server.port, Buffer.from(JSON.stringify({ token_ids: prompt })), 200);
    expect(answer.headers).to.include('Content-Type: application/json; charset=utf-8');
    const decision = JSON.parse(answer.body) as { prefill: { name: string }; candidates: { instance_name: string; hit_tokens: number }[] };
    expect(decision.prefill.name).to.equal('a:1');
    expect(decision.candidates.find((c) => c.instance_name === 'a:1')?.hit_tokens).to.equal(8);
    await expectSameAnswer(server.port, Buffer.from(JSON.stringify({ prompt_tokens: 100 })), 200);
    await expectSameAnswer(server.port, Buffer.from(JSON.stringify({ token_ids: prompt, dry_run: true })), 200);
    await expectSameAnswer(server.port, Buffer.from(JSON.stringify({ prompt: 'hello there' })), 200);
    const chat = await expectSameAnswer(server.port, Buffer.from(JSON.stringify({ messages: [{ role: 'user', content: 'héllo ☃' }] })), 200);
    expect(JSON.parse(chat.body)).to.have.property('reason');
  });

  it('400 naming the field: malformed JSON, an empty body, a bad token id, a non-boolean dry_run, two prompt forms, a non-object', async () => {
    for (const body of ['{"token_ids":[1,2', '', '{"token_ids":[1,-2]}', '{"token_ids":[1],"dry_run":"yes"}', '{"token_ids":[1],"prompt":"x"}', '[1,2]', '\xff\xfe']) {
      await expectSameAnswer(server.port, Buffer.from(body, 'latin1'), 400);
    }
  });

  it('413 with Connection: close for a body over the limit', async () => {
    const big = Buffer.alloc(MAX_BODY_BYTES + 1, 0x20);
    const answer = await expectSameAnswer(server.port, big, 413);
    expect(answer.headers).to.include('Connection: close');
  });

  it('503 with the reason when the view holds no candidate', async () => {
    const answer = await expectSameAnswer(empty.port, Buffer.from(JSON.stringify({ token_ids: prompt })), 503);
    expect((JSON.parse(answer.body) as { error: { message: unknown } }).error.message).to.be.a('string');
  });

  it('every decision on the fast path is counted once in router_decisions_total', async () => {
    const count = async (): Promise<number> => {
      const text = await metrics.registry.metrics();
      const line = text.split('\n').find((l) => l.startsWith('router_decisions_total{') && l.includes('outcome="ok"'));
      return line === undefined ? 0 : Number(line.slice(line.lastIndexOf(' ') + 1));
    };
    const before = await count();
    for (let i = 0; i < 3; i++) await post(server.port, ROUTE_PATH, Buffer.from(JSON.stringify({ token_ids: prompt })));
    expect((await count()) - before).to.equal(3);
  });

  it('other methods and path spellings still go to Koa: GET is 405, a trailing path segment 404', async () => {
    const get = await fetch(`http://127.0.0.1:${server.port}${ROUTE_PATH}`);
    expect(get.status).to.equal(405);
    expect(await get.json()).to.deep.equal({ error: { message: 'method not allowed', type: 'MethodNotAllowedError', param: null, code: 405 } });
    const other = await post(server.port, `${ROUTE_PATH}/x`, Buffer.from('{}'));
    expect(other.statusLine).to.equal('404 Not Found');
  });
});
