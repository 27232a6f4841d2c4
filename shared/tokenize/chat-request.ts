/**
 * The fields of an OpenAI `/v1/chat/completions` body that decide its rendered prompt, checked
 * and normalised as vLLM's OpenAI server does before applying the chat template
 * (tokenization.md §2). Pure: parsed JSON in, a ChatRequest out, or a PromptShapeError naming the
 * field (the router and the engine simulator answer it as a 400).
 *
 * Content: a string, null (an assistant turn holding only tool calls: ""), or a list of parts.
 * Text parts are kept as the template expects them (contentFormat "string": joined with "\n",
 * vLLM's rule; "openai": the list of `{type:"text",text}` parts, a string becoming one part).
 * Any other part (image_url, input_audio, ...) makes the request out of scope for cache credit:
 * multimodal blocks carry extra keys this router does not derive.
 */
import { PlainMessageError } from '../errors/domain-error.js';

export class PromptShapeError extends PlainMessageError {
  readonly class = 'prompt_shape' as const;

  constructor(
    detail: string,
    /** The request's top-level field at fault (an OpenAI error's `param`); null when it is a pair of them. */
    readonly param: string | null,
  ) {
    super(detail);
  }
}

export type ContentFormat = 'string' | 'openai';

export interface ChatRequest {
  /** Messages as the template sees them; content normalised to `contentFormat` at render time. */
  readonly messages: readonly ChatMessage[];
  readonly addGenerationPrompt: boolean;
  readonly continueFinalMessage: boolean;
  /** `tools` normalised to vLLM's dump (`{type, function:{name, description, parameters}}`), or undefined. */
  readonly tools: readonly unknown[] | undefined;
  readonly documents: readonly unknown[] | undefined;
  /** vLLM's `add_special_tokens` for chat (default false: the template already holds them). */
  readonly addSpecialTokens: boolean;
  /** `chat_template_kwargs` (e.g. `enable_thinking`), passed to the template. */
  readonly templateKwargs: Readonly<Record<string, unknown>>;
  /** Characters of text content, for the estimate when nothing can be tokenized. */
  readonly textChars: number;
  /** Index of the first message with a non-text part, or -1 (out of scope for credit). */
  readonly firstNonTextMessage: number;
  /** `conversationKey` of these messages: the same for every turn of a conversation. */
  readonly conversation: number;
}

export interface ChatMessage {
  /** Every field of the client's message except content (role, name, tool_calls, tool_call_id, ...). */
  readonly fields: Readonly<Record<string, unknown>>;
  /** The text parts in order; null content is []. */
  readonly texts: readonly string[];
  /** The client sent a plain string (openai format wraps it as one part, string format keeps it). */
  readonly plain: boolean;
}

export function parseChatRequest(body: Readonly<Record<string, unknown>>): ChatRequest {
  const raw = body['messages'];
  if (!Array.isArray(raw) || raw.length === 0) throw new PromptShapeError('messages must be a non-empty array of messages', 'messages');
  const messages: ChatMessage[] = [];
  let textChars = 0;
  let firstNonTextMessage = -1;
  for (let i = 0; i < raw.length; i++) {
    const m: unknown = raw[i];
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw new PromptShapeError(`messages[${i}] must be an object`, 'messages');
    const o = m as Record<string, unknown>;
    if (typeof o['role'] !== 'string' || o['role'] === '') throw new PromptShapeError(`messages[${i}].role must be a non-empty string`, 'messages');
    const { content, ...fields } = o;
    const texts: string[] = [];
    let plain = false;
    if (typeof content === 'string') {
      texts.push(content);
      plain = true;
    } else if (Array.isArray(content)) {
      for (let p = 0; p < content.length; p++) {
        const part: unknown = content[p];
        if (typeof part !== 'object' || part === null) throw new PromptShapeError(`messages[${i}].content[${p}] must be an object`, 'messages');
        const po = part as Record<string, unknown>;
        if (typeof po['type'] !== 'string') throw new PromptShapeError(`messages[${i}].content[${p}].type must be a string`, 'messages');
        if (po['type'] === 'text') {
          if (typeof po['text'] !== 'string') throw new PromptShapeError(`messages[${i}].content[${p}].text must be a string`, 'messages');
          texts.push(po['text']);
        } else if (firstNonTextMessage < 0) {
          firstNonTextMessage = i;
        }
      }
    } else if (content !== undefined && content !== null) {
      throw new PromptShapeError(`messages[${i}].content must be a string, an array of content parts or null`, 'messages');
    }
    for (const t of texts) textChars += t.length;
    messages.push({ fields: withParsedToolArguments(fields, i), texts, plain });
  }
  const agp = optionalBool(body, 'add_generation_prompt');
  const cfm = optionalBool(body, 'continue_final_message') ?? false;
  // vLLM refuses the pair (400): a generation prompt after a message being continued is contradictory.
  if (agp === true && cfm) throw new PromptShapeError('add_generation_prompt and continue_final_message cannot both be true', null);
  const kwargs = body['chat_template_kwargs'];
  if (kwargs !== undefined && kwargs !== null && (typeof kwargs !== 'object' || Array.isArray(kwargs))) throw new PromptShapeError('chat_template_kwargs must be an object', 'chat_template_kwargs');
  const documents = body['documents'];
  if (documents !== undefined && documents !== null && !Array.isArray(documents)) throw new PromptShapeError('documents must be an array', 'documents');
  return {
    messages,
    addGenerationPrompt: agp ?? !cfm,
    continueFinalMessage: cfm,
    tools: parseTools(body['tools']),
    documents: Array.isArray(documents) ? documents : undefined,
    addSpecialTokens: optionalBool(body, 'add_special_tokens') ?? false,
    templateKwargs: (kwargs ?? {}) as Record<string, unknown>,
    textChars,
    firstNonTextMessage,
    conversation: conversationKey(messages),
  };
}

/** A message's template value: its fields with content in the template's format. */
export function templateMessage(m: ChatMessage, format: ContentFormat): Record<string, unknown> {
  const texts = m.texts;
  const content = format === 'string' ? (texts.length === 1 ? texts[0]! : texts.join('\n')) : texts.map((text) => ({ type: 'text', text }));
  // A for-in copy, not `{ ...fields, content }`: the spread of these rest-destructured objects
  // was 0.5 µs per message (34 µs of a 66-message chat's render), the loop 0.05. Same own keys,
  // same order; an own "__proto__" key (JSON.parse makes one) would set the prototype, so it spreads.
  const out: Record<string, unknown> = {};
  for (const k in m.fields) {
    if (k === '__proto__') return { ...m.fields, content };
    out[k] = m.fields[k];
  }
  out['content'] = content;
  return out;
}

/**
 * vLLM (following transformers' maintainers) gives templates tool-call arguments as objects, not
 * JSON strings: `{"a":1}` is parsed, so the template's `tojson` prints it in its own spacing.
 */
function withParsedToolArguments(fields: Record<string, unknown>, i: number): Record<string, unknown> {
  const calls = fields['tool_calls'];
  if (fields['role'] !== 'assistant' || !Array.isArray(calls)) return fields;
  const parsed = calls.map((call: unknown, c) => {
    if (typeof call !== 'object' || call === null) throw new PromptShapeError(`messages[${i}].tool_calls[${c}] must be an object`, 'messages');
    const fn = (call as Record<string, unknown>)['function'];
    if (typeof fn !== 'object' || fn === null) return call;
    const args = (fn as Record<string, unknown>)['arguments'];
    if (typeof args !== 'string') return call;
    let value: unknown;
    try {
      value = JSON.parse(args);
    } catch {
      throw new PromptShapeError(`messages[${i}].tool_calls[${c}].function.arguments must be a JSON string`, 'messages');
    }
    return { ...(call as Record<string, unknown>), function: { ...(fn as Record<string, unknown>), arguments: value } };
  });
  return { ...fields, tool_calls: parsed };
}

/** vLLM's ChatCompletionToolsParam dump: `{type, function: {name, description, parameters}}`, absent fields null. */
function parseTools(value: unknown): readonly unknown[] | undefined {
  if (value === undefined || value === null) return undefined;
  if (!Array.isArray(value)) throw new PromptShapeError('tools must be an array', 'tools');
  return value.map((t: unknown, i) => {
    if (typeof t !== 'object' || t === null) throw new PromptShapeError(`tools[${i}] must be an object`, 'tools');
    const fn = (t as Record<string, unknown>)['function'];
    if (typeof fn !== 'object' || fn === null) throw new PromptShapeError(`tools[${i}].function must be an object`, 'tools');
    const f = fn as Record<string, unknown>;
    if (typeof f['name'] !== 'string') throw new PromptShapeError(`tools[${i}].function.name must be a string`, 'tools');
    return { type: 'function', function: { name: f['name'], description: f['description'] ?? null, parameters: f['parameters'] ?? null } };
  });
}

export function optionalBool(body: Readonly<Record<string, unknown>>, field: string): boolean | undefined {
  const v = body[field];
  if (v === undefined || v === null) return undefined;
  if (typeof v !== 'boolean') throw new PromptShapeError(`${field} must be a boolean`, field);
  return v;
}

/** Characters of the first two messages that name a conversation. */
const CONVERSATION_KEY_CHARS = 256;

/**
 * FNV-1a over the start of the first two messages' text, computed once per request: the same for
 * every turn of a conversation (its chat thread, and the previous turn whose ids it extends). Conversations with
 * the same start share a key, which costs only cache reuse, never correctness.
 */
function conversationKey(messages: readonly ChatMessage[]): number {
  let h = 0x811c9dc5;
  for (let m = 0; m < 2 && m < messages.length; m++) {
    const text = messages[m]!.texts[0] ?? '';
    const n = Math.min(text.length, CONVERSATION_KEY_CHARS);
    for (let i = 0; i < n; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  }
  return h >>> 0;
}
