/**
 * A rendered Qwen3 chat of about `tokens` tokens (ChatML markers, mixed prose, code and numbers),
 * deterministic, shared by the tokenizer benchmarks so they encode the same text.
 */
const WORDS = ['the', 'cache', 'router', 'block', 'prefix', 'engine', 'token', 'latency', 'queue', 'résumé', '東京', 'x=42;', 'fn()', '{"a":1}', 'GPU', 'naïve'];

/** Roughly 1.3 tokens per word for this mix (measured with the Qwen3 tokenizer). */
export function benchChatText(tokens: number): string {
  let s = '<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n';
  let seed = 7;
  let turn = 0;
  while (s.length < tokens * 4.2) {
    s += `<|im_start|>${turn % 2 === 0 ? 'user' : 'assistant'}\n`;
    for (let w = 0; w < 120; w++) {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      s += (w === 0 ? '' : ' ') + WORDS[seed % WORDS.length]! + (seed % 13 === 0 ? '.\n' : '');
    }
    s += '<|im_end|>\n';
    turn++;
  }
  return `${s}<|im_start|>assistant\n`;
}

/** The chat's user/assistant contents, for benchmarks that send `messages` instead of text. */
export function benchChatMessages(tokens: number): { role: string; content: string }[] {
  const text = benchChatText(tokens);
  const out: { role: string; content: string }[] = [];
  const re = /<\|im_start\|>(\w+)\n([\s\S]*?)<\|im_end\|>\n/g;
  for (let m = re.exec(text); m !== null; m = re.exec(text)) out.push({ role: m[1]!, content: m[2]! });
  return out;
}
