/**
 * Reads an HTTP request body under a byte limit while it streams in, so an oversized upload is
 * never buffered whole: past `maxBytes` (or when Content-Length already says so) the chunks read
 * so far are dropped and the rest is drained, so the client reads the refusal instead of a reset.
 * Each server maps the outcome to its own status and error body.
 */
import type { IncomingMessage } from 'node:http';

/** The body, or why there is none; `byteCount` is how many bytes arrived before the outcome. */
export type BoundedBody =
  | { readonly kind: 'complete'; readonly bytes: Buffer }
  | { readonly kind: 'too_large'; readonly byteCount: number }
  | { readonly kind: 'read_failed'; readonly error: unknown; readonly byteCount: number };

/** The Content-Length the client declared, or NaN when absent or not a finite number (then no comparison holds). */
export function declaredBodyBytes(req: IncomingMessage): number {
  const declared = Number(req.headers['content-length'] ?? Number.NaN);
  return Number.isFinite(declared) ? declared : Number.NaN;
}

/**
 * Reads `req` to its end, keeping at most `maxBytes`. An oversized body is drained until its end,
 * or only until `drainLimitBytes` arrived (then reading stops, and the caller should close the
 * connection with its answer).
 */
export async function readBoundedBody(req: IncomingMessage, maxBytes: number, drainLimitBytes = Number.POSITIVE_INFINITY): Promise<BoundedBody> {
  let over = declaredBodyBytes(req) > maxBytes;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of req as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (over) {
        if (total > drainLimitBytes) break;
        continue;
      }
      if (total > maxBytes) {
        over = true;
        chunks.length = 0;
        continue;
      }
      chunks.push(chunk);
    }
  } catch (e) {
    return { kind: 'read_failed', error: e, byteCount: total };
  }
  if (over) return { kind: 'too_large', byteCount: total };
  return { kind: 'complete', bytes: chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, total) };
}
