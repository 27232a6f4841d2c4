/**
 * Request → token ids, the same way the engine gets them (tokenization.md §2), shared by
 * router-svc and the engine simulator so a routed chat is credited with the blocks the engine
 * will publish. `completion` encodes a text prompt with special tokens added; `chat` renders the
 * template and encodes without adding them. Anything that prevents ids is an outcome with a
 * reason, never a throw: the caller routes by load and counts it (§4).
 */
import { availableParallelism } from 'node:os';
import { ChatTemplate, TemplateRenderError } from './chat-template.js';
import { RenderPool } from './render-pool.js';
import type { ChatRequest } from './chat-request.js';
import { TokenEncoder } from './token-encoder.js';
import { readTokenizerFiles } from './tokenizer-files.js';

/**
 * Longest text tokenized (UTF-16 units): 1 Mi characters is about 260k tokens, twice the largest
 * context of current models (Qwen3: 131072), and about half a second of one thread-pool thread.
 * A longer prompt cannot be served by any engine whole; it is routed by load (`too_long`).
 */
export const MAX_TOKENIZE_CHARS = 1024 * 1024;

/**
 * Most messages rendered: the template runs on the event loop (@huggingface/jinja, about 50–100 µs
 * per message for Qwen3's template on this machine), so an 8 MiB body of tiny messages must not
 * hold it for seconds. 4096 messages is far beyond real conversations (agents rarely pass 500).
 */
export const MAX_CHAT_MESSAGES = 4096;

/** Why a text request got no token ids (the `reason` label of router_untokenized_requests_total). */
export const UNTOKENIZED_REASONS = ['no_tokenizer', 'no_chat_template', 'template_error', 'non_text_content', 'too_long', 'tokenizer_error'] as const;
export type UntokenizedReason = (typeof UNTOKENIZED_REASONS)[number];

export type TokenizeOutcome =
  | { readonly ok: true; readonly tokenIds: number[] }
  | { readonly ok: false; readonly reason: UntokenizedReason; readonly detail: string };

/** What `/v1/status` shows of the tokenizer in use. */
export interface TokenizerInfo {
  readonly path: string;
  readonly vocab_size: number;
  /** sha256 of tokenizer.json + chat template (hex). */
  readonly fingerprint: string;
  /** Where the chat template came from; '' when there is none (chat requests are then untokenized). */
  readonly chat_template: string;
  /** Rendered chats are encoded piecewise through the segment cache. */
  readonly segment_cache: boolean;
  /** Worker threads rendering chat templates; 0: rendered on the event loop. */
  readonly render_threads: number;
}

/** Render threads for a service: the cores beside the event loop's, at least 1, at most 4. */
export function defaultRenderThreads(): number {
  return Math.min(4, Math.max(1, availableParallelism() - 1));
}

export interface PromptTokenizerOptions {
  /** Worker threads rendering chat templates (render-pool.ts); 0 (default) renders on the calling thread. */
  readonly renderThreads?: number;
}

export class PromptTokenizer {
  private constructor(
    private readonly encoder: TokenEncoder,
    private readonly template: ChatTemplate | null,
    private readonly pool: RenderPool | null,
    readonly info: TokenizerInfo,
  ) {}

  /** Reads `--tokenizer` DIR (and `--chat_template` FILE, '' for none); throws ConfigError naming the file. */
  static load(dir: string, chatTemplateFile: string, opts: PromptTokenizerOptions = {}): PromptTokenizer {
    const files = readTokenizerFiles(dir, chatTemplateFile);
    const encoder = TokenEncoder.fromJson(files.tokenizerJson, `${files.dir}/tokenizer.json`);
    // Compiled here even with a pool: a syntax error is a start-up error in this thread.
    const template = files.chatTemplate === null ? null : new ChatTemplate(files.chatTemplate, files.chatTemplateSource, files.config);
    const threads = opts.renderThreads ?? 0;
    const pool =
      template === null || threads === 0 ? null : new RenderPool({ source: files.chatTemplate!, sourcePath: files.chatTemplateSource, config: files.config }, threads);
    return new PromptTokenizer(encoder, template, pool, {
      path: files.dir,
      vocab_size: encoder.vocabSize,
      fingerprint: files.fingerprint,
      chat_template: files.chatTemplateSource,
      segment_cache: encoder.segmented,
      render_threads: pool?.size ?? 0,
    });
  }

  /** Stops the render threads (they never hold a process open; tests and benchmarks close them). */
  async close(): Promise<void> {
    await this.pool?.close();
  }

  get hasChatTemplate(): boolean {
    return this.template !== null;
  }

  get cacheStats(): TokenEncoder['cacheStats'] {
    return this.encoder.cacheStats;
  }

  /**
   * `/v1/completions` text: `encode(prompt)` with the tokenizer's special tokens added, unless the
   * request says `add_special_tokens: false` (vLLM's extra parameter).
   */
  async completion(text: string, addSpecialTokens = true): Promise<TokenizeOutcome> {
    if (text.length > MAX_TOKENIZE_CHARS) return tooLong(text.length);
    return this.encoded(() => this.encoder.encode(text, addSpecialTokens));
  }

  /** `/v1/chat/completions`: the rendered template, encoded without adding special tokens. */
  async chat(request: ChatRequest): Promise<TokenizeOutcome> {
    if (request.firstNonTextMessage >= 0) {
      return { ok: false, reason: 'non_text_content', detail: `messages[${request.firstNonTextMessage}] has non-text content parts (multimodal blocks are not credited)` };
    }
    if (this.template === null) return { ok: false, reason: 'no_chat_template', detail: 'the tokenizer directory has no chat template and no --chat_template was given' };
    // Checked before rendering, which costs per message and per character.
    if (request.textChars > MAX_TOKENIZE_CHARS) return tooLong(request.textChars);
    if (request.messages.length > MAX_CHAT_MESSAGES) {
      return { ok: false, reason: 'too_long', detail: `${request.messages.length} messages is above the ${MAX_CHAT_MESSAGES}-message render limit` };
    }
    let rendered: string;
    try {
      rendered = this.pool !== null ? await this.pool.render(request) : this.template.render(request);
    } catch (e) {
      if (e instanceof TemplateRenderError) return { ok: false, reason: 'template_error', detail: e.message };
      throw e;
    }
    if (rendered.length > MAX_TOKENIZE_CHARS) return tooLong(rendered.length);
    // vLLM's `add_special_tokens: true` on a chat adds them again (e.g. a second BOS): encoded whole, as it does.
    return this.encoded(() => (request.addSpecialTokens ? this.encoder.encode(rendered, true) : this.encoder.encodeRendered(rendered)));
  }

  /** The rendered prompt text (tests and diagnostics); throws TemplateRenderError. */
  render(request: ChatRequest): string {
    if (this.template === null) throw new TemplateRenderError('no chat template');
    return this.template.render(request);
  }

  private async encoded(encode: () => Promise<number[]>): Promise<TokenizeOutcome> {
    try {
      return { ok: true, tokenIds: await encode() };
    } catch (e) {
      return { ok: false, reason: 'tokenizer_error', detail: `tokenizer failed: ${e instanceof Error ? e.message : String(e)}` };
    }
  }
}

function tooLong(chars: number): TokenizeOutcome {
  return { ok: false, reason: 'too_long', detail: `prompt of ${chars} characters is above the ${MAX_TOKENIZE_CHARS}-character tokenize limit` };
}
