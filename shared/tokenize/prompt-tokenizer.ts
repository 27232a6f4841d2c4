/**
 * Request → token ids, the same way the engine gets them (tokenization.md §2), shared by
 * router-svc and the engine simulator so a routed chat is credited with the blocks the engine
 * will publish. `completion` encodes a text prompt with special tokens added; `chat` renders the
 * template and encodes without adding them. Anything that prevents ids is an outcome with a
 * reason, never a throw: the caller routes by load and counts it (§4).
 */
import { availableParallelism } from 'node:os';
import { ChatTemplate, TemplateRenderError } from './chat-template.js';
import { ChatPool } from './chat-pool.js';
import type { ChatRequest } from './chat-request.js';
import { asTokenizeOutcome, encodeOutcome, MAX_TOKENIZE_CHARS, renderAndEncode, tooLong, type TokenizeOutcome } from './chat-encoding.js';
import { DEFAULT_SEGMENT_CACHE_BYTES, sumCacheStats, TokenEncoder, type SegmentCacheStats } from './token-encoder.js';
import { readTokenizerFiles, type TokenizerOrigin } from './tokenizer-files.js';
import type { TemplateEngineInfo } from './shadow-checked-renderer.js';

/**
 * Most messages rendered: rendering costs per message (@huggingface/jinja, a few µs per message
 * for Qwen3's template on this machine), so an 8 MiB body of tiny messages must not hold a thread
 * for seconds. 4096 messages is far beyond real conversations (agents rarely pass 500).
 */
export const MAX_CHAT_MESSAGES = 4096;

/**
 * Largest chat the calling thread renders itself when every chat thread is busy (chat-pool.ts
 * `encodeIfRoom`): about 1.5 ms of interpreted rendering on this machine (0.43 ms for 67 messages
 * and 35k characters; compiled, 0.1-0.2 ms), so an event loop that takes overflow work still
 * answers within a few ms. Larger chats always wait for a chat thread.
 */
const CALLER_RUNS_MAX_CHARS = 128 * 1024;
const CALLER_RUNS_MAX_MESSAGES = 256;

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
  /** Worker threads rendering and encoding chats; 0: on the event loop. */
  readonly render_threads: number;
  /**
   * The chat template compiled or interpreted, why, and the shadow check's counters over every
   * thread (shadow-checked-renderer.ts); null without a chat template. Read live.
   */
  readonly template_engine?: TemplateEngineInfo | null;
}

/**
 * Chat threads for a service: none on two cores or fewer, else the cores beside the event
 * loop's, at most 4. With the template compiled, an 8k-token chat costs the event loop about
 * what an 8k token-id request does (~0.9 ms of CPU: parse, render, encode), and on two cores a
 * chat thread cost more than it saved (bench/route, README "Tokenization"): each chat is cloned
 * to it and back, and a conversation whose turns alternate between it and the overflowing event
 * loop loses the previous-turn reuse of the segment cache (2.0-2.1 ms of CPU per chat with one
 * thread, 1.3-1.6 ms with none). Larger machines keep the threads (not measured here).
 */
export function defaultRenderThreads(): number {
  const cores = availableParallelism();
  return cores <= 2 ? 0 : Math.min(4, cores - 1);
}

export interface PromptTokenizerOptions {
  /** Worker threads rendering and encoding chats (chat-pool.ts); 0 (default): the calling thread. */
  readonly renderThreads?: number;
  /** false: the chat template is always interpreted (benchmarks compare); default true. */
  readonly compileTemplate?: boolean;
  /** Told once when the shadow check switches the compiled template off (the router logs it). */
  readonly onTemplateSwitchOff?: (reason: string) => void;
  /** The segment caches' budget over this thread and the chat threads; default DEFAULT_SEGMENT_CACHE_BYTES. */
  readonly segmentCacheBytes?: number;
  /** Where the directory and template were named, for start-up errors; default `--tokenizer`/`--chat_template`. */
  readonly origin?: TokenizerOrigin;
}

function sum(all: readonly TemplateEngineInfo[], key: 'renders' | 'shadow_checks' | 'interpreted_renders' | 'mismatches'): number {
  let n = 0;
  for (const e of all) n += e[key];
  return n;
}

export class PromptTokenizer {
  private callerRendered = 0;

  private constructor(
    private readonly encoder: TokenEncoder,
    private readonly template: ChatTemplate | null,
    private readonly pool: ChatPool | null,
    readonly info: TokenizerInfo,
  ) {}

  /** Reads `--tokenizer` DIR (and `--chat_template` FILE, '' for none); throws ConfigError naming the file. */
  static load(dir: string, chatTemplateFile: string, opts: PromptTokenizerOptions = {}): PromptTokenizer {
    const files = readTokenizerFiles(dir, chatTemplateFile, opts.origin);
    const threads = opts.renderThreads ?? 0;
    // The segment-cache budget is shared by this thread and the chat threads (each takes overflow chats).
    const cacheShare = Math.floor((opts.segmentCacheBytes ?? DEFAULT_SEGMENT_CACHE_BYTES) / (threads + 1));
    const encoder = TokenEncoder.fromJson(files.tokenizerJson, `${files.dir}/tokenizer.json`, cacheShare);
    const compile = opts.compileTemplate ?? true;
    const told = opts.onTemplateSwitchOff ?? (() => {});
    // One switch-off, wherever it is found, turns the compiled form off in this thread and every
    // chat thread; this thread's template tells `onTemplateSwitchOff`, once.
    let pool: ChatPool | null = null;
    // Compiled here even with a pool: a syntax error is a start-up error in this thread.
    const template =
      files.chatTemplate === null
        ? null
        : new ChatTemplate(files.chatTemplate, files.chatTemplateSource, files.config, {
            compile,
            onSwitchOff: (reason) => {
              pool?.switchOff(reason);
              told(reason);
            },
          });
    if (template !== null && threads > 0) {
      pool = new ChatPool(
        {
          source: files.chatTemplate!,
          sourcePath: files.chatTemplateSource,
          config: files.config,
          tokenizerJson: files.tokenizerJson,
          tokenizerPath: `${files.dir}/tokenizer.json`,
          cacheBytes: cacheShare,
          compileTemplate: compile,
        },
        threads,
        (reason) => template.switchOff(reason),
      );
    }
    const info: TokenizerInfo = {
      path: files.dir,
      vocab_size: encoder.vocabSize,
      fingerprint: files.fingerprint,
      chat_template: files.chatTemplateSource,
      segment_cache: encoder.segmented,
      render_threads: pool?.size ?? 0,
    };
    const tokenizer = new PromptTokenizer(encoder, template, pool, info);
    // A getter, enumerable: `/v1/status` serialises this object on every request and sees the counters as they are.
    Object.defineProperty(info, 'template_engine', { enumerable: true, get: () => tokenizer.templateEngine });
    return tokenizer;
  }

  /** The chat template's engine over this thread and the chat threads; null without a template. */
  get templateEngine(): TemplateEngineInfo | null {
    if (this.template === null) return null;
    const own = this.template.engine;
    const all = [own, ...(this.pool?.engines ?? [])].filter((e): e is TemplateEngineInfo => e !== null);
    const off = all.find((e) => e.engine === 'interpreted');
    return {
      engine: off === undefined ? 'compiled' : 'interpreted',
      reason: off === undefined ? null : off.reason,
      renders: sum(all, 'renders'),
      shadow_checks: sum(all, 'shadow_checks'),
      interpreted_renders: sum(all, 'interpreted_renders'),
      mismatches: sum(all, 'mismatches'),
    };
  }

  /** Stops the render threads (they never hold a process open; tests and benchmarks close them). */
  async close(): Promise<void> {
    await this.pool?.close();
  }

  get hasChatTemplate(): boolean {
    return this.template !== null;
  }

  /** Chats this thread rendered because every chat thread was busy (0 without chat threads). */
  get overflowChats(): number {
    return this.callerRendered;
  }

  /** The segment caches of this thread and the chat threads together. */
  get cacheStats(): SegmentCacheStats {
    return this.pool === null ? this.encoder.cacheStats : sumCacheStats([this.encoder.cacheStats, this.pool.cacheStats]);
  }

  /**
   * `/v1/completions` text: `encode(prompt)` with the tokenizer's special tokens added, unless the
   * request says `add_special_tokens: false` (vLLM's extra parameter).
   */
  async completion(text: string, addSpecialTokens = true): Promise<TokenizeOutcome> {
    if (text.length > MAX_TOKENIZE_CHARS) return tooLong(text.length);
    return encodeOutcome(() => this.encoder.encode(text, addSpecialTokens));
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
    if (this.pool !== null) {
      const small = request.textChars <= CALLER_RUNS_MAX_CHARS && request.messages.length <= CALLER_RUNS_MAX_MESSAGES;
      const queued = small ? this.pool.encodeIfRoom(request) : this.pool.encode(request);
      if (queued !== null) return queued;
      this.callerRendered++;
    }
    return asTokenizeOutcome(await renderAndEncode(this.template, this.encoder, request));
  }

  /** The rendered prompt text (tests and diagnostics); throws TemplateRenderError. */
  render(request: ChatRequest): string {
    if (this.template === null) throw new TemplateRenderError('no chat template');
    return this.template.render(request);
  }
}
