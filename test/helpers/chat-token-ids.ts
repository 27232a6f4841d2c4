/**
 * A chat's token ids as its model's tokenizer and chat template give them: the shared code the
 * router and the simulated engines tokenize with (tokenization.md §3), loaded from a model
 * directory such as the bundled Qwen3 or Llama 3.1 tokenizers.
 */
import { parseChatRequest } from '../../shared/tokenize/chat-request.js';
import { PromptTokenizer } from '../../shared/tokenize/prompt-tokenizer.js';

export async function chatTokenIds(dir: string, messages: readonly { role: string; content: string }[]): Promise<number[]> {
  const t = PromptTokenizer.load(dir, '');
  try {
    const r = await t.chat(parseChatRequest({ messages }));
    if (!r.ok) throw new Error(r.detail);
    return r.tokenIds;
  } finally {
    await t.close();
  }
}
