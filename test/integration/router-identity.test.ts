// cache-identity §2 and §5 through the official `openai` client against a real router-svc process
// proxying to simulated engines' OpenAI endpoints. The view comes from a scripted KvDirectory
// (real gRPC): it pins each engine's served models (the directory fills them from etcd, engines
// files and /v1/models on another branch) and holds, per engine, the blocks of the chat the test
// sends, so a credited prefix proves the router tokenized with that model's own tokenizer.
//
//   openai client ──HTTP──▶ router-svc (--models_file: qwen3 → Qwen3, llama → Llama 3.1, CAR)
//                              │ ▲ WatchView: snapshot with models + residency
//                              │ └────────── ScriptedDirectory (this test)
//                              └──proxied, body unchanged──▶ OpenAiServer "qwen3 + sql-lora" | OpenAiServer "llama"
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import OpenAI from 'openai';
import { keyIdentity, PLAIN_IDENTITY } from '../../shared/keys/cache-identity.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { OpenAiEndpoint, OpenAiServer, type SimRequestEvent } from '../../tools/engine-sim/openai-server.js';
import { chatTokenIds } from '../helpers/chat-token-ids.js';
import { raised } from '../helpers/openai-errors.js';
import { RouterProcess, spawnService } from '../helpers/router-stack.js';
import { ScriptedDirectory, send } from '../helpers/scripted-directory.js';
import { blockKeys, DEVICE, residency, served, snapshot, wireInstance, wireLoad, wireStream } from '../unit/router/view-fixtures.js';

const QWEN_DIR = bundledQwen3TokenizerDir();
const LLAMA_DIR = bundledLlama31TokenizerDir();
const INSTANCE_HEADER = 'x-kv-router-instance';
const MESSAGES = [
  { role: 'system' as const, content: 'You answer in one word.' },
  { role: 'user' as const, content: 'Which engine holds this conversation in its cache?' },
];

function chatIds(dir: string): Promise<number[]> {
  return chatTokenIds(dir, MESSAGES);
}

interface RouteAnswer {
  prefill: { name: string };
  input_tokens: number;
  token_source: string;
  candidates: { instance_name: string; role: string; hit_tokens: number }[];
  identity: { model: string | null; lora_name: string | null; salted: boolean };
}

describe('cache-identity §2, §5 through the openai client (router-svc process, simulated engines)', function () {
  this.timeout(120000);
  let tmp: string;
  let directory: ScriptedDirectory;
  let qwenEngine: OpenAiServer;
  let llamaEngine: OpenAiServer;
  let router: RouterProcess;
  let client: OpenAI;
  let qwenIds: number[];
  let llamaIds: number[];
  const seen: Record<string, SimRequestEvent[]> = {};

  const nameOf = (s: OpenAiServer): string => `127.0.0.1:${s.port}`;

  before(async () => {
    tmp = mkdtempSync(join(tmpdir(), 'router-identity-'));
    [qwenIds, llamaIds] = [await chatIds(QWEN_DIR), await chatIds(LLAMA_DIR)];
    const engine = async (model: string): Promise<OpenAiServer> => {
      const endpoint = new OpenAiEndpoint({ engine: null, model, tokenIntervalMs: 1 });
      const server = await OpenAiServer.listen({ port: 0, endpoint });
      seen[`127.0.0.1:${server.port}`] = [];
      endpoint.on('request', (e: SimRequestEvent) => seen[`127.0.0.1:${server.port}`]!.push(e));
      return server;
    };
    qwenEngine = await engine('qwen3');
    llamaEngine = await engine('llama');
    const q = nameOf(qwenEngine);
    const l = nameOf(llamaEngine);
    // Each engine holds the chat's blocks as its own model computed them (block_size 4): qwen3's
    // base chain and its sql-lora chain on q, llama's on l. The other model's ids would match nothing.
    const qKeys = [...(await blockKeys(qwenIds, 4, 1024, PLAIN_IDENTITY)), ...(await blockKeys(qwenIds, 4, 1024, keyIdentity('sql-lora', null)))];
    const lKeys = await blockKeys(llamaIds, 4, 1024, PLAIN_IDENTITY);
    directory = await ScriptedDirectory.start();
    const view = snapshot(
      'e1',
      1,
      [wireInstance(q, { models: served('qwen3', 'sql-lora'), load: wireLoad(0) }), wireInstance(l, { models: served('llama'), load: wireLoad(0) })],
      [
        wireStream(1, q, { ...residency(qKeys, qKeys.map(() => DEVICE)), device_blocks: String(qKeys.length) }),
        wireStream(2, l, { ...residency(lKeys, lKeys.map(() => DEVICE)), device_blocks: String(lKeys.length) }),
      ],
    );
    // Every (re)connecting watch gets the same view.
    void (async () => {
      for (;;) send(await directory.nextWatch(), view);
    })();
    const modelsFile = join(tmp, 'models.json');
    writeFileSync(modelsFile, JSON.stringify({ models: [{ model: 'qwen3', tokenizer: QWEN_DIR }, { model: 'llama', tokenizer: LLAMA_DIR }] }));
    router = await RouterProcess.start(`127.0.0.1:${directory.port}`, ['--load_balance_policy=CAR', `--models_file=${modelsFile}`, '--view_stale_after_ms=600000', '--log_level=warn']);
    client = new OpenAI({ baseURL: `${router.url}/v1`, apiKey: 'unused', maxRetries: 0 });
  });

  after(async () => {
    await router?.stop();
    directory?.stop();
    await qwenEngine?.close();
    await llamaEngine?.close();
    rmSync(tmp, { recursive: true, force: true });
  });

  async function route(body: Record<string, unknown>): Promise<RouteAnswer> {
    const res = await fetch(`${router.url}/v1/route`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ ...body, dry_run: true }) });
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as RouteAnswer;
  }

  it('models.list(): the union of the engines\' lists, adapters with their parent', async () => {
    const page = await client.models.list();
    const models = page.data as (OpenAI.Models.Model & { parent: string | null })[];
    expect(models.map((m) => [m.id, m.parent, m.object, m.owned_by])).to.deep.equal([
      ['llama', null, 'model', 'kv-cache-router'],
      ['qwen3', null, 'model', 'kv-cache-router'],
      ['sql-lora', 'qwen3', 'model', 'kv-cache-router'],
    ]);
  });

  it('CI5 chat and completions land on the requested model\'s engine, the body forwarded unchanged', async () => {
    const q = nameOf(qwenEngine);
    const l = nameOf(llamaEngine);
    for (const [model, engine] of [['qwen3', q], ['llama', l], ['sql-lora', q], ['llama', l], ['qwen3', q]] as const) {
      const { data, response } = await client.chat.completions.create({ model, messages: MESSAGES, max_tokens: 2 }).withResponse();
      expect(response.headers.get(INSTANCE_HEADER), model).to.equal(engine);
      expect(data.object).to.equal('chat.completion');
      expect(data.choices[0]!.message.role).to.equal('assistant');
      const forwarded = JSON.parse(seen[engine]!.at(-1)!.body.toString('utf8')) as { model: string };
      expect(forwarded.model).to.equal(model);
    }
    const { data, response } = await client.completions.create({ model: 'llama', prompt: 'The cache was', max_tokens: 3 }).withResponse();
    expect(response.headers.get(INSTANCE_HEADER)).to.equal(l);
    expect(data.object).to.equal('text_completion');
    expect(data.choices[0]!.text).to.be.a('string').and.not.equal('');
  });

  it('streaming chat through the router: chunks from the model\'s engine, then the end of the stream', async () => {
    const { data: stream, response } = await client.chat.completions.create({ model: 'llama', messages: MESSAGES, max_tokens: 5, stream: true }).withResponse();
    expect(response.headers.get(INSTANCE_HEADER)).to.equal(nameOf(llamaEngine));
    let chunks = 0;
    let text = '';
    for await (const chunk of stream) {
      chunks++;
      expect(chunk.object).to.equal('chat.completion.chunk');
      text += chunk.choices[0]?.delta.content ?? '';
    }
    expect(chunks).to.be.at.least(5);
    expect(text).to.not.equal('');
  });

  it('CI5 errors read by the client: an unknown model is a NotFoundError with vLLM\'s message, a missing model or an empty cache_salt a BadRequestError naming the field', async () => {
    const unknown = await raised(client.chat.completions.create({ model: 'gpt-9', messages: MESSAGES }));
    expect(unknown).to.be.instanceOf(OpenAI.NotFoundError);
    expect([unknown.status, unknown.param, unknown.type]).to.deep.equal([404, 'model', 'NotFoundError']);
    expect(unknown.message).to.include('The model `gpt-9` does not exist.');
    const unknownCompletion = await raised(client.completions.create({ model: 'gpt-9', prompt: 'x' }));
    expect(unknownCompletion).to.be.instanceOf(OpenAI.NotFoundError);

    // Two base models served: the router cannot choose (JSON drops the undefined model).
    const missing = await raised(client.chat.completions.create({ model: undefined as unknown as string, messages: MESSAGES }));
    expect(missing).to.be.instanceOf(OpenAI.BadRequestError);
    expect(missing.param).to.equal('model');
    expect(missing.message).to.include('llama').and.include('qwen3');
    const params = { model: 'qwen3', messages: MESSAGES, cache_salt: '' } as OpenAI.Chat.ChatCompletionCreateParamsNonStreaming;
    const salt = await raised(client.chat.completions.create(params));
    expect(salt).to.be.instanceOf(OpenAI.BadRequestError);
    expect(salt.param).to.equal('cache_salt');
  });

  it('CI7 per-model tokenizers: each model\'s chat is tokenized by its own tokenizer + template and credited exactly on its engine', async () => {
    expect(qwenIds).to.not.deep.equal(llamaIds);
    const full = (ids: number[]): number => Math.floor(ids.length / 4) * 4;
    const cases = [
      { model: 'qwen3', ids: qwenIds, engine: nameOf(qwenEngine), lora: null },
      { model: 'sql-lora', ids: qwenIds, engine: nameOf(qwenEngine), lora: 'sql-lora' },
      { model: 'llama', ids: llamaIds, engine: nameOf(llamaEngine), lora: null },
    ];
    for (const c of cases) {
      const a = await route({ model: c.model, messages: MESSAGES });
      expect(a, c.model).to.deep.include({ token_source: 'tokenizer', input_tokens: c.ids.length });
      expect(a.identity).to.deep.include({ model: c.model, lora_name: c.lora, salted: false });
      expect(a.candidates.filter((x) => x.role === 'prefill').map((x) => [x.instance_name, x.hit_tokens]), c.model).to.deep.equal([[c.engine, full(c.ids)]]);
    }
    // The same chat salted: nothing on any engine holds that identity's blocks.
    const salted = await route({ model: 'qwen3', messages: MESSAGES, cache_salt: 'tenant-a' });
    expect(salted.candidates[0]!.hit_tokens).to.equal(0);
    const status = (await (await fetch(`${router.url}/v1/status`)).json()) as { model_tokenizers: { model: string; tokenizer: { path: string; vocab_size: number } }[]; tokenizer: unknown };
    expect(status.tokenizer).to.equal(null);
    expect(status.model_tokenizers.map((m) => [m.model, m.tokenizer.path])).to.deep.equal([
      ['qwen3', QWEN_DIR],
      ['llama', LLAMA_DIR],
    ]);
  });

  it('a bad --models_file: one line naming the file, the entry and the field, exit 2', async () => {
    const bad = join(tmp, 'bad-models.json');
    writeFileSync(bad, JSON.stringify({ models: [{ model: 'qwen3', tokenizer: QWEN_DIR }, { model: 'llama', tokenizer: join(tmp, 'absent') }] }));
    const proc = spawnService('router-svc', 'router-svc/main.ts', [`--directory_addr=127.0.0.1:${directory.port}`, `--models_file=${bad}`]);
    const { code } = await proc.waitForExit();
    expect(code).to.equal(2);
    expect([...proc.output]).to.deep.equal([`invalid --models_file: ${bad}: models[1].tokenizer: ${join(tmp, 'absent')}: no such directory`]);
  });
});
