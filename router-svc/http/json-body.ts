/**
 * Reads a request body under a size limit while it streams in (routing.md: over 8 MiB is 413), so
 * an oversized upload is never buffered whole, then parses it as JSON (malformed is 400).
 */
import type { IncomingMessage } from 'node:http';
import { declaredBodyBytes, readBoundedBody } from '../../shared/http/bounded-body.js';
import { badRequest, tooLarge } from './router-http-errors.js';

/** routing.md "HTTP API": request bodies over 8 MiB get 413. */
export const MAX_BODY_BYTES = 8 * 1024 * 1024;

/**
 * Past this many bytes an oversized body is no longer drained: the 413 goes out and the
 * connection is closed, so a client streaming gigabytes cannot keep the router busy.
 */
const DRAIN_LIMIT_BYTES = 64 * 1024 * 1024;

/** A body and its parse; `raw` is kept so the proxy forwards exactly the bytes it received. */
export interface JsonBody {
  readonly raw: Buffer;
  readonly json: unknown;
}

/**
 * The whole body, or a `too_large` RouterHttpError once more than `maxBytes` arrived (or were
 * declared by Content-Length). The rest of an oversized body is drained and dropped (up to
 * DRAIN_LIMIT_BYTES), so the client reads the 413 rather than a reset; the server answers a 413
 * with `Connection: close` because the drain may have stopped early.
 */
export async function readBody(req: IncomingMessage, maxBytes: number): Promise<Buffer> {
  if (declaredBodyBytes(req) > DRAIN_LIMIT_BYTES) {
    req.resume();
    throw tooLarge(maxBytes);
  }
  const body = await readBoundedBody(req, maxBytes, DRAIN_LIMIT_BYTES);
  if (body.kind === 'read_failed') throw badRequest('request body could not be read');
  if (body.kind === 'too_large') throw tooLarge(maxBytes);
  return body.bytes;
}

/** `readBody` then `parseJsonBody`. */
export async function readJsonBody(req: IncomingMessage, maxBytes: number = MAX_BODY_BYTES): Promise<JsonBody> {
  const raw = await readBody(req, maxBytes);
  return { raw, json: parseJsonBody(raw) };
}

/** `JSON.parse` of a UTF-8 body; an empty or malformed body is a 400. */
export function parseJsonBody(raw: Buffer): unknown {
  if (raw.length === 0) throw badRequest('body is empty: expected a JSON object');
  try {
    return JSON.parse(raw.toString('utf8'));
  } catch {
    throw badRequest('body is not valid JSON');
  }
}
