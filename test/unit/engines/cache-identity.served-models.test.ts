// cache-identity §1 for engines-file engines: the `models` pin's validation, the `/v1/models`
// parser on vLLM's and SGLang's real answers, the keep-last-good / log-once rules, the instance
// table's handling of lists (pins, scrapes, replacement), and one EngineScraper against a real
// HTTP server on loopback that answers /health, /metrics and /v1/models as vLLM does.
//
//   EngineScraper ──GET /health, /metrics, /v1/models──▶ node:http server (this file)
//        └──putEngine / engineModels / engineLoad / engineHealth──▶ recording sink
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { expect } from 'chai';
import { isConfigError } from '../../../shared/config/config-error.js';
import { InstanceTable, type InstanceChange } from '../../../directory-svc/discovery/instance-table.js';
import { parseEnginesFile, sameEngineEntry, type EngineEntry } from '../../../directory-svc/engines/engines-file.js';
import { EngineScraper, type EngineInstanceSink } from '../../../directory-svc/engines/engine-scraper.js';
import { parseServedModels, ServedModelsError, ServedModelsState, type ServedModelsOutcome } from '../../../directory-svc/engines/served-models-scrape.js';
import { toWireViewInstance } from '../../../directory-svc/view/view-wire.js';
import type { ServedModel } from '../../../shared/view/served-models.js';
import { waitFor } from '../../helpers/ports.js';
import { vllmModelCard } from '../../helpers/vllm-model-list.js';

const ENTRY = { name: 'vllm-0', url: 'http://127.0.0.1:8000', kind: 'vllm', event_endpoint: 'tcp://127.0.0.1:5557', block_size: 16 };

function entry(over: Record<string, unknown> = {}): EngineEntry {
  return parseEnginesFile(JSON.stringify({ engines: [{ ...ENTRY, ...over }] })).engines[0]!;
}

function fileError(over: Record<string, unknown>): string {
  try {
    entry(over);
  } catch (e) {
    if (isConfigError(e)) return e.message;
    throw e;
  }
  throw new Error('expected a ConfigError');
}

const base = (name: string): ServedModel => ({ name, parent: null });
const lora = (name: string, parent: string): ServedModel => ({ name, parent });

const vllmCard = vllmModelCard;

const VLLM_MODELS = {
  object: 'list',
  data: [
    vllmCard('meta-llama/Llama-3.1-8B-Instruct', '/models/Llama-3.1-8B-Instruct', null, 131072),
    vllmCard('sql-lora', '/adapters/sql-lora', 'meta-llama/Llama-3.1-8B-Instruct', null),
  ],
};

// SGLang's ModelCard (no parent field at all for its base model).
const SGLANG_MODELS = { object: 'list', data: [{ id: 'Qwen/Qwen3-8B', object: 'model', created: 1733398000, owned_by: 'sglang', root: 'Qwen/Qwen3-8B', max_model_len: 40960 }] };

describe('cache-identity §1 served models of engines-file engines', () => {
  describe('the engines file `models` pin', () => {
    it('CI5 a pin is the base model first, its adapters after; without one the list is scraped (null)', () => {
      expect(entry({ models: ['llama-3.1-8b', 'sql-lora', 'chat-lora'] }).models).to.deep.equal([base('llama-3.1-8b'), lora('sql-lora', 'llama-3.1-8b'), lora('chat-lora', 'llama-3.1-8b')]);
      expect(entry({ models: ['qwen3'] }).models).to.deep.equal([base('qwen3')]);
      expect(entry().models).to.equal(null);
    });

    const bad: [string, unknown, string][] = [
      ['a string', 'llama', 'engines[0].models: expected an array of model names (the base model first, then its adapters), got "llama"'],
      ['null', null, 'engines[0].models: expected an array of model names (the base model first, then its adapters), got null'],
      ['an object', { base: 'llama' }, 'engines[0].models: expected an array of model names (the base model first, then its adapters), got an object'],
      ['an empty array', [], 'engines[0].models: expected at least one model name (the base model), got []'],
      ['an empty name', ['llama', ''], 'engines[0].models[1]: expected a non-empty string, got ""'],
      ['a number', [7], 'engines[0].models[0]: expected a non-empty string, got 7'],
      ['a nested array', [['llama']], 'engines[0].models[0]: expected a non-empty string, got an array'],
      ['a name twice', ['llama', 'sql-lora', 'sql-lora'], 'engines[0].models[2]: "sql-lora" is listed twice'],
      ['a control character', ['llama\n'], 'engines[0].models[0]: expected no control characters, got "llama\\n"'],
      ['a name over 1024 characters', ['x'.repeat(1025)], 'engines[0].models[0]: expected at most 1024 characters, got 1025'],
    ];
    for (const [what, models, message] of bad) {
      it(`CI5 rejects ${what} naming engines[i].models`, () => {
        expect(fileError({ models })).to.equal(message);
      });
    }

    it('CI5 a reload with the same pin (a new array) changes nothing; another pin is a change', () => {
      expect(sameEngineEntry(entry({ models: ['a', 'b'] }), entry({ models: ['a', 'b'] }))).to.equal(true);
      expect(sameEngineEntry(entry({ models: ['a', 'b'] }), entry({ models: ['a', 'c'] }))).to.equal(false);
      expect(sameEngineEntry(entry({ models: ['a'] }), entry())).to.equal(false);
      expect(sameEngineEntry(entry(), entry())).to.equal(true);
    });
  });

  describe('GET /v1/models parsing', () => {
    it("CI6 vLLM's list: base models (parent null) and adapters (parent set); root, max_model_len and permission are ignored", () => {
      expect(parseServedModels(JSON.stringify(VLLM_MODELS))).to.deep.equal([base('meta-llama/Llama-3.1-8B-Instruct'), lora('sql-lora', 'meta-llama/Llama-3.1-8B-Instruct')]);
    });

    it("CI6 vLLM lists one base per --served-model-name alias, adapters of the first; SGLang's cards have no parent field", () => {
      const aliases = { object: 'list', data: [vllmCard('llama', '/m', null, 8192), vllmCard('llama-8b', '/m', null, 8192), vllmCard('sql', '/a', 'llama', null)] };
      expect(parseServedModels(JSON.stringify(aliases))).to.deep.equal([base('llama'), base('llama-8b'), lora('sql', 'llama')]);
      expect(parseServedModels(JSON.stringify(SGLANG_MODELS))).to.deep.equal([base('Qwen/Qwen3-8B')]);
      // `object` is optional; a repeated id keeps its first entry.
      expect(parseServedModels('{"data":[{"id":"a"},{"id":"a","parent":"b"}]}')).to.deep.equal([base('a')]);
    });

    const malformed: [string, string, string][] = [
      ['not JSON', '<html>502 Bad Gateway</html>', 'models: not JSON'],
      ['a bare array', '[{"id":"a"}]', 'models: expected {"object": "list", "data": [...]}, got no JSON object'],
      ['an error object', '{"object":"error","message":"boom","type":"InternalServerError","code":500}', 'models: object: expected "list", got "error"'],
      ['no data', '{"object":"list"}', 'models: data: expected an array of models'],
      ['data not an array', '{"object":"list","data":{}}', 'models: data: expected an array of models'],
      ['an empty list', '{"object":"list","data":[]}', 'models: data: lists no model'],
      ['a card that is not an object', '{"object":"list","data":["a"]}', 'models: data[0]: expected a model object'],
      ['a card without id', '{"object":"list","data":[{"object":"model"}]}', 'models: data[0].id: expected a non-empty string, got nothing'],
      ['an empty id', '{"object":"list","data":[{"id":"a"},{"id":""}]}', 'models: data[1].id: expected a non-empty string, got ""'],
      ['a parent that is not a string', '{"object":"list","data":[{"id":"a","parent":3}]}', 'models: data[0].parent: expected a non-empty string, got 3'],
    ];
    for (const [what, body, message] of malformed) {
      it(`CI6 a malformed body (${what}) is a models error naming what is wrong`, () => {
        expect(() => parseServedModels(body)).to.throw(ServedModelsError).with.property('message').that.satisfies((m: string) => m.startsWith(message));
      });
    }
  });

  describe('keep the last good list, log each error once', () => {
    it('CI6 unknown before the first good scrape; a failure keeps the last good list; an unchanged list is no change', () => {
      const s = new ServedModelsState();
      expect(s.list).to.equal(null);
      expect(s.failed('models: GET /v1/models answered 404')).to.deep.equal({ kind: 'failed', firstOfItsKind: true });
      expect(s.list).to.equal(null);
      const one = [base('llama')];
      expect(s.good(one)).to.deep.equal({ kind: 'good', changed: true, recovered: true });
      expect(s.good([base('llama')])).to.deep.equal({ kind: 'good', changed: false, recovered: false });
      expect(s.failed('models: not JSON')).to.deep.equal({ kind: 'failed', firstOfItsKind: true });
      expect(s.list).to.equal(one);
      expect(s.good([base('llama'), lora('sql', 'llama')])).to.deep.include({ changed: true, recovered: true });
    });

    it('CI6 each distinct error is logged once per failure episode; a good scrape ends the episode', () => {
      const s = new ServedModelsState();
      const first = (d: string): boolean => {
        const o = s.failed(d);
        return o.kind === 'failed' && o.firstOfItsKind;
      };
      expect([first('a'), first('a'), first('b'), first('a'), first('b')]).to.deep.equal([true, false, true, false, false]);
      s.good([base('m')]);
      expect([first('a'), first('a')]).to.deep.equal([true, false]);
    });
  });

  describe('the instance table', () => {
    const table = (): InstanceTable => new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
    const kinds = (cs: readonly InstanceChange[]): string[] => cs.map((c) => c.kind);

    it('CI6 a scraped list enters as an upsert; the same list again publishes nothing; a new adapter publishes again', () => {
      const t = table();
      t.putEngine(entry(), '1.7e+09', 0);
      expect(t.get('vllm-0')!.models).to.equal(null);
      const changes = t.engineModels('vllm-0', [base('llama')]);
      expect(kinds(changes)).to.deep.equal(['upsert']);
      expect(changes[0]!.instance.models).to.deep.equal([base('llama')]);
      expect(t.engineModels('vllm-0', [base('llama')])).to.deep.equal([]);
      expect(kinds(t.engineModels('vllm-0', [base('llama'), lora('sql', 'llama')]))).to.deep.equal(['upsert']);
      expect(kinds(t.engineModels('vllm-0', [base('llama')]))).to.deep.equal(['upsert']);
      expect(t.engineModels('nope', [base('llama')])).to.deep.equal([]);
    });

    it('CI5 a pinned list is the instance list and a scraped one never overrides it; a pin removed leaves it unknown', () => {
      const t = table();
      t.putEngine(entry({ models: ['llama', 'sql'] }), null, 0);
      expect(t.get('vllm-0')!.models).to.deep.equal([base('llama'), lora('sql', 'llama')]);
      expect(t.engineModels('vllm-0', [base('qwen')])).to.deep.equal([]);
      expect(kinds(t.putEngine(entry({ models: ['llama'] }), null, 1).changes)).to.deep.equal(['upsert']);
      expect(t.get('vllm-0')!.models).to.deep.equal([base('llama')]);
      const unpinned = t.putEngine(entry(), null, 2).changes;
      expect(kinds(unpinned)).to.deep.equal(['upsert']);
      expect(unpinned[0]!.instance.models).to.equal(null);
      expect(kinds(t.engineModels('vllm-0', [base('qwen')]))).to.deep.equal(['upsert']);
    });

    it('CI6 a replacement (new process) keeps the last scraped list until its own /v1/models answers; a pinned replacement takes the pin', () => {
      const t = table();
      t.putEngine(entry(), 'a', 0);
      t.engineModels('vllm-0', [base('llama'), lora('sql', 'llama')]);
      const res = t.putEngine(entry(), 'b', 1);
      expect(kinds(res.changes)).to.deep.equal(['replace']);
      expect(res.changes[0]!.instance.models).to.deep.equal([base('llama'), lora('sql', 'llama')]);
      expect(t.putEngine(entry({ models: ['qwen'] }), 'c', 2).changes[0]!.instance.models).to.deep.equal([base('qwen')]);
    });

    it('CI6 the view carries the list and the source: unknown as an unset message, parents as "" for base models', () => {
      const t = table();
      t.putEngine(entry(), null, 0);
      expect(toWireViewInstance(t.get('vllm-0')!)).to.deep.include({ models: null, source: 'engines_file' });
      t.engineModels('vllm-0', [base('llama'), lora('sql', 'llama')]);
      expect(toWireViewInstance(t.get('vllm-0')!).models).to.deep.equal({ data: [{ name: 'llama', parent: '' }, { name: 'sql', parent: 'llama' }] });
    });
  });

  describe('EngineScraper against a real HTTP engine', () => {
    /** What the fake engine answers; the test changes it between scrapes. */
    let health = 200;
    let startTime = '1.7e+09';
    let modelsBody = '';
    let modelsStatus = 200;
    let modelsRequests = 0;
    let server: Server | null = null;
    let scraper: EngineScraper | null = null;
    let calls: string[];
    let reports: ServedModelsOutcome[];

    const metricsText = (): string =>
      `# HELP process_start_time_seconds Start time of the process since unix epoch in seconds.\n# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds ${startTime}\n` +
      '# HELP vllm:num_requests_waiting Number of requests waiting to be processed.\n# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{engine="0",model_name="llama"} 0.0\n';

    beforeEach(async () => {
      health = 200;
      startTime = '1.7e+09';
      modelsBody = JSON.stringify({ object: 'list', data: [vllmCard('llama', '/m', null, 8192)] });
      modelsStatus = 200;
      modelsRequests = 0;
      calls = [];
      reports = [];
      server = createServer((req, res) => {
        if (req.url === '/health') {
          res.writeHead(health).end();
        } else if (req.url === '/metrics') {
          res.writeHead(200, { 'content-type': 'text/plain; version=0.0.4; charset=utf-8' }).end(metricsText());
        } else if (req.url === '/v1/models') {
          modelsRequests++;
          res.writeHead(modelsStatus, { 'content-type': 'application/json' }).end(modelsBody);
        } else {
          res.writeHead(404).end();
        }
      });
      await new Promise<void>((resolve) => server!.listen(0, '127.0.0.1', resolve));
    });

    afterEach(async () => {
      await scraper?.close();
      scraper = null;
      await new Promise<void>((resolve) => server!.close(() => resolve()));
    });

    const names = (ms: readonly ServedModel[]): string => ms.map((m) => (m.parent === null ? m.name : `${m.name}<${m.parent}`)).join(',');

    function startScraper(over: Record<string, unknown> = {}): EngineScraper {
      const url = `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
      const sink: EngineInstanceSink = {
        putEngine: (_e, identity) => {
          calls.push(`put ${identity}`);
          return null;
        },
        engineLoad: (_n, load) => void calls.push(load === null ? 'load null' : 'load'),
        engineHealth: (_n, healthy) => void calls.push(`health ${healthy}`),
        engineModels: (_n, models) => void calls.push(`models ${names(models)}`),
      };
      // Both timers far out: every tick and models scrape here is one the test starts.
      scraper = new EngineScraper(entry({ url, ...over }), sink, {
        refreshIntervalMs: 600_000,
        modelsRefreshMs: 600_000,
        failedProbesToSuspect: 2,
        requestTimeoutMs: 2000,
        nowMs: () => 0,
        report: () => undefined,
        modelsReport: (_n, outcome) => void reports.push(outcome),
      });
      return scraper;
    }

    it('CI6 the first admission carries the list read in the same tick: put, then models, then load', async () => {
      const s = startScraper();
      await s.tick();
      expect(calls).to.deep.equal(['put 1.7e+09', 'models llama', 'load', 'health true']);
      expect(modelsRequests).to.equal(1);
      expect(s.scrapedModels).to.deep.equal([base('llama')]);
    });

    it('CI6 an adapter loaded at run time is published by the next models scrape, and its unload too', async () => {
      const s = startScraper();
      await s.tick();
      calls.length = 0;
      modelsBody = JSON.stringify({ object: 'list', data: [vllmCard('llama', '/m', null, 8192), vllmCard('sql-lora', '/a', 'llama', null)] });
      await s.scrapeModels();
      expect(calls).to.deep.equal(['models llama,sql-lora<llama']);
      await s.scrapeModels();
      expect(calls).to.have.length(1); // unchanged: nothing published
      modelsBody = JSON.stringify({ object: 'list', data: [vllmCard('llama', '/m', null, 8192)] });
      await s.scrapeModels();
      expect(calls.at(-1)).to.equal('models llama');
    });

    it('CI6 a failed or malformed scrape keeps the last good list; each distinct error is reported as new once', async () => {
      const s = startScraper();
      await s.tick();
      calls.length = 0;
      modelsBody = '{"object":"list","data":[]}';
      await s.scrapeModels();
      await s.scrapeModels();
      modelsStatus = 503;
      modelsBody = '{"object":"error"}';
      await s.scrapeModels();
      expect(calls).to.deep.equal([]);
      expect(s.scrapedModels).to.deep.equal([base('llama')]);
      expect(reports.slice(1)).to.deep.equal([
        { kind: 'failed', firstOfItsKind: true },
        { kind: 'failed', firstOfItsKind: false },
        { kind: 'failed', firstOfItsKind: true },
      ]);
      modelsStatus = 200;
      modelsBody = JSON.stringify(VLLM_MODELS);
      await s.scrapeModels();
      expect(reports.at(-1)).to.deep.equal({ kind: 'good', changed: true, recovered: true });
      expect(calls).to.deep.equal(['models meta-llama/Llama-3.1-8B-Instruct,sql-lora<meta-llama/Llama-3.1-8B-Instruct']);
    });

    it('CI6 an engine that does not serve /v1/models (404) keeps an unknown list, told once and not counted as a failure', async () => {
      modelsStatus = 404;
      modelsBody = '{"detail":"Not Found"}';
      const s = startScraper();
      await s.tick();
      expect(calls).to.deep.equal(['put 1.7e+09', 'load', 'health true']);
      await s.scrapeModels();
      expect(reports).to.deep.equal([
        { kind: 'not_served', firstOfItsKind: true },
        { kind: 'not_served', firstOfItsKind: false },
      ]);
      expect(s.scrapedModels).to.equal(null);
      modelsStatus = 200;
      modelsBody = JSON.stringify(VLLM_MODELS);
      await s.scrapeModels();
      expect(reports.at(-1)).to.deep.equal({ kind: 'good', changed: true, recovered: false });
    });

    it('CI6 before the first good scrape the list is unknown: the instance is admitted without one, and a /v1/models failure of an engine that is not up is not reported', async () => {
      modelsStatus = 500;
      modelsBody = '{"detail":"Internal Server Error"}';
      health = 503;
      const s = startScraper();
      await s.tick();
      expect(reports).to.deep.equal([]); // down: its health says so, not a models error
      health = 200;
      await s.tick();
      expect(calls).to.deep.equal(['put 1.7e+09', 'load', 'health true']);
      expect(reports).to.deep.equal([{ kind: 'failed', firstOfItsKind: true }]);
      expect(s.scrapedModels).to.equal(null);
    });

    it('CI6 a replacement and a return from SUSPECT read /v1/models at once', async () => {
      const s = startScraper();
      await s.tick();
      expect(modelsRequests).to.equal(1);
      startTime = '1.8e+09'; // a new process behind the address
      await s.tick();
      await waitFor(() => modelsRequests === 2, 5000, 'a models scrape after the replacement');
      health = 500;
      await s.tick();
      await s.tick();
      expect(calls.at(-1)).to.equal('health false');
      health = 200;
      await s.tick();
      await waitFor(() => modelsRequests === 3, 5000, 'a models scrape after SUSPECT');
    });

    it('CI5 a pin added forgets the scraped list; removing it reads /v1/models at once and never republishes the old list', async () => {
      const s = startScraper();
      await s.tick();
      const url = `http://127.0.0.1:${(server!.address() as AddressInfo).port}`;
      s.update(entry({ url, models: ['pinned'] }));
      expect(s.scrapedModels).to.equal(null);
      modelsBody = JSON.stringify({ object: 'list', data: [vllmCard('qwen', '/q', null, 8192)] });
      calls.length = 0;
      const before = modelsRequests;
      s.update(entry({ url }));
      await waitFor(() => calls.includes('models qwen'), 5000, 'the list read after the pin went');
      expect(modelsRequests).to.equal(before + 1);
      expect(calls.filter((c) => c.startsWith('models'))).to.deep.equal(['models qwen']);
    });

    it('CI5 a pinned engine is never scraped', async () => {
      const s = startScraper({ models: ['llama', 'sql'] });
      await s.tick();
      await s.scrapeModels();
      expect(modelsRequests).to.equal(0);
      expect(calls.filter((c) => c.startsWith('models'))).to.deep.equal([]);
    });
  });
});
