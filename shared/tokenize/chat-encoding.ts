/**
 * What tokenizing one request can end in, and the chat path after its cheap checks: render the
 * template, bound the text, encode without adding special tokens (tokenization.md §2). One
 * function, run on the calling thread or inside a chat thread (chat-worker.ts), so both give the
 * same ids and the same reasons.
 */
import { TemplateRenderError, type ChatTemplate } from './chat-template.js';
import type { ChatRequest } from './chat-request.js';
import { idsToArray, type TokenEncoder } from './token-encoder.js';

/**
 * Longest text tokenized (UTF-16 units): 1 Mi characters is about 260k tokens, twice the largest
 * context of current models (Qwen3: 131072), and about half a second of one thread-pool thread.
 * A longer prompt cannot be served by any engine whole; it is routed by load (`too_long`).
 */
export const MAX_TOKENIZE_CHARS = 1024 * 1024;

/**
 * Why a text request got no token ids (the `reason` label of router_untokenized_requests_total).
 * `no_tokenizer`: the router has none at all; `no_tokenizer_for_model`: it has some, but none for
 * the request's model (cache-identity §5).
 */
export const UNTOKENIZED_REASONS = ['no_tokenizer', 'no_tokenizer_for_model', 'no_chat_template', 'template_error', 'non_text_content', 'too_long', 'tokenizer_error'] as const;
export type UntokenizedReason = (typeof UNTOKENIZED_REASONS)[number];

export type TokenizeOutcome =
  | { readonly ok: true; readonly tokenIds: number[] }
  | { readonly ok: false; readonly reason: UntokenizedReason; readonly detail: string };

/** A chat's ids as a typed array (what a chat thread transfers), or why there are none. */
export type ChatIdsOutcome =
  | { readonly ok: true; readonly ids: Uint32Array }
  | { readonly ok: false; readonly reason: UntokenizedReason; readonly detail: string };

/** Rendered with `template` and encoded with `encoder`; never throws. */
export async function renderAndEncode(template: ChatTemplate, encoder: TokenEncoder, request: ChatRequest): Promise<ChatIdsOutcome> {
  let rendered: string;
  try {
    rendered = template.render(request);
  } catch (e) {
    if (e instanceof TemplateRenderError) return { ok: false, reason: 'template_error', detail: e.message };
    return { ok: false, reason: 'template_error', detail: `chat template failed: ${e instanceof Error ? e.message : String(e)}` };
  }
  if (rendered.length > MAX_TOKENIZE_CHARS) return tooLong(rendered.length);
  try {
    // vLLM's `add_special_tokens: true` on a chat adds them again (e.g. a second BOS): encoded whole, as it does.
    const ids = request.addSpecialTokens ? Uint32Array.from(await encoder.encode(rendered, true)) : await encoder.encodeRenderedIds(rendered, request.conversation);
    return { ok: true, ids };
  } catch (e) {
    return tokenizerFailed(e);
  }
}

/** The outcome with ids as the number[] the routing request carries. */
export function asTokenizeOutcome(outcome: ChatIdsOutcome): TokenizeOutcome {
  return outcome.ok ? { ok: true, tokenIds: idsToArray(outcome.ids) } : outcome;
}

export async function encodeOutcome(encode: () => Promise<number[]>): Promise<TokenizeOutcome> {
  try {
    return { ok: true, tokenIds: await encode() };
  } catch (e) {
    return tokenizerFailed(e);
  }
}

function tokenizerFailed(e: unknown): { readonly ok: false; readonly reason: 'tokenizer_error'; readonly detail: string } {
  return { ok: false, reason: 'tokenizer_error', detail: `tokenizer failed: ${e instanceof Error ? e.message : String(e)}` };
}

export function tooLong(chars: number): { readonly ok: false; readonly reason: 'too_long'; readonly detail: string } {
  return { ok: false, reason: 'too_long', detail: `prompt of ${chars} characters is above the ${MAX_TOKENIZE_CHARS}-character tokenize limit` };
}
