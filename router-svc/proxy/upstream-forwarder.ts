/**
 * Forwards one request, body unchanged, to `http://<instance name><same path>` (or, for an
 * engines-file instance, to `<its url><same path>`, engines.md §4) over a keep-alive
 * agent and passes the answer back as it arrives (routing.md "OpenAI-compatible proxy"): status and
 * headers first, then each chunk as the engine writes it, so SSE streams are not buffered. A client
 * that disconnects cancels the upstream request; an engine that fails before answering gives 502
 * naming the instance. node:http errors are turned into RouterHttpError here and nowhere else, and
 * a failure before any answer byte says whether the engine vanished (refused, reset, unreachable),
 * so the proxy can send the request once to another instance (openai-proxy.ts).
 */
import { Agent, request, type ClientRequest, type IncomingHttpHeaders, type IncomingMessage, type OutgoingHttpHeaders, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { upstreamFailed, type RouterHttpError } from '../http/router-http-errors.js';
import { INTERNAL_TOKEN_HEADER } from '../../shared/security/internal-token.js';

/** Response header naming the engine that served the request (operators, tests). */
export const INSTANCE_HEADER = 'x-kv-router-instance';

/** RFC 9110 §7.6.1 hop-by-hop headers: they describe one connection, never forwarded. */
const HOP_BY_HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-authenticate',
  'proxy-authorization',
  'proxy-connection',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
]);

export interface UpstreamForwarderOptions {
  /** Idle keep-alive sockets kept per engine. */
  readonly maxFreeSockets?: number;
  /** TCP connect limit per new upstream connection (default 5000); 0 = none. */
  readonly connectTimeoutMs?: number;
}

/**
 * Why an engine that failed before any byte of its answer looks gone (a pod that just died, before
 * its health probe fails), so the request may go once to another instance:
 * - `refused`: nothing listens on its port any more (ECONNREFUSED);
 * - `reset`: the connection was reset or closed before the response head (ECONNRESET, EPIPE);
 * - `unreachable`: its address no longer answers (EHOSTUNREACH, ENETUNREACH, EHOSTDOWN, a name
 *   that no longer resolves, or the connect limit passed).
 */
export const UPSTREAM_RETRY_REASONS = ['refused', 'reset', 'unreachable'] as const;
export type UpstreamRetryReason = (typeof UPSTREAM_RETRY_REASONS)[number];

/** How a forward ended: answered in full, client went away, or the engine failed. */
export type ForwardResult =
  | { readonly kind: 'ok'; readonly status: number }
  | { readonly kind: 'client_abort' }
  /**
   * Before any byte was sent to the client: the caller answers 502 with `error`, or, when
   * `vanished` says the engine looks gone, may send the request elsewhere (null: it must not, e.g.
   * an instance name that is no address).
   */
  | { readonly kind: 'failed_before_response'; readonly error: RouterHttpError; readonly vanished: UpstreamRetryReason | null }
  /** After the status went out: the client connection was cut (nothing else can be said). */
  | { readonly kind: 'failed_mid_response'; readonly error: RouterHttpError };

export class UpstreamForwarder {
  private readonly agent: Agent;
  private readonly connectTimeoutMs: number;

  constructor(opts: UpstreamForwarderOptions = {}) {
    // `timeout` drops idle pooled sockets after 4 s, before a node-style engine's 5 s keep-alive
    // timeout closes them under us (active requests are not affected by it).
    this.agent = new Agent({ keepAlive: true, maxFreeSockets: opts.maxFreeSockets ?? 64, scheduling: 'lifo', timeout: 4000 });
    this.connectTimeoutMs = opts.connectTimeoutMs ?? 5000;
  }

  /**
   * Sends `body` to `instance` at `pathAndQuery` with the client's end-to-end headers, and pipes
   * the answer into `res`. Resolves once the exchange is over; never rejects. `onFirstChunk` is
   * told the status when the answer's first body chunk arrives (the proxy times first tokens by it).
   */
  forward(
    instance: string,
    pathAndQuery: string,
    req: IncomingMessage,
    res: ServerResponse,
    body: Buffer,
    baseUrl = '',
    onFirstChunk?: (status: number) => void,
  ): Promise<ForwardResult> {
    const target = baseUrl === '' ? hostPort(instance) : urlTarget(baseUrl);
    if (target === null) {
      const why = baseUrl === '' ? 'instance name is not host:port' : `url ${JSON.stringify(baseUrl)} is not http://host:port[/path]`;
      return Promise.resolve({ kind: 'failed_before_response', error: upstreamFailed(instance, why), vanished: null });
    }
    return new Promise<ForwardResult>((resolve) => {
      let settled = false;
      const settle = (r: ForwardResult): void => {
        if (settled) return;
        settled = true;
        resolve(r);
      };
      let upstream: ClientRequest | null = null;

      // The client went away (its socket closed before our answer ended): cancel the engine's work.
      const onClientClose = (): void => {
        if (res.writableFinished) return;
        upstream?.destroy();
        settle({ kind: 'client_abort' });
      };
      res.once('close', onClientClose);

      const attempt = (mayRetry: boolean): void => {
        const up = request({
          host: target.host,
          port: target.port,
          method: req.method ?? 'POST',
          path: target.pathPrefix + pathAndQuery,
          headers: requestHeaders(req.headers, target.hostHeader, body.length),
          agent: this.agent,
        });
        upstream = up;

        // Only connecting is bounded: a non-streaming generation may take minutes before its headers.
        let connectTimer: NodeJS.Timeout | null = null;
        let connectTimedOut = false;
        const clearConnectTimer = (): void => {
          if (connectTimer !== null) clearTimeout(connectTimer);
          connectTimer = null;
        };
        if (this.connectTimeoutMs > 0) {
          up.once('socket', (socket: Socket) => {
            if (!socket.connecting) return; // a reused keep-alive socket
            connectTimer = setTimeout(() => {
              connectTimedOut = true;
              up.destroy(new Error(`connect timed out after ${this.connectTimeoutMs} ms`));
            }, this.connectTimeoutMs);
            socket.once('connect', clearConnectTimer);
          });
        }

        up.on('response', (answer: IncomingMessage) => {
          clearConnectTimer();
          const headers = responseHeaders(answer.headers);
          headers[INSTANCE_HEADER] = instance;
          res.writeHead(answer.statusCode ?? 502, headers);
          // SSE: headers go out now, before the first event.
          res.flushHeaders();
          if (onFirstChunk !== undefined) answer.once('data', () => onFirstChunk(answer.statusCode ?? 502));
          answer.on('data', (chunk: Buffer) => {
            if (res.destroyed) return;
            // Backpressure: a slow client pauses the engine's stream instead of buffering it here.
            if (!res.write(chunk)) {
              answer.pause();
              res.once('drain', () => answer.resume());
            }
          });
          answer.once('end', () => {
            res.end();
            settle({ kind: 'ok', status: answer.statusCode ?? 502 });
          });
          const cut = (detail: string): void => {
            if (settled) return;
            res.destroy();
            settle({ kind: 'failed_mid_response', error: upstreamFailed(instance, detail) });
          };
          answer.once('error', (e: Error) => cut(e.message));
          // The engine's connection closed before the answer was complete (e.g. it crashed mid-stream).
          answer.once('close', () => {
            if (!answer.complete) cut('connection closed mid-answer');
          });
        });

        up.on('error', (e: Error) => {
          clearConnectTimer();
          if (settled) return;
          if (res.headersSent) {
            res.destroy();
            settle({ kind: 'failed_mid_response', error: upstreamFailed(instance, e.message) });
            return;
          }
          // An idle keep-alive socket the engine closed just as we reused it: the request never
          // reached the engine, so one retry on a fresh connection is safe (node:http docs,
          // `request.reusedSocket`).
          if (mayRetry && up.reusedSocket && (e as NodeJS.ErrnoException).code === 'ECONNRESET') {
            attempt(false);
            return;
          }
          res.off('close', onClientClose);
          settle({ kind: 'failed_before_response', error: upstreamFailed(instance, e.message), vanished: connectTimedOut ? 'unreachable' : vanishedReason(e) });
        });

        up.end(body);
      };
      attempt(true);
    });
  }

  /** Closes idle upstream sockets (in-flight requests end on their own or with their clients). */
  close(): void {
    this.agent.destroy();
  }
}

/** The errno codes of an engine that is gone, by the reason they are counted under. */
const VANISHED_CODES: ReadonlyMap<string, UpstreamRetryReason> = new Map([
  ['ECONNREFUSED', 'refused'],
  ['ECONNRESET', 'reset'],
  ['EPIPE', 'reset'],
  ['EHOSTUNREACH', 'unreachable'],
  ['ENETUNREACH', 'unreachable'],
  ['EHOSTDOWN', 'unreachable'],
  ['ENOTFOUND', 'unreachable'],
  ['ETIMEDOUT', 'unreachable'],
]);

/** A request error before the response head, as the reason the engine looks gone (null: it does not). */
function vanishedReason(e: Error): UpstreamRetryReason | null {
  const code = (e as NodeJS.ErrnoException).code;
  return code === undefined ? null : (VANISHED_CODES.get(code) ?? null);
}

interface UpstreamTarget {
  readonly host: string;
  readonly port: number;
  /** The base URL's path ('' or `/prefix`), put before the client's path. */
  readonly pathPrefix: string;
  readonly hostHeader: string;
}

/** `host:port` or `[v6]:port` of an instance name (discovery.md: the name is the business address). */
function hostPort(name: string): UpstreamTarget | null {
  const colon = name.lastIndexOf(':');
  if (colon <= 0) return null;
  let host = name.slice(0, colon);
  const port = Number(name.slice(colon + 1));
  if (!Number.isInteger(port) || port < 1 || port > 65535) return null;
  if (host.startsWith('[') && host.endsWith(']')) host = host.slice(1, -1);
  return { host, port, pathPrefix: '', hostHeader: name };
}

/** An engines-file base URL (validated by the directory; checked again here, it came over the wire). */
function urlTarget(baseUrl: string): UpstreamTarget | null {
  let u: URL;
  try {
    u = new URL(baseUrl);
  } catch {
    return null;
  }
  if (u.protocol !== 'http:' || u.port === '') return null;
  const host = u.hostname.startsWith('[') ? u.hostname.slice(1, -1) : u.hostname;
  return { host, port: Number(u.port), pathPrefix: u.pathname.replace(/\/+$/, ''), hostHeader: u.host };
}

/** End-to-end client headers; Host becomes the engine, the length is the exact forwarded body. */
function requestHeaders(inHeaders: IncomingHttpHeaders, hostHeader: string, bodyBytes: number): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(inHeaders)) {
    if (value === undefined || HOP_BY_HOP.has(name) || name === 'host' || name === 'content-length' || name === INTERNAL_TOKEN_HEADER) continue;
    out[name] = value;
  }
  out['host'] = hostHeader;
  out['content-length'] = bodyBytes;
  return out;
}

function responseHeaders(inHeaders: IncomingHttpHeaders): OutgoingHttpHeaders {
  const out: OutgoingHttpHeaders = {};
  for (const [name, value] of Object.entries(inHeaders)) {
    if (value === undefined || HOP_BY_HOP.has(name)) continue;
    out[name] = value;
  }
  return out;
}
