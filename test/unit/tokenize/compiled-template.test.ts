/**
 * The compiled chat template (compiled-template.ts) against @huggingface/jinja's interpreter, the
 * reference it must equal: random chats (system/user/assistant/tool turns, <think> blocks,
 * reasoning_content, tool calls with string and object arguments, tools, add_generation_prompt,
 * enable_thinking, odd unicode) rendered by both for the bundled Qwen3 template and the fixtures
 * of other model families. A compiled render either gives the interpreter's text, fails where the
 * interpreter fails, or says NotCompiled (that render is then the interpreter's). Plus: the
 * compiler declines what it does not model, and the shadow check switches a wrong compiled
 * renderer off for good, in the calling thread and in the chat threads.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { expect } from 'chai';
import fc from 'fast-check';
import { Template } from '@huggingface/jinja';
import { bundledQwen3TokenizerDir } from '../../../shared/tokenize/bundled-tokenizer.js';
import { ChatTemplate } from '../../../shared/tokenize/chat-template.js';
import { parseChatRequest } from '../../../shared/tokenize/chat-request.js';
import { CompiledTemplate, TemplateDeclined } from '../../../shared/tokenize/compiled-template.js';
import { PromptTokenizer } from '../../../shared/tokenize/prompt-tokenizer.js';
import { SHADOW_EVERY, SHADOW_FIRST, ShadowCheckedRenderer, type TemplateVars } from '../../../shared/tokenize/shadow-checked-renderer.js';
import { NotCompiled } from '../../../shared/tokenize/template-values.js';
import { CHATML, CONSTRUCTS, DEEPSEEK_R1, GEMMA_3, LLAMA_3_1, LLAMA_3_2_DATE, MISTRAL_V03, PHI_3, PHI_4, WITH_MACRO } from './fixtures/chat-templates.js';

const DIR = bundledQwen3TokenizerDir();
const QWEN3 = (JSON.parse(readFileSync(join(DIR, 'tokenizer_config.json'), 'utf8')) as { chat_template: string }).chat_template;

type Outcome = { readonly text: string } | { readonly error: string } | { readonly notCompiled: string };

function outcome(render: () => string): Outcome {
  try {
    return { text: render() };
  } catch (e) {
    if (e instanceof NotCompiled) return { notCompiled: e.message };
    return { error: e instanceof Error ? e.message : String(e) };
  }
}

/** Text pieces chat templates look for, and text they should pass through untouched. */
const FRAGMENTS = ['</think>', '<think>', '\n', '\n\n', ' ', 'a', 'tool', '<tool_response>', '</tool_response>', '{"x": 1}', 'é', '😀', '\u0000', '\ud800', '{{ x }}', '%}', "'", '"', '\\'];
const text = fc.oneof(
  fc.array(fc.oneof(fc.constantFrom(...FRAGMENTS), fc.string({ maxLength: 6 })), { maxLength: 8 }).map((parts) => parts.join('')),
  fc.string({ unit: 'binary', maxLength: 12 }),
);
/** Tool-call arguments: a JSON string or the object vLLM parses it into (objects round-tripped through JSON, as a request body is). */
const jsonObject = fc.dictionary(fc.string({ maxLength: 5 }), fc.jsonValue({ maxDepth: 2 }), { maxKeys: 4 }).map((o) => JSON.parse(JSON.stringify(o)) as Record<string, unknown>);
const toolCall = fc.record({
  id: fc.oneof(fc.constant('abcdefghi'), fc.string({ maxLength: 10 })),
  type: fc.constant('function'),
  function: fc.record({ name: fc.constantFrom('get_weather', 'search', ''), arguments: fc.oneof(jsonObject, jsonObject.map((o) => JSON.stringify(o))) }),
});
/** Messages as parseChatRequest hands a string-format template: every content a string. */
const stringMessage = fc.oneof(
  fc.record({ role: fc.constantFrom('system', 'user', 'assistant', 'tool'), content: text }),
  fc.record({ role: fc.constant('assistant'), content: text, reasoning_content: fc.oneof(text, fc.constant(null)) }, { requiredKeys: ['role', 'content'] }),
  fc.record({ role: fc.constant('assistant'), content: text, tool_calls: fc.array(toolCall, { minLength: 1, maxLength: 3 }) }),
  fc.record({ role: fc.constant('tool'), content: text, tool_call_id: fc.oneof(fc.constant('abcdefghi'), fc.string({ maxLength: 10 })) }),
);
/** And what other clients and templates see: null content beside tool calls, lists of text parts. */
const message = fc.oneof(
  stringMessage,
  fc.record({ role: fc.constant('assistant'), content: fc.constant(null), tool_calls: fc.array(toolCall, { minLength: 1, maxLength: 3 }) }),
  fc.record({ role: fc.constantFrom('user', 'assistant'), content: fc.array(fc.record({ type: fc.constant('text'), text }), { maxLength: 3 }) }),
);
const tool = fc.record({ type: fc.constant('function'), function: fc.record({ name: fc.string({ maxLength: 8 }), description: fc.oneof(text, fc.constant(null)), parameters: fc.oneof(jsonObject, fc.constant(null)) }) });
const varsOf = (messages: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<TemplateVars> =>
  fc.record(
  {
    messages: fc.array(messages, { minLength: 1, maxLength: 8 }),
    add_generation_prompt: fc.boolean(),
    tools: fc.array(tool, { maxLength: 3 }),
    enable_thinking: fc.boolean(),
    bos_token: fc.constant('<s>'),
    eos_token: fc.constant('</s>'),
  },
  { requiredKeys: ['messages', 'add_generation_prompt', 'bos_token', 'eos_token'] },
);
const vars = varsOf(message);
/** Chats shaped as parseChatRequest would (contents strings, alternating roles), so most renders get past the templates' checks. */
const alternating = fc
  .array(fc.tuple(text, text), { minLength: 1, maxLength: 6 })
  .chain((turns) =>
    fc.record({
      system: fc.option(text, { nil: undefined }),
      turns: fc.constant(turns),
      add_generation_prompt: fc.boolean(),
      enable_thinking: fc.boolean(),
    }),
  )
  .map(({ system, turns, add_generation_prompt, enable_thinking }) => {
    const messages: Record<string, unknown>[] = system === undefined ? [] : [{ role: 'system', content: system }];
    for (const [q, a] of turns) messages.push({ role: 'user', content: q }, { role: 'assistant', content: a });
    return { messages, add_generation_prompt, enable_thinking, bos_token: '<s>', eos_token: '</s>' };
  });

interface Tally {
  compiled: number;
  notCompiled: number;
  errors: number;
  /** Why renders were handed to the interpreter. */
  readonly reasons: Set<string>;
}

/** Both engines on `v`: equal text, or both failing, or NotCompiled. */
function agree(template: Template, compiled: CompiledTemplate, v: TemplateVars, tally: Tally): void {
  const expected = outcome(() => template.render(v));
  const got = outcome(() => compiled.render(v));
  if ('notCompiled' in got) {
    tally.notCompiled++;
    tally.reasons.add(got.notCompiled);
    return;
  }
  if ('error' in got) {
    expect(expected, `compiled failed (${got.error}) where the interpreter did not`).to.have.property('error');
    tally.errors++;
    return;
  }
  expect(expected).to.deep.equal(got);
  tally.compiled++;
}

function differential(source: string, runs: number, chats: fc.Arbitrary<TemplateVars> = fc.oneof(vars, alternating)): Tally {
  const template = new Template(source);
  const compiled = CompiledTemplate.compile(template.parsed);
  const tally: Tally = { compiled: 0, notCompiled: 0, errors: 0, reasons: new Set() };
  fc.assert(
    fc.property(chats, (v) => agree(template, compiled, v, tally)),
    { numRuns: runs },
  );
  return tally;
}

describe('compiled chat templates render exactly as @huggingface/jinja interprets them', function () {
  this.timeout(120000);

  it('Qwen3 (the bundled template): random chats render identically, fail alike, or are handed to the interpreter', () => {
    const tally = differential(QWEN3, 1000);
    // Random chats here fail in both engines about 37–41% of the time (contents the template
    // rejects) and are compiled 52–56%: "compiled above the rest" sat on that boundary and failed
    // once in CI (499 against 501). The property is that the compiled engine renders a large share
    // and hands few back: 8 runs measured 518–563 compiled and 56–90 handed back.
    expect(tally.compiled).to.be.greaterThan(400);
    expect(tally.notCompiled).to.be.lessThan(tally.compiled / 3);
  });

  it('Qwen3: every chat the router can hand it (string contents) is rendered compiled, never handed back', () => {
    const tally = differential(QWEN3, 1000, fc.oneof(varsOf(stringMessage), alternating));
    expect(tally.notCompiled, [...tally.reasons].join(', ')).to.equal(0);
    expect(tally.compiled).to.be.greaterThan(tally.errors);
  });

  for (const [name, source] of [
    ['Llama 3.1', LLAMA_3_1],
    ['Mistral v0.3', MISTRAL_V03],
    ['DeepSeek-R1 distill', DEEPSEEK_R1],
    ['Gemma 3', GEMMA_3],
    ['ChatML', CHATML],
    ['Phi-3', PHI_3],
    ['Phi-4', PHI_4],
    ['every modelled construct', CONSTRUCTS],
  ] as const) {
    it(`${name}: random chats render identically, fail alike, or are handed to the interpreter`, () => {
      const tally = differential(source, 600);
      // Each fixture renders most chats compiled: a template the compiled form keeps handing back would gain nothing.
      expect(tally.compiled + tally.errors).to.be.greaterThan(tally.notCompiled);
      expect(tally.compiled).to.be.greaterThan(0);
    });
  }

  it('DeepSeek-R1 concatenates object arguments as JavaScript prints a Map: that render is the interpreter’s', () => {
    const template = new Template(DEEPSEEK_R1);
    const v = { bos_token: '', messages: [{ role: 'assistant', content: null, tool_calls: [{ type: 'function', function: { name: 'f', arguments: { a: 1 } } }] }] };
    expect(outcome(() => CompiledTemplate.compile(template.parsed).render(v))).to.have.property('notCompiled');
    expect(template.render(v)).to.contain('[object Map]');
  });

  it('Llama 3.2 reaches strftime_now, a global left to the interpreter; a given date_string does not', () => {
    const template = new Template(LLAMA_3_2_DATE);
    const compiled = CompiledTemplate.compile(template.parsed);
    const chat = { bos_token: '', add_generation_prompt: true, messages: [{ role: 'user', content: 'hi' }] };
    expect(outcome(() => compiled.render(chat))).to.have.property('notCompiled');
    const dated = { ...chat, date_string: '1 Dec 2026' };
    expect(compiled.render(dated)).to.equal(template.render(dated));
  });

  it('declines at start-up what it does not model (a macro), naming it, and that template is interpreted', () => {
    expect(() => CompiledTemplate.compile(new Template(WITH_MACRO).parsed)).to.throw(TemplateDeclined, /Macro/);
    const chat = new ChatTemplate(WITH_MACRO, 'macro.jinja', {});
    expect(chat.engine).to.include({ engine: 'interpreted' });
    expect(chat.engine.reason).to.match(/does not support Macro/);
    expect(chat.render(parseChatRequest({ messages: [{ role: 'user', content: 'hi' }] }))).to.equal('<user>hi');
    for (const source of ['{{ 1.0 }}', '{% filter upper %}x{% endfilter %}', '{% call f() %}x{% endcall %}', '{{ f(*xs) }}']) {
      expect(() => CompiledTemplate.compile(new Template(source).parsed), source).to.throw(TemplateDeclined);
    }
  });

  it('a template error is the interpreter’s message, whichever engine rendered', () => {
    const chat = new ChatTemplate(QWEN3, 'qwen3', {});
    const bad = parseChatRequest({ messages: [{ role: 'user', content: 'hi' }], chat_template_kwargs: { namespace: 1 } });
    const interpreted = new ChatTemplate(QWEN3, 'qwen3', {}, { compile: false });
    const message = (t: ChatTemplate): string => {
      try {
        t.render(bad);
      } catch (e) {
        return (e as Error).message;
      }
      return 'rendered';
    };
    expect(message(chat)).to.equal(message(interpreted)).and.to.match(/^chat template failed: .*namespace/);
    expect(chat.engine).to.include({ engine: 'compiled', mismatches: 0 });
  });
});

describe('the shadow check switches a wrong compiled renderer off for good', () => {
  const interpreter = { render: (v: TemplateVars): string => `text ${String(v['n'])}` };

  it('checks the first renders and then one in SHADOW_EVERY, and a difference makes every later render interpreted', () => {
    // Wrong only on render SHADOW_EVERY: the first SHADOW_FIRST checks pass, the sampled one finds it.
    let n = 0;
    const broken = { render: (v: TemplateVars): string => (++n === SHADOW_EVERY ? 'wrong' : interpreter.render(v)) };
    const reasons: string[] = [];
    const r = new ShadowCheckedRenderer(interpreter, broken, null, (reason) => reasons.push(reason));
    for (let i = 1; i <= SHADOW_EVERY + 10; i++) {
      expect(r.render({ n: i })).to.equal(`text ${i}`);
    }
    expect(r.info).to.include({ engine: 'interpreted', mismatches: 1, shadow_checks: SHADOW_FIRST + 1, renders: SHADOW_EVERY + 10 });
    expect(r.info.reason).to.match(/rendered differently .* character 0/);
    expect(reasons).to.have.length(1);
    // Switched off: the compiled renderer is never called again.
    const before = n;
    r.render({ n: 1 });
    expect(n).to.equal(before);
  });

  it('a compiled renderer that fails where the interpreter renders is a difference; NotCompiled is not', () => {
    const throwing = (error: Error): ShadowCheckedRenderer =>
      new ShadowCheckedRenderer(
        interpreter,
        {
          render: () => {
            throw error;
          },
        },
        null,
      );
    const notCompiled = throwing(new NotCompiled('x'));
    expect(notCompiled.render({ n: 1 })).to.equal('text 1');
    expect(notCompiled.info).to.include({ engine: 'compiled', interpreted_renders: 1, mismatches: 0 });
    const failing = throwing(new Error('boom'));
    expect(failing.render({ n: 2 })).to.equal('text 2');
    expect(failing.info).to.include({ engine: 'interpreted', mismatches: 1 });
  });

  it('a deliberately wrong compiled Qwen3 is caught on the first chat and the interpreter’s text is routed', () => {
    const right = new ChatTemplate(QWEN3, 'qwen3', {}, { compile: false });
    const wrong = new ChatTemplate(QWEN3, 'qwen3', {}, { compiledForTest: { render: () => 'not the chat' } });
    const chat = parseChatRequest({ messages: [{ role: 'user', content: 'hi' }] });
    expect(wrong.render(chat)).to.equal(right.render(chat));
    expect(wrong.engine).to.include({ engine: 'interpreted', mismatches: 1 });
  });

  it('/v1/status tokenizer info shows the engine live, over the calling thread and the chat threads', async () => {
    const pooled = PromptTokenizer.load(DIR, '', { renderThreads: 2 });
    try {
      const chat = parseChatRequest({ messages: [{ role: 'user', content: 'hello' }] });
      for (let i = 0; i < 6; i++) expect((await pooled.chat(chat)).ok).to.equal(true);
      const shown = JSON.parse(JSON.stringify(pooled.info)) as { template_engine: Record<string, unknown> };
      expect(shown.template_engine).to.include({ engine: 'compiled', reason: null, mismatches: 0, interpreted_renders: 0 });
      expect(shown.template_engine['renders']).to.equal(6);
      expect(shown.template_engine['shadow_checks']).to.equal(6);
    } finally {
      await pooled.close();
    }
    const off = PromptTokenizer.load(DIR, '', { compileTemplate: false });
    expect(off.info.template_engine).to.include({ engine: 'interpreted', reason: 'compilation turned off' });
  });
});
