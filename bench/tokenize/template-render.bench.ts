/**
 * Chat-template render time, compiled (compiled-template.ts) against @huggingface/jinja's
 * interpreter, for the bundled Qwen3 template over the benchmarks' 8k-token chat (66 messages)
 * as ChatTemplate renders it for a request (message objects built, shadow check included). The
 * two engines alternate in rounds so a shared machine's load falls on both.
 */
import { bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { ChatTemplate } from '../../shared/tokenize/chat-template.js';
import { parseChatRequest } from '../../shared/tokenize/chat-request.js';
import { readTokenizerFiles } from '../../shared/tokenize/tokenizer-files.js';
import { emitResult, isQuickRun, percentile } from '../lib/bench-kit.js';
import { benchChatMessages } from './bench-chat.js';

const QUICK = isQuickRun();
const ROUNDS = QUICK ? 6 : 20;
const PER_ROUND = 200;

// The template, its source path and the config exactly as the router reads them.
const files = readTokenizerFiles(bundledQwen3TokenizerDir(), '');
const source = files.chatTemplate!;
const request = parseChatRequest({ messages: benchChatMessages(8192) });
const engines = [
  { name: 'compiled', template: new ChatTemplate(source, files.chatTemplateSource, files.config) },
  { name: 'interpreted', template: new ChatTemplate(source, files.chatTemplateSource, files.config, { compile: false }) },
] as const;

const samples = new Map<string, number[]>(engines.map((e) => [e.name, []]));
let text = '';
for (const e of engines) for (let i = 0; i < PER_ROUND; i++) text = e.template.render(request); // warm-up
for (let r = 0; r < ROUNDS; r++) {
  for (const e of engines) {
    const out = samples.get(e.name)!;
    for (let i = 0; i < PER_ROUND; i++) {
      const t0 = performance.now();
      text = e.template.render(request);
      out.push(performance.now() - t0);
    }
  }
}
const round = (x: number): number => Math.round(x * 1000) / 1000;
for (const e of engines) {
  const s = samples.get(e.name)!.sort((a, b) => a - b);
  emitResult({ bench: 'template_render', engine: e.name, messages: request.messages.length, chars: text.length, render_p50_ms: round(percentile(s, 0.5)), render_p99_ms: round(percentile(s, 0.99)), template_engine: e.template.engine });
}
