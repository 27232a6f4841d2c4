/**
 * What the policy sees of an OpenAI-compatible request (routing.md "OpenAI-compatible proxy"):
 * a `prompt` given as an array of token ids is used for CAR directly; a text prompt or chat
 * messages are routed by queue cost alone (no token ids, so zero hit ratio) because the router has
 * no tokenizer. Pure: parsed JSON in, route input out, or a 400 naming the field.
 */
import { badRequest } from '../http/router-http-errors.js';
import { jsonObject, parseTokenIds, TOKEN_ID_LIMIT, type RouteRequest } from '../http/route-request.js';

/**
 * Rough tokens per text character for the `promptTokens` estimate of text prompts (SLO_AWARE
 * predicts TTFT from it). English BPE vocabularies average about 4 characters per token; the spec
 * leaves the estimate open and CAR does not use it.
 */
const CHARS_PER_TOKEN = 4;

/** `POST /v1/completions`: `prompt` is a string, an array of strings, token ids, or arrays of token ids. */
export function completionRouteInput(body: unknown): RouteRequest {
  const o = jsonObject(body);
  const prompt = o['prompt'];
  if (prompt === undefined || prompt === null) throw badRequest('prompt is required: a string or an array of token ids');
  if (typeof prompt === 'string') return { tokenIds: null, promptTokens: estimateTokens(prompt) };
  if (!Array.isArray(prompt)) throw badRequest('prompt must be a string, an array of strings or an array of token ids');
  if (typeof prompt[0] === 'number') {
    // A token-id prompt: every element must be a token id (the 400 names the first bad index).
    const tokenIds = parseTokenIds(prompt, 'prompt');
    return { tokenIds, promptTokens: tokenIds.length };
  }
  // A batch (strings or token arrays): one engine serves all of it; no single prefix to credit.
  let promptTokens = 0;
  for (let i = 0; i < prompt.length; i++) {
    const p: unknown = prompt[i];
    if (typeof p === 'string') promptTokens += estimateTokens(p);
    else if (Array.isArray(p) && isTokenIdArray(p)) promptTokens += p.length;
    else throw badRequest(`prompt[${i}] must be a string or an array of token ids in [0, 2^31)`);
  }
  return { tokenIds: null, promptTokens };
}

/** `POST /v1/chat/completions`: `messages` text is estimated; no chat template, so no token ids. */
export function chatRouteInput(body: unknown): RouteRequest {
  const o = jsonObject(body);
  const messages = o['messages'];
  if (!Array.isArray(messages)) throw badRequest('messages must be an array of messages');
  let chars = 0;
  for (let i = 0; i < messages.length; i++) {
    const m: unknown = messages[i];
    if (typeof m !== 'object' || m === null || Array.isArray(m)) throw badRequest(`messages[${i}] must be an object`);
    const content = (m as Record<string, unknown>)['content'];
    if (typeof content === 'string') chars += content.length;
    else if (Array.isArray(content)) {
      // Content parts: only text parts count towards the estimate.
      for (const part of content) {
        const text = typeof part === 'object' && part !== null ? (part as Record<string, unknown>)['text'] : undefined;
        if (typeof text === 'string') chars += text.length;
      }
    }
  }
  return { tokenIds: null, promptTokens: Math.ceil(chars / CHARS_PER_TOKEN) };
}

function estimateTokens(text: string): number {
  return Math.ceil(text.length / CHARS_PER_TOKEN);
}

/** Non-empty, and every element an integer in [0, 2^31) (routing.md token id range). */
function isTokenIdArray(a: readonly unknown[]): a is number[] {
  if (a.length === 0) return false;
  for (let i = 0; i < a.length; i++) {
    const t = a[i];
    if (typeof t !== 'number' || !Number.isInteger(t) || t < 0 || t >= TOKEN_ID_LIMIT) return false;
  }
  return true;
}
