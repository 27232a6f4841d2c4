/**
 * Limits for the services' internal HTTP ports, so one slow or hostile client cannot hold a
 * connection or memory for long: a header size cap (node's `maxHeaderSize`), a deadline for the
 * headers and one for the whole request (a body trickled byte by byte is cut off with 408), and
 * refusals node answers itself (431, 408, 400) written with a fixed JSON body — never a stack or
 * the parser's message.
 */
import type { Server, ServerOptions } from 'node:http';
import type { Socket } from 'node:net';

export interface HttpLimits {
  /** Largest request head (request line + headers); above it node answers 431. */
  readonly maxHeaderBytes: number;
  /** Headers must be complete this long after the first byte (408 otherwise). */
  readonly headersTimeoutMs: number;
  /** The whole request, body included, must arrive within this (408 otherwise). */
  readonly requestTimeoutMs: number;
  /**
   * How often node sweeps connections for the two deadlines (its default is 30 s, which would
   * let a slow body live up to 30 s past `requestTimeoutMs`). One pass walks the open sockets.
   */
  readonly checkIntervalMs: number;
}

/**
 * Heartbeats (~200 bytes every 500 ms) and health/metrics probes. 8 KiB of headers is ample for
 * any internal client (node's own default is 16 KiB).
 */
export const INTERNAL_HTTP_LIMITS: HttpLimits = Object.freeze({
  maxHeaderBytes: 8 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
});

/**
 * The MetaService: bodies up to 64 MiB (kvcm-meta §1.2), so the whole-request deadline leaves a
 * slow link a minute for the largest body.
 */
export const META_HTTP_LIMITS: HttpLimits = Object.freeze({
  maxHeaderBytes: 8 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  checkIntervalMs: 1_000,
});

/**
 * The router's public port: OpenAI clients carry bigger auth headers, and bodies reach 8 MiB
 * (routing.md), so the head cap is node's default and the body has a minute. The deadline covers
 * receiving the request only: a proxied generation may stream its response for much longer.
 */
export const ROUTER_HTTP_LIMITS: HttpLimits = Object.freeze({
  maxHeaderBytes: 16 * 1024,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 60_000,
  checkIntervalMs: 1_000,
});

/** `http.createServer` options enforcing `limits`. */
export function limitedServerOptions(limits: HttpLimits): ServerOptions {
  return {
    maxHeaderSize: limits.maxHeaderBytes,
    // node requires headersTimeout ≤ requestTimeout when both are set.
    headersTimeout: Math.min(limits.headersTimeoutMs, limits.requestTimeoutMs),
    requestTimeout: limits.requestTimeoutMs,
    connectionsCheckingInterval: limits.checkIntervalMs,
  };
}

/** The one-line reason of a refusal node made itself (no parser detail ever reaches a client). */
export function refusalReason(status: ClientRefusal['status']): string {
  return status === 431 ? 'request headers too large' : status === 408 ? 'request timeout' : 'bad request';
}

/** `{"error": ...}` body for a refusal, the shape of the directory's HTTP API. */
export function jsonRefusalBody(status: ClientRefusal['status']): string {
  return JSON.stringify({ error: refusalReason(status) });
}

/** A request node refused before (or while) the handler saw it: the status sent and why. */
export interface ClientRefusal {
  readonly status: 400 | 408 | 413 | 431;
  /** node's error code (`HPE_HEADER_OVERFLOW`, `ERR_HTTP_REQUEST_TIMEOUT`, ...). */
  readonly code: string;
}

const REASONS: Readonly<Record<ClientRefusal['status'], string>> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  413: 'Payload Too Large',
  431: 'Request Header Fields Too Large',
};

/**
 * Replaces node's default `clientError` answer with the same statuses and `body` (JSON), then
 * closes the connection; `onRefused` logs and counts. A client that already went away
 * (ECONNRESET) is not answered or reported.
 */
export function answerClientErrors(server: Server, body: (status: ClientRefusal['status']) => string, onRefused: (r: ClientRefusal) => void): void {
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Socket) => {
    const code = err.code ?? 'unknown';
    if (code === 'ECONNRESET' || !socket.writable) {
      socket.destroy();
      return;
    }
    const status = statusOf(code);
    onRefused({ status, code });
    if (!responseStarted(socket)) {
      const text = body(status);
      // Closed once written, even if the client is still sending (a slow body).
      socket.once('finish', () => socket.destroy());
      socket.end(
        `HTTP/1.1 ${status} ${REASONS[status]}\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(text)}\r\nConnection: close\r\n\r\n${text}`,
      );
    }
    // A response already under way cannot be replaced: cut the connection instead.
    else socket.destroy();
  });
}

/**
 * Whether a response on this connection has begun, so a refusal would corrupt it. node keeps the
 * in-flight response as `socket._httpMessage` and makes the same check in its own clientError
 * default; without one, any bytes written belong to an earlier keep-alive response.
 */
function responseStarted(socket: Socket): boolean {
  const inFlight = (socket as Socket & { _httpMessage?: { headersSent?: boolean } | null })._httpMessage;
  if (inFlight !== undefined && inFlight !== null) return inFlight.headersSent === true;
  return false;
}

function statusOf(code: string): ClientRefusal['status'] {
  switch (code) {
    case 'HPE_HEADER_OVERFLOW':
      return 431;
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return 408;
    case 'HPE_CHUNK_EXTENSIONS_OVERFLOW':
      return 413;
    default:
      return 400;
  }
}
