// cache-identity §1 end to end over real processes: an engines-file engine's served models, read
// from its GET /v1/models, reach ListInstances and a router's view; an adapter loaded at run time
// appears within one models period and leaves when unloaded (CI6, directory half); the directory's
// Query follows the lists (CI5). The engine simulator does not serve /v1/models yet, so the engine
// the directory scrapes is a real HTTP server in this file that answers /v1/models with vLLM's
// exact JSON and passes /health and /metrics through to the simulator behind it:
//
//   directory-svc --engines_file ──GET /v1/models──▶ ModelsFront (this file, vLLM's ModelList)
//        │ ▲                      ──GET /health, /metrics──▶ ModelsFront ──▶ SimProcess (vLLM kind)
//        │ └──SUB / DEALER (ZeroMQ)──────────────────────────────────────────▶ SimProcess
//        └──gRPC: ListInstances, Query (test), WatchView ──▶ ViewClient (the router's view code)
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import type * as grpc from '@grpc/grpc-js';
import { ViewClient } from '../../router-svc/viewcache/view-client.js';
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { FleetDirectory, SimProcess } from '../helpers/engines-fleet.js';
import { waitFor } from '../helpers/ports.js';
import { vllmModelList } from '../helpers/vllm-model-list.js';

const TOKENS = [1, 2, 3, 4, 5, 6, 7, 8];
const MODELS_PERIOD_MS = 1000;
const BASE = 'meta-llama/Llama-3.1-8B-Instruct';

/** The engine's OpenAI front: /v1/models from `adapters` (or `raw`), the rest passed to the simulator. */
class ModelsFront {
  adapters: string[] = [];
  /** Set: answered instead of the model list (a malformed or failing engine). */
  raw: { status: number; body: string } | null = null;
  modelsRequests = 0;

  private constructor(private readonly server: Server) {}

  static async start(simPort: number): Promise<ModelsFront> {
    let front: ModelsFront | null = null;
    const server = createServer((req, res) => {
      if (req.url === '/v1/models') {
        front!.modelsRequests++;
        const answer = front!.raw ?? { status: 200, body: JSON.stringify(vllmModelList(BASE, front!.adapters)) };
        res.writeHead(answer.status, { 'content-type': 'application/json' }).end(answer.body);
        return;
      }
      const upstream = request({ host: '127.0.0.1', port: simPort, path: req.url, method: req.method, headers: req.headers }, (up) => {
        res.writeHead(up.statusCode ?? 502, up.headers);
        up.pipe(res);
      });
      upstream.on('error', () => res.writeHead(502).end());
      req.pipe(upstream);
    });
    front = new ModelsFront(server);
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    return front;
  }

  get url(): string {
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}`;
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

describe('cache-identity §1 served models over real processes (engines file)', function () {
  this.timeout(120000);
  let dir: FleetDirectory | null = null;
  let front: ModelsFront | null = null;
  let view: ViewClient | null = null;

  afterEach(async () => {
    await view?.close();
    view = null;
    await dir?.close();
    dir = null;
    await front?.close();
    front = null;
    await stopAllProcesses();
  });

  /** The router's view of `name`'s models, as `name` / `name<parent` (null = unknown or absent). */
  function viewModels(name: string): string[] | null {
    const models = view!.cache.instance(name)?.models;
    return models == null ? null : models.map((m) => (m.parent === null ? m.name : `${m.name}<${m.parent}`));
  }

  async function queryRows(model: string): Promise<string[] | { code: number; details: string }> {
    try {
      return (await dir!.query(TOKENS, { model })).matches.map((m) => `${m.instance_name}:${m.device_hit_tokens}`);
    } catch (e) {
      const err = e as grpc.ServiceError;
      return { code: err.code, details: err.details };
    }
  }

  it('CI6 an engine\'s /v1/models reaches ListInstances and a router\'s view; an adapter loaded at run time appears within one models period and leaves when unloaded', async () => {
    const a = await SimProcess.start('vllm-a');
    front = await ModelsFront.start(a.port);
    dir = await FleetDirectory.start([a.entry({ url: front.url })], { args: [`--engines_models_refresh_ms=${MODELS_PERIOD_MS}`] });
    view = ViewClient.start({ directoryAddrs: [{ host: '127.0.0.1', port: dir.grpcPort }], routerId: 'test-router', staleAfterMs: 5000 });

    // Admitted with its list: ListInstances and the router's view agree, with the source.
    await waitFor(async () => (await dir!.instance('vllm-a'))?.state === 'ACTIVE', 30000, 'vllm-a ACTIVE');
    expect(await dir.models('vllm-a')).to.deep.equal([BASE]);
    expect((await dir.instance('vllm-a'))!.source).to.equal('engines_file');
    await waitFor(() => viewModels('vllm-a')?.join() === BASE, 20000, "the base model in the router's view");
    expect(view.cache.instance('vllm-a')!.source).to.equal('engines_file');

    // Credit for the base model's requests; NOT_FOUND for a model no instance lists.
    await waitFor(async () => (await a.complete(TOKENS)).ok && (await queryRows(BASE)).toString() === 'vllm-a:8', 30000, 'credited under the base model');
    expect(await queryRows('sql-lora')).to.deep.equal({ code: 5, details: 'The model `sql-lora` does not exist.' });

    // The models timer is its own: about one /v1/models per period, not one per 100 ms health tick.
    const before = front.modelsRequests;
    await new Promise((r) => setTimeout(r, 3 * MODELS_PERIOD_MS));
    expect(front.modelsRequests - before).to.be.within(1, 5);

    // Loaded at run time: within one period (plus a loaded machine's slack) in both places.
    front.adapters = ['sql-lora'];
    const loadedAt = performance.now();
    await waitFor(async () => (await dir!.models('vllm-a'))?.join() === `${BASE},sql-lora<${BASE}`, MODELS_PERIOD_MS + 4000, 'the adapter in ListInstances within one period');
    await waitFor(() => viewModels('vllm-a')?.join() === `${BASE},sql-lora<${BASE}`, 5000, "the adapter in the router's view");
    expect(performance.now() - loadedAt).to.be.below(MODELS_PERIOD_MS + 5000);
    // An adapter's query is keyed as its LoRA chain: the base blocks give it nothing.
    expect(await queryRows('sql-lora')).to.deep.equal(['vllm-a:0']);

    // Unloaded: gone again, and its requests no longer find an instance.
    front.adapters = [];
    await waitFor(async () => (await dir!.models('vllm-a'))?.join() === BASE, MODELS_PERIOD_MS + 4000, 'the adapter gone from ListInstances');
    await waitFor(() => viewModels('vllm-a')?.join() === BASE, 5000, "the adapter gone from the router's view");
    expect(await queryRows('sql-lora')).to.deep.equal({ code: 5, details: 'The model `sql-lora` does not exist.' });
  });

  it('CI6 a malformed or failing /v1/models keeps the last good list, is counted per engine and logged once per distinct error', async () => {
    const a = await SimProcess.start('vllm-a');
    front = await ModelsFront.start(a.port);
    front.adapters = ['sql-lora'];
    dir = await FleetDirectory.start([a.entry({ url: front.url })], { args: [`--engines_models_refresh_ms=${MODELS_PERIOD_MS}`] });
    await waitFor(async () => (await dir!.models('vllm-a'))?.length === 2, 30000, 'the list scraped');

    front.raw = { status: 200, body: '{"object":"list","data":[]}' };
    const errors = (): number => Number(/^kv_engines_models_errors_total\{instance="vllm-a"\} (\d+)$/m.exec(lastMetrics)?.[1] ?? '0');
    let lastMetrics = '';
    await waitFor(async () => {
      lastMetrics = await dir!.metricsText();
      return errors() >= 3;
    }, 20000, 'three failed scrapes counted');
    front.raw = { status: 500, body: '{"object":"error","message":"EngineCore died","type":"InternalServerError","param":null,"code":500}' };
    const counted = errors();
    await waitFor(async () => {
      lastMetrics = await dir!.metricsText();
      return errors() >= counted + 2;
    }, 20000, 'the 500s counted too');
    expect(await dir.models('vllm-a')).to.deep.equal([BASE, `sql-lora<${BASE}`]);
    const logged = dir.proc.logLines.filter((l) => l['msg'] === 'engine served-models scrape failed; the last good list stays (unknown before the first)');
    const logs = logged.map((l) => String(l['err']));
    // A scrape a loaded machine let time out is a distinct error of its own (logged once too); it
    // failed one clean CI run as a third line. The two this test provokes, in order, each once.
    expect(logs.filter((e) => e !== 'models: GET /v1/models failed: timed out')).to.deep.equal(['models: data: lists no model', 'models: GET /v1/models answered 500']);
    expect(new Set(logs).size).to.equal(logs.length);

    front.raw = null;
    front.adapters = [];
    await waitFor(async () => (await dir!.models('vllm-a'))?.join() === BASE, 20000, 'a good scrape again');
    await dir.proc.waitForLog((l) => l['msg'] === 'engine /v1/models answers again', 5000, 'recovery logged');
  });

  it('CI5 a pinned list is served as pinned and never scraped; removing the pin reads /v1/models', async () => {
    const a = await SimProcess.start('vllm-a');
    front = await ModelsFront.start(a.port);
    dir = await FleetDirectory.start([a.entry({ url: front.url, models: ['llama-pinned', 'pinned-lora'] })], { args: [`--engines_models_refresh_ms=${MODELS_PERIOD_MS}`] });
    await waitFor(async () => (await dir!.instance('vllm-a'))?.state === 'ACTIVE', 30000, 'vllm-a ACTIVE');
    expect(await dir.models('vllm-a')).to.deep.equal(['llama-pinned', 'pinned-lora<llama-pinned']);
    await new Promise((r) => setTimeout(r, 2 * MODELS_PERIOD_MS));
    expect(front.modelsRequests).to.equal(0);

    dir.writeEngines([a.entry({ url: front.url })]);
    await waitFor(async () => (await dir!.models('vllm-a'))?.join() === BASE, 20000, 'the scraped list after the pin is removed');
  });
});
