/**
 * What the policy will see of a request, before tokenization (tokenization.md §2, routing.md
 * "OpenAI-compatible proxy" and `/v1/route`): token ids are used as they are; a text prompt or chat
 * messages are handed to the tokenizer (prompt-resolver.ts), with a ceil(chars/4) estimate for
 * when it cannot give ids. Pure: parsed JSON in, a PromptInput out, or a 400 naming the field.
 */
import { optionalBool, parseChatRequest, PromptShapeError, type ChatRequest } from '../../shared/tokenize/chat-request.js';
import { badRequest } from '../http/router-http-errors.js';
import { jsonObject, parseRouteRequest, parseTokenIds } from '../http/route-request.js';
import { firstInvalidTokenId } from '../../shared/keys/token-ids.js';
import type { RouteRequest } from '../policy/policy-types.js';

/**
 * Rough tokens per text character for the `promptTokens` estimate of untokenized text (SLO_AWARE
 * predicts TTFT from it). English BPE vocabularies average about 4 characters per token.
 */
const CHARS_PER_TOKEN = 4;

export type PromptInput =
  /** Ids from the client (or none: a token-id batch, routed by load). */
  | { readonly kind: 'token_ids'; readonly request: RouteRequest }
  | { readonly kind: 'text'; readonly text: string; readonly addSpecialTokens: boolean; readonly estimate: number }
  | { readonly kind: 'chat'; readonly chat: ChatRequest; readonly estimate: number };

/** `POST /v1/completions`: `prompt` is a string, an array of strings, token ids, or arrays of token ids. */
export function completionRouteInput(body: unknown): PromptInput {
  const o = jsonObject(body);
  return promptInput(o['prompt'], 'prompt', addSpecialTokens(o));
}

/**
 * `POST /v1/route`: `token_ids`, `prompt` (as /v1/completions) or `messages` (as
 * /v1/chat/completions), or `prompt_tokens` alone; with `prompt_tokens` beside token ids it is the
 * count taken as given (parseRouteRequest).
 */
export function routeEndpointInput(body: unknown): PromptInput {
  const o = jsonObject(body);
  const given = [o['token_ids'], o['prompt'], o['messages']].filter((v) => v !== undefined && v !== null).length;
  if (given > 1) throw badRequest('give one of token_ids, prompt or messages');
  if (o['messages'] !== undefined && o['messages'] !== null) return chatInput(o);
  if (o['prompt'] !== undefined && o['prompt'] !== null) return promptInput(o['prompt'], 'prompt', addSpecialTokens(o));
  return { kind: 'token_ids', request: parseRouteRequest(o) };
}

/** `POST /v1/chat/completions`: `messages` for the chat template. */
export function chatRouteInput(body: unknown): PromptInput {
  return chatInput(jsonObject(body));
}

export function chatInput(o: Readonly<Record<string, unknown>>): PromptInput {
  let chat: ChatRequest;
  try {
    chat = parseChatRequest(o);
  } catch (e) {
    if (e instanceof PromptShapeError) throw badRequest(e.message, e.param);
    throw e;
  }
  return { kind: 'chat', chat, estimate: Math.ceil(chat.textChars / CHARS_PER_TOKEN) };
}

/** A completions-style prompt named `field`; an array of strings is one request per string, routed by the first. */
export function promptInput(prompt: unknown, field: string, addSpecial = true): PromptInput {
  if (prompt === undefined || prompt === null) throw badRequest(`${field} is required: a string or an array of token ids`, field);
  if (typeof prompt === 'string') return textInput(prompt, addSpecial);
  if (!Array.isArray(prompt)) throw badRequest(`${field} must be a string, an array of strings or an array of token ids`, field);
  if (typeof prompt[0] === 'number') {
    // A token-id prompt: every element must be a token id (the 400 names the first bad index).
    const tokenIds = parseTokenIds(prompt, field);
    return { kind: 'token_ids', request: { tokenIds, promptTokens: tokenIds.length } };
  }
  let promptTokens = 0;
  for (let i = 0; i < prompt.length; i++) {
    const p: unknown = prompt[i];
    if (typeof p === 'string') promptTokens += estimateTokens(p);
    else if (Array.isArray(p) && isTokenIdArray(p)) promptTokens += p.length;
    else throw badRequest(`${field}[${i}] must be a string or an array of token ids in [0, 2^31)`, field);
  }
  // tokenization.md §2: an array of strings is routed by its first prompt.
  if (typeof prompt[0] === 'string') return textInput(prompt[0], addSpecial);
  // A batch of token arrays: one engine serves all of it; no single prefix to credit.
  return { kind: 'token_ids', request: { tokenIds: null, promptTokens } };
}

function textInput(text: string, addSpecial: boolean): PromptInput {
  return { kind: 'text', text, addSpecialTokens: addSpecial, estimate: estimateTokens(text) };
}

/** vLLM's `add_special_tokens` of a completions request (default true), or a 400. */
function addSpecialTokens(o: Readonly<Record<string, unknown>>): boolean {
  try {
    return optionalBool(o, 'add_special_tokens') ?? true;
  } catch (e) {
    if (e instanceof PromptShapeError) throw badRequest(e.message, e.param);
    throw e;
  }
}

function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Non-empty, and every element an integer in [0, 2^31) (routing.md token id range). */
function isTokenIdArray(a: readonly unknown[]): a is number[] {
  return a.length > 0 && firstInvalidTokenId(a) < 0;
}
