// routing.md "OpenAI-compatible proxy" against real parts: router-svc (in process) forwards to
// simulated engines' OpenAI endpoints; the engines register through a real etcd, heartbeat to a
// real directory-svc process and publish the prompts they admit as KV events over ZeroMQ, so CAR
// sees what the proxied requests left in the cache.
//
//   client ──HTTP──▶ router ──keep-alive HTTP, body unchanged──▶ SimEngine OpenAI endpoint
//                      ▲                                            │ admitPrompt → ZMQ events
//                      └──────────── WatchView ◀── directory-svc ◀──┘
import { expect } from 'chai';
import { parseRouterFlags } from '../../shared/config/router-flags.js';
import { silentLogger } from '../../shared/log/logger.js';
import { RouterService } from '../../router-svc/router-service.js';
import type { SimRequestEvent } from '../../tools/engine-sim/openai-server.js';
import { EtcdServer } from '../helpers/etcd-server.js';
import { waitFor } from '../helpers/ports.js';
import { DirectoryProcess, SimEngine, untilCandidates } from '../helpers/router-stack.js';

const NAMESPACE = 'router-proxy-test';
const INSTANCE_HEADER = 'x-kv-router-instance';
/** 4 blocks of 4 tokens (STACK_DISCOVERY block_size 4). */
const PROMPT = [101, 102, 103, 104, 201, 202, 203, 204, 301, 302, 303, 304, 401, 402, 403, 404];

describe('routing.md OpenAI-compatible proxy (router-svc to simulated engines)', function () {
  this.timeout(60000);
  let etcd: EtcdServer;
  let directory: DirectoryProcess;
  let routers: RouterService[] = [];
  let engines: SimEngine[] = [];
  let aborts: AbortController[] = [];

  before(async () => {
    etcd = await EtcdServer.start();
    directory = await DirectoryProcess.start({ etcdAddress: etcd.address, namespace: NAMESPACE });
  });
  after(async () => {
    await directory?.close();
    await etcd?.destroy();
  });
  afterEach(async () => {
    for (const a of aborts) a.abort();
    for (const r of routers) await r.close();
    for (const e of engines) await e.close();
    routers = [];
    engines = [];
    aborts = [];
  });

  async function startRouter(policy = 'CAR'): Promise<{ router: RouterService; url: string }> {
    const parsed = parseRouterFlags([`--directory_addr=${directory.address}`, `--load_balance_policy=${policy}`]);
    if (parsed.kind !== 'flags') throw new Error('unexpected --help');
    const router = await RouterService.start({ flags: parsed.flags, logger: silentLogger, host: '127.0.0.1', httpPort: 0 });
    routers.push(router);
    return { router, url: `http://127.0.0.1:${router.port}` };
  }

  async function startEngine(tokenIntervalMs = 1): Promise<SimEngine> {
    const e = await SimEngine.start({ etcdAddress: etcd.address, namespace: NAMESPACE, directoryHttpUrl: directory.httpUrl, tokenIntervalMs });
    engines.push(e);
    return e;
  }

  function nextRequest(engine: SimEngine): Promise<SimRequestEvent> {
    return new Promise((resolve) => engine.openai.once('request', resolve));
  }

  it('503 when no instance can take the request', async () => {
    const { router, url } = await startRouter();
    await untilCandidates(router.view, []);
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 2 }) });
    expect(res.status).to.equal(503);
    const body = (await res.json()) as { error: { message: string; type: string; code: number } };
    expect(body.error).to.include({ type: 'ServiceUnavailableError', code: 503 });
    expect(body.error.message).to.be.a('string').and.not.equal('');
  });

  it('forwards the body unchanged to http://<instance><same path> and passes the JSON answer back', async () => {
    const engine = await startEngine();
    const { router, url } = await startRouter();
    await untilCandidates(router.view, [engine.name]);
    // Odd spacing, key order and an unknown field: the engine must receive these exact bytes.
    const sent = `{ "model":"m1",  "prompt": [${PROMPT.join(', ')}], "max_tokens": 3, "x_vendor": {"keep": true} }`;
    const seen = nextRequest(engine);
    const res = await fetch(`${url}/v1/completions?trace=1`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: sent });
    expect(res.status).to.equal(200);
    expect(res.headers.get(INSTANCE_HEADER)).to.equal(engine.name);
    const answer = (await res.json()) as { object: string; model: string; choices: { text: string }[]; usage: { prompt_tokens: number } };
    expect(answer.object).to.equal('text_completion');
    expect(answer.model).to.equal('m1');
    expect(answer.usage.prompt_tokens).to.equal(PROMPT.length);
    const req = await seen;
    expect(req.path).to.equal('/v1/completions');
    expect(req.body.toString('utf8')).to.equal(sent);
  });

  it('CAR: a proxied token prompt becomes resident, and the same prompt is then routed to the engine holding it', async () => {
    const a = await startEngine();
    const b = await startEngine();
    const { router, url } = await startRouter('CAR');
    await untilCandidates(router.view, [a.name, b.name]);
    const first = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 2 }) });
    expect(first.status).to.equal(200);
    const holder = first.headers.get(INSTANCE_HEADER)!;
    expect([a.name, b.name]).to.include(holder);
    await first.arrayBuffer();
    await waitFor(() => router.view.query(PROMPT, Date.now()).matches.some((m) => m.instance_name === holder && m.device_hit_tokens === PROMPT.length), 15000, 'prompt resident in the view');

    for (let i = 0; i < 3; i++) {
      const again = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 2 }) });
      expect(again.headers.get(INSTANCE_HEADER)).to.equal(holder);
      const body = (await again.json()) as { usage: { prompt_tokens_details: { cached_tokens: number } } };
      expect(body.usage.prompt_tokens_details.cached_tokens).to.equal(PROMPT.length);
    }
  });

  it('chat completions (text) are routed by queue cost and answered by the engine', async () => {
    const engine = await startEngine();
    const { router, url } = await startRouter('CAR');
    await untilCandidates(router.view, [engine.name]);
    const res = await fetch(`${url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ model: 'm', messages: [{ role: 'user', content: 'hello there' }], max_tokens: 2 }),
    });
    expect(res.status).to.equal(200);
    const body = (await res.json()) as { object: string; choices: { message: { role: string } }[] };
    expect(body.object).to.equal('chat.completion');
    expect(body.choices[0]!.message.role).to.equal('assistant');
  });

  it('streaming: SSE chunks pass through as the engine writes them, ending with [DONE]', async () => {
    // 20 tokens, 50 ms apart: the first chunk reaches the client long before the engine finishes.
    const engine = await startEngine(50);
    const { router, url } = await startRouter();
    await untilCandidates(router.view, [engine.name]);
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 20, stream: true }) });
    expect(res.status).to.equal(200);
    expect(res.headers.get('content-type')).to.match(/^text\/event-stream/);
    const reader = res.body!.getReader();
    const first = await reader.read();
    expect(new TextDecoder().decode(first.value)).to.match(/^data: \{/);
    // Seen by the client while the engine is still generating: not buffered until the end.
    expect(engine.openai.completed).to.equal(0);
    let text = new TextDecoder().decode(first.value);
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      text += new TextDecoder().decode(value);
    }
    const events = text.split('\n\n').filter((e) => e !== '');
    expect(events).to.have.length(21);
    expect(events[20]).to.equal('data: [DONE]');
    for (const e of events.slice(0, 20)) expect((JSON.parse(e.slice('data: '.length)) as { object: string }).object).to.equal('text_completion');
    expect(engine.openai.completed).to.equal(1);
  });

  it('a client that disconnects cancels the upstream request: the simulator sees the abort', async () => {
    const engine = await startEngine(20);
    const { router, url } = await startRouter();
    await untilCandidates(router.view, [engine.name]);
    const abort = new AbortController();
    aborts.push(abort);
    const aborted = new Promise<SimRequestEvent>((resolve) => engine.openai.once('abort', resolve));
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 4000, stream: true }), signal: abort.signal });
    const reader = res.body!.getReader();
    await reader.read(); // the stream is flowing
    abort.abort();
    const event = await aborted;
    expect(event.stream).to.equal(true);
    expect(engine.openai.aborted).to.equal(1);
    expect(engine.openai.completed).to.equal(0);
    const metrics = await (await fetch(`${url}/metrics`)).text();
    expect(metrics).to.match(/router_proxy_requests_total\{path="\/v1\/completions",outcome="client_abort"\} 1/);
  });

  it('502 naming the instance when the chosen engine does not answer', async () => {
    const engine = await startEngine();
    const { router, url } = await startRouter();
    await untilCandidates(router.view, [engine.name]);
    // A crash: the HTTP port closes at once, the registration lives until its lease expires, so
    // the instance is still a candidate for a few seconds.
    await engine.control.kill();
    const res = await fetch(`${url}/v1/completions`, { method: 'POST', body: JSON.stringify({ prompt: PROMPT, max_tokens: 2 }) });
    expect(res.status).to.equal(502);
    const body = (await res.json()) as { error: { message: string; type: string } };
    expect(body.error.type).to.equal('BadGatewayError');
    expect(body.error.message).to.include(engine.name);
  });
});
