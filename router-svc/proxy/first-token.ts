/**
 * Whether the proxy sees a request's first token when the engine's answer starts (the TTFT
 * policy learns engine speed from that moment, route-decider.ts firstToken): a streamed answer
 * (`"stream": true`) sends its first chunk with the first token; a plain JSON answer comes whole,
 * after the last token, so only one that generates a single token (`max_tokens` or
 * `max_completion_tokens` 1) marks the first. Pure; anything else (a malformed field included) is
 * simply not timed.
 */
export function firstTokenVisible(body: unknown): boolean {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return false;
  const o = body as Record<string, unknown>;
  if (o['stream'] === true) return true;
  return o['max_tokens'] === 1 || o['max_completion_tokens'] === 1;
}
