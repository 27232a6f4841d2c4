// The simulated engine's served models over real HTTP (cache-identity §1, §6), answered as vLLM's
// API server answers them: GET /v1/models, POST /v1/load_lora_adapter and
// /v1/unload_lora_adapter (serving_models.py, its LoRA router), vLLM's 404 for a model not served,
// and each request's identity (adapter, cache_salt) reaching the engine's real block pool.
//
//   client ──HTTP──▶ OpenAiEndpoint ──(tokens, {loraName, loraId, cacheSalt})──▶ EngineSimulator pool
import { expect } from 'chai';
import { freePortRange } from '../../helpers/ports.js';
import { EngineSimulator } from '../../../tools/engine-sim/engine-simulator.js';
import { OpenAiEndpoint, OpenAiServer } from '../../../tools/engine-sim/openai-server.js';
import { ServedModelRegistry } from '../../../tools/engine-sim/served-model-registry.js';

const PROMPT = [1, 2, 3, 4, 5, 6, 7, 8, 9];

interface Answer {
  status: number;
  contentType: string | null;
  text: string;
}

describe('engine-sim served models and request identity over HTTP (cache-identity §6)', () => {
  let sim: EngineSimulator | null = null;
  let server: OpenAiServer | null = null;

  afterEach(async () => {
    await server?.close();
    server = null;
    await sim?.close();
    sim = null;
  });

  async function start(models?: ServedModelRegistry): Promise<{ url: string; sim: EngineSimulator; endpoint: OpenAiEndpoint }> {
    sim = await EngineSimulator.start({
      instanceName: 'sim-identity',
      blockSize: 4,
      eventPortBase: await freePortRange(1),
      replayPortBase: await freePortRange(1),
      deviceCapacityBlocks: 64,
      engineKind: 'vllm',
    });
    const endpoint = new OpenAiEndpoint({ engine: sim, models, tokenIntervalMs: 0 });
    server = await OpenAiServer.listen({ port: 0, endpoint });
    return { url: `http://127.0.0.1:${server.port}`, sim, endpoint };
  }

  const strict = (): ServedModelRegistry => new ServedModelRegistry({ names: ['llama-3.1-8b', 'sql-lora'], strict: true, ownedBy: 'vllm', maxModelLen: 256 });

  async function call(url: string, method: string, body?: unknown): Promise<Answer> {
    const res = await fetch(url, { method, body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body) });
    return { status: res.status, contentType: res.headers.get('content-type'), text: await res.text() };
  }

  async function listed(url: string): Promise<{ id: string; parent: string | null; root: string; max_model_len: number | null }[]> {
    const a = await call(`${url}/v1/models`, 'GET');
    expect(a.status).to.equal(200);
    const list = JSON.parse(a.text) as { object: string; data: { id: string; parent: string | null; root: string; max_model_len: number | null }[] };
    expect(list.object).to.equal('list');
    return list.data;
  }

  it('§1 GET /v1/models: the base model card, then each adapter with parent = base, in vLLM ModelCard form', async () => {
    const { url } = await start(strict());
    const a = await call(`${url}/v1/models`, 'GET');
    expect(a.contentType).to.equal('application/json');
    const [base, adapter] = (JSON.parse(a.text) as { data: Record<string, unknown>[] }).data;
    expect(base).to.deep.include({ id: 'llama-3.1-8b', object: 'model', owned_by: 'vllm', root: 'llama-3.1-8b', parent: null, max_model_len: 256 });
    expect(adapter).to.deep.include({ id: 'sql-lora', object: 'model', owned_by: 'vllm', root: 'sql-lora', parent: 'llama-3.1-8b', max_model_len: null });
    expect(Object.keys(base!)).to.deep.equal(['id', 'object', 'created', 'owned_by', 'root', 'parent', 'max_model_len', 'permission']);
    expect((base!.permission as Record<string, unknown>[])[0]).to.deep.include({ object: 'model_permission', allow_sampling: true, organization: '*', group: null });
    expect(await call(`${url}/v1/models`, 'POST')).to.deep.include({ status: 405, text: '{"detail":"Method Not Allowed"}' });
  });

  it('§6 load and unload at run time: vLLM success texts, /v1/models reflects each change at once', async () => {
    const { url } = await start(strict());
    const load = await call(`${url}/v1/load_lora_adapter`, 'POST', { lora_name: 'chat-lora', lora_path: '/adapters/chat' });
    expect(load).to.deep.equal({ status: 200, contentType: null, text: "Success: LoRA adapter 'chat-lora' added successfully." });
    expect((await listed(url)).map((m) => [m.id, m.parent, m.root])).to.deep.equal([
      ['llama-3.1-8b', null, 'llama-3.1-8b'],
      ['sql-lora', 'llama-3.1-8b', 'sql-lora'],
      ['chat-lora', 'llama-3.1-8b', '/adapters/chat'],
    ]);
    const unload = await call(`${url}/v1/unload_lora_adapter`, 'POST', { lora_name: 'sql-lora' });
    expect(unload).to.deep.equal({ status: 200, contentType: null, text: "Success: LoRA adapter 'sql-lora' removed successfully." });
    expect((await listed(url)).map((m) => m.id)).to.deep.equal(['llama-3.1-8b', 'chat-lora']);
  });

  it('§1 the registry tells its listeners of each run-time change of the list (an xLLM engine re-registers), not of refusals or in-place reloads', () => {
    const registry = strict();
    let changes = 0;
    registry.onChange(() => changes++);
    expect(registry.load('chat-lora', '/adapters/chat')).to.equal(null);
    expect(registry.load('chat-lora', '/adapters/chat-v2', true)).to.equal(null);
    expect(registry.load('chat-lora', '/adapters/chat')).to.not.equal(null);
    expect(registry.unload('absent')).to.not.equal(null);
    expect(changes).to.equal(1);
    expect(registry.unload('sql-lora')).to.equal(null);
    expect([changes, registry.list().map((m) => m.name)]).to.deep.equal([2, ['llama-3.1-8b', 'chat-lora']]);
  });

  it('§6 load and unload refusals in vLLM ErrorResponse form: duplicate, missing fields, unknown adapter, wrong types', async () => {
    const { url } = await start(strict());
    const load = (body: unknown): Promise<Answer> => call(`${url}/v1/load_lora_adapter`, 'POST', body);
    const unload = (body: unknown): Promise<Answer> => call(`${url}/v1/unload_lora_adapter`, 'POST', body);
    const error = (status: number, type: string, message: string, param: string | null = null): Answer => ({
      status,
      contentType: 'application/json',
      text: JSON.stringify({ error: { message, type, param, code: status } }),
    });
    expect(await load({ lora_name: 'sql-lora', lora_path: '/x' })).to.deep.equal(
      error(400, 'InvalidUserInput', "The lora adapter 'sql-lora' has already been loaded. If you want to load the adapter in place, set 'load_inplace' to True."),
    );
    expect(await load({ lora_name: 'sql-lora', lora_path: '/x', load_inplace: true })).to.include({ status: 200 });
    expect(await load({ lora_name: 'x' })).to.deep.equal(error(400, 'InvalidUserInput', "Both 'lora_name' and 'lora_path' must be provided."));
    expect(await load({ lora_name: '', lora_path: '/x' })).to.deep.equal(error(400, 'InvalidUserInput', "Both 'lora_name' and 'lora_path' must be provided."));
    expect(await load({ lora_name: 'x', lora_path: 7 })).to.deep.equal(error(400, 'BadRequestError', 'lora_path: expected a string', 'lora_path'));
    expect(await load({ lora_name: 'x', lora_path: '/x', load_inplace: 'yes' })).to.deep.equal(error(400, 'BadRequestError', 'load_inplace: expected a boolean', 'load_inplace'));
    expect(await load('[1]')).to.deep.equal(error(400, 'BadRequestError', 'body must be a JSON object'));
    expect(await load('{')).to.deep.equal(error(400, 'BadRequestError', 'body is not valid JSON'));
    expect(await load({ lora_name: 'llama-3.1-8b', lora_path: '/x' })).to.deep.equal(
      error(400, 'InvalidUserInput', "The lora adapter 'llama-3.1-8b' cannot take the name of the base model."),
    );
    expect(await unload({ lora_name: 'nope' })).to.deep.equal(error(404, 'NotFoundError', "The lora adapter 'nope' cannot be found."));
    expect(await unload({})).to.deep.equal(error(400, 'InvalidUserInput', "'lora_name' needs to be provided to unload a LoRA adapter."));
    expect(await call(`${url}/v1/unload_lora_adapter`, 'GET')).to.include({ status: 405 });
    // Nothing refused changed the list.
    expect((await listed(url)).map((m) => m.id)).to.deep.equal(['llama-3.1-8b', 'sql-lora']);
  });

  it("CI5 a model not served is vLLM's 404 (completions and chat), before any prefill; an unloaded adapter too", async () => {
    const { url, sim: s, endpoint } = await start(strict());
    const notFound = (m: string): string => `{"error":{"message":"The model \`${m}\` does not exist.","type":"NotFoundError","param":"model","code":404}}`;
    expect(await call(`${url}/v1/completions`, 'POST', { model: 'gpt-4o', prompt: PROMPT })).to.deep.equal({ status: 404, contentType: 'application/json', text: notFound('gpt-4o') });
    expect(await call(`${url}/v1/chat/completions`, 'POST', { model: 'gpt-4o', messages: [{ role: 'user', content: 'hi' }] })).to.include({ status: 404, text: notFound('gpt-4o') });
    expect(s.rank(0).pool.deviceBlocks, 'a 404 admits nothing').to.equal(0);
    await call(`${url}/v1/unload_lora_adapter`, 'POST', { lora_name: 'sql-lora' });
    expect(await call(`${url}/v1/completions`, 'POST', { model: 'sql-lora', prompt: PROMPT })).to.include({ status: 404, text: notFound('sql-lora') });
    expect(await call(`${url}/v1/completions`, 'POST', { model: 7, prompt: PROMPT })).to.include({ status: 400 });
    // What the cluster benchmark reads to count requests sent to an engine not serving their model.
    expect(endpoint.modelNotFound, 'the 404s counted, the 400 not').to.equal(3);
  });

  it('CI1 a request for an adapter is a LoRA request: blocks keyed and marked by it, credited only to that adapter', async () => {
    const { url, sim: s } = await start(strict());
    const complete = async (body: Record<string, unknown>): Promise<{ model: string; cached: number }> => {
      const a = await call(`${url}/v1/completions`, 'POST', { prompt: PROMPT, max_tokens: 1, ...body });
      expect(a.status).to.equal(200);
      const j = JSON.parse(a.text) as { model: string; usage: { prompt_tokens_details: { cached_tokens: number } } };
      return { model: j.model, cached: j.usage.prompt_tokens_details.cached_tokens };
    };
    expect(await complete({ model: 'sql-lora' })).to.deep.equal({ model: 'sql-lora', cached: 0 });
    const pool = s.rank(0).pool;
    const lora = pool.hashesOf(PROMPT, { loraName: 'sql-lora' });
    for (const h of lora) expect(pool.tiersOf(h)).to.equal(1);
    expect(pool.snapshot().map((b) => [b.lora_name, b.lora_id])).to.deep.equal([
      ['sql-lora', 1],
      ['sql-lora', 1],
    ]);
    expect(await complete({ model: 'sql-lora' })).to.deep.equal({ model: 'sql-lora', cached: 8 });
    // The base model (named or not) misses the adapter's blocks, and is answered as the base model.
    expect(await complete({ model: 'llama-3.1-8b' })).to.deep.equal({ model: 'llama-3.1-8b', cached: 0 });
    expect(await complete({})).to.deep.equal({ model: 'llama-3.1-8b', cached: 8 });
  });

  it('CI2 cache_salt (chat and completions) salts block 0; an empty or non-string salt is 400 as vLLM answers', async () => {
    const { url, sim: s } = await start(strict());
    const pool = s.rank(0).pool;
    expect(await call(`${url}/v1/completions`, 'POST', { prompt: PROMPT, cache_salt: 'tenant-a', max_tokens: 1 })).to.include({ status: 200 });
    const salted = pool.hashesOf(PROMPT, { cacheSalt: 'tenant-a' });
    expect(salted.map((h) => pool.tiersOf(h))).to.deep.equal([1, 1]);
    expect(pool.snapshot()[0]!.extra_keys).to.deep.equal([['tenant-a']]);
    const chat = await call(`${url}/v1/chat/completions`, 'POST', { model: 'sql-lora', messages: [{ role: 'user', content: 'hello there' }], cache_salt: 'tenant-b', max_tokens: 1 });
    expect(chat.status).to.equal(200);
    const roots = pool.snapshot().filter((b) => b.parent_block_hash === null).map((b) => b.extra_keys);
    expect(roots).to.deep.include([['sql-lora', 'tenant-b']]);
    const badSalt = '{"error":{"message":"Parameter \'cache_salt\' must be a non-empty string if provided.","type":"BadRequestError","param":null,"code":400}}';
    expect(await call(`${url}/v1/completions`, 'POST', { prompt: PROMPT, cache_salt: '' })).to.include({ status: 400, text: badSalt });
    expect(await call(`${url}/v1/chat/completions`, 'POST', { messages: [{ role: 'user', content: 'x' }], cache_salt: 5 })).to.include({ status: 400, text: badSalt });
  });

  it('default (no list): no /v1/models (404, the list is unknown); any model name is served by the base model and answered under its own name', async () => {
    const { url, sim: s } = await start();
    expect(await call(`${url}/v1/models`, 'GET')).to.include({ status: 404, text: '{"detail":"Not Found"}' });
    const a = await call(`${url}/v1/completions`, 'POST', { model: 'qwen3', prompt: PROMPT, max_tokens: 1 });
    expect(a.status).to.equal(200);
    expect((JSON.parse(a.text) as { model: string }).model).to.equal('qwen3');
    for (const h of s.rank(0).pool.hashesOf(PROMPT)) expect(s.rank(0).pool.tiersOf(h), 'plain blocks').to.equal(1);
    // An adapter loaded at run time is a LoRA model even here.
    await call(`${url}/v1/load_lora_adapter`, 'POST', { lora_name: 'a', lora_path: '/a' });
    await call(`${url}/v1/completions`, 'POST', { model: 'a', prompt: PROMPT, max_tokens: 1 });
    for (const h of s.rank(0).pool.hashesOf(PROMPT, { loraName: 'a' })) expect(s.rank(0).pool.tiersOf(h)).to.equal(1);
  });
});
