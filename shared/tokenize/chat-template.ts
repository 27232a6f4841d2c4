/**
 * A model's chat template rendered with `@huggingface/jinja` the way transformers'
 * `apply_chat_template` (which vLLM's OpenAI server calls) renders it (tokenization.md §2): the
 * messages, `add_generation_prompt`, `tools`, `documents`, the request's `chat_template_kwargs`
 * and the special-token variables of tokenizer_config.json (`bos_token`, `eos_token`, ... as
 * strings, AddedToken objects by their content). With `continue_final_message` the text is cut
 * right after the final message's content, transformers' rule, so the model continues it.
 *
 * The template is parsed once at start-up (a syntax error is a ConfigError naming its file) and
 * compiled to closures (compiled-template.ts) unless it uses something the compiler does not
 * model; the interpreter checks the compiled form and takes over on any difference
 * (shadow-checked-renderer.ts). A render that fails for one request throws TemplateRenderError
 * with the interpreter's message, and only that request loses its credit.
 */
import { Template } from '@huggingface/jinja';
import { ConfigError } from '../config/config-error.js';
import { PlainMessageError } from '../errors/domain-error.js';
import { templateMessage, type ChatRequest, type ContentFormat } from './chat-request.js';
import { CompiledTemplate, TemplateDeclined } from './compiled-template.js';
import { firstLine, ShadowCheckedRenderer, type Renderer, type TemplateEngineInfo } from './shadow-checked-renderer.js';

export class TemplateRenderError extends PlainMessageError {
  readonly class = 'template_error' as const;
}

/** tokenizer_config.json keys transformers hands the template (`special_tokens_map`). */
const SPECIAL_TOKEN_KEYS = ['bos_token', 'eos_token', 'unk_token', 'sep_token', 'pad_token', 'cls_token', 'mask_token'] as const;

/**
 * vLLM's content-format detection, simplified: a template that loops over a message's content
 * expects the OpenAI list of parts; any other gets the text parts joined into one string.
 */
const CONTENT_LOOP = /\{%-?\s*for\s+\w+\s+in\s+[\w.]*(?:\.content|\[\s*['"]content['"]\s*\])\s*-?%\}/;

export interface ChatTemplateOptions {
  /** false: always the interpreter (benchmarks compare the two); default true. */
  readonly compile?: boolean;
  /** Told once when the shadow check switches the compiled form off. */
  readonly onSwitchOff?: (reason: string) => void;
  /** Replaces the compiled form (tests: a deliberately wrong one shows the shadow check at work). */
  readonly compiledForTest?: Renderer;
}

export class ChatTemplate {
  readonly contentFormat: ContentFormat;
  private readonly renderer: ShadowCheckedRenderer;
  private readonly specialTokens: Readonly<Record<string, unknown>>;

  constructor(source: string, sourcePath: string, config: Readonly<Record<string, unknown>>, opts: ChatTemplateOptions = {}) {
    let template: Template;
    try {
      template = new Template(source);
    } catch (e) {
      const reason = `chat template does not parse (${e instanceof Error ? e.message.split('\n', 1)[0] : 'error'})`;
      throw new ConfigError('--chat_template', reason, `invalid chat template ${sourcePath}: ${reason}`);
    }
    let compiled: Renderer | null = null;
    let declined: string | null = null;
    if (opts.compiledForTest !== undefined) compiled = opts.compiledForTest;
    else if (opts.compile === false) declined = 'compilation turned off';
    else {
      try {
        compiled = CompiledTemplate.compile(template.parsed);
      } catch (e) {
        if (!(e instanceof TemplateDeclined)) throw e;
        declined = `the compiler does not support ${e.message}`;
      }
    }
    this.renderer = new ShadowCheckedRenderer(template, compiled, declined, opts.onSwitchOff);
    this.contentFormat = CONTENT_LOOP.test(source) ? 'openai' : 'string';
    this.specialTokens = specialTokenVariables(config);
  }

  /** Compiled or interpreted, and the shadow check's counters. */
  get engine(): TemplateEngineInfo {
    return this.renderer.info;
  }

  /** Another thread rendering this template found a difference: interpret from now on. */
  switchOff(reason: string): void {
    this.renderer.switchOff(reason);
  }

  /** The prompt text the engine builds for `request`. */
  render(request: ChatRequest): string {
    const messages = request.messages.map((m) => templateMessage(m, this.contentFormat));
    const vars: Record<string, unknown> = {
      ...this.specialTokens,
      messages,
      add_generation_prompt: request.addGenerationPrompt,
    };
    if (request.tools !== undefined) vars['tools'] = request.tools;
    if (request.documents !== undefined) vars['documents'] = request.documents;
    // vLLM: request kwargs override the defaults (but never the messages themselves).
    for (const [k, v] of Object.entries(request.templateKwargs)) if (k !== 'messages') vars[k] = v;
    let text: string;
    try {
      text = this.renderer.render(vars);
    } catch (e) {
      // One line: it becomes the `/v1/route` reason and a log field.
      throw new TemplateRenderError(`chat template failed: ${firstLine(e)}`);
    }
    return request.continueFinalMessage ? cutAfterFinalMessage(text, request, this.contentFormat) : text;
  }
}

/**
 * transformers' continue_final_message: the last text of the final message must appear in the
 * rendering; cut right after its last occurrence, keeping its leading/trailing spacing only when
 * the template kept it.
 */
function cutAfterFinalMessage(rendered: string, request: ChatRequest, format: ContentFormat): string {
  const last = request.messages[request.messages.length - 1]!;
  // vLLM hands a string-format template the joined text; an openai-format one the parts, of which transformers takes the last text.
  const final = format === 'string' ? (last.texts.length === 0 ? undefined : last.texts.join('\n')) : last.texts[last.texts.length - 1];
  if (final === undefined) throw new TemplateRenderError('continue_final_message is set but the final message has no text to continue');
  const stripped = final.trim();
  const at = rendered.lastIndexOf(stripped);
  if (at < 0) throw new TemplateRenderError('continue_final_message is set but the final message does not appear in the rendered chat');
  const leftStripped = final.trimStart();
  if (rendered.slice(at, at + leftStripped.length) === final) return rendered.slice(0, at + leftStripped.length);
  return rendered.slice(0, at + stripped.length);
}

function specialTokenVariables(config: Readonly<Record<string, unknown>>): Record<string, unknown> {
  const vars: Record<string, unknown> = {};
  for (const key of SPECIAL_TOKEN_KEYS) {
    const v = tokenContent(config[key]);
    if (v !== null) vars[key] = v;
  }
  const extra = config['additional_special_tokens'];
  if (Array.isArray(extra)) vars['additional_special_tokens'] = extra.map(tokenContent).filter((t): t is string => t !== null);
  return vars;
}

/** A string, or an AddedToken object (`{"__type":"AddedToken","content":...}`) by its content. */
function tokenContent(v: unknown): string | null {
  if (typeof v === 'string') return v;
  if (typeof v === 'object' && v !== null && typeof (v as Record<string, unknown>)['content'] === 'string') return (v as Record<string, string>)['content']!;
  return null;
}
