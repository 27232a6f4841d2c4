/**
 * The MetaService HTTP edge (kvcm-meta §1, §9.3): koa, `POST /api/<name>` for the 14 RPCs of
 * §1.1, `GET /health`, `GET /metrics`. It owns everything between the socket and a handler:
 * the streaming body limit (413), UTF-8 + lossless JSON decoding and §1.3 violations (400 `{}`),
 * the common response header (§1.4), mapping thrown errors to codes, SERVICE_NOT_READY while
 * starting or draining, WARN logs and counters for every 4xx/5xx, and the §9.3 drain on close.
 * Handlers see only a RequestReader and return fields; they never touch koa.
 */
import { createServer } from 'node:http';
import type { Server } from 'node:http';
import { randomBytes } from 'node:crypto';
import Koa from 'koa';
import type { Context } from 'koa';
import { Gauge } from 'prom-client';
import { joinChunks, readBodyChunks } from './body-chunks.js';
import type { Logger } from '../../shared/log/logger.js';
import { INTERNAL_TOKEN_HEADER, InternalTokenCheck } from '../../shared/security/internal-token.js';
import { answerClientErrors, limitedServerOptions, META_HTTP_LIMITS, type HttpLimits } from '../../shared/security/http-limits.js';
import type { ErrorCodeName } from '../meta-enums.js';
import { isBadRequestError, isMetaError } from '../meta-errors.js';
import { JsonParseError, parseJson } from '../wire/json-parse.js';
import { RequestReader } from '../wire/request-reader.js';
import { writeJson } from '../wire/response-writer.js';
import { defaultResponseFields, isRpcName } from '../wire/response-defaults.js';
import type { RpcName } from '../wire/response-defaults.js';
import type { MetaMetrics } from './meta-metrics.js';

/** Per-request facts a handler may use; `log` is bound to request_id and trace_id. */
export interface RpcContext {
  readonly rpc: RpcName;
  readonly requestId: string;
  readonly traceId: string;
  readonly log: Logger;
}

/**
 * A handler's outcome. `fields` are the response fields after `header` (§5.1); any response
 * field left out is printed at its default. `code` defaults to OK.
 */
export interface RpcResult {
  code?: ErrorCodeName;
  message?: string;
  fields: Record<string, unknown>;
}

/**
 * Reads every request field it needs before its first side effect: a BadRequestError thrown
 * by the reader becomes HTTP 400, and a MetaError a business error (HTTP 200).
 */
export type RpcHandler = (req: RequestReader, ctx: RpcContext) => Promise<RpcResult>;

/**
 * An RPC whose big bodies are parsed off the event loop (issue 28: big reportEvents go to the
 * report worker). The server still reads the body under its limit and answers everything else
 * (400s, SERVICE_NOT_READY, the header, metrics) as for any RPC.
 */
export interface OffloadedBodyRpc {
  /** Bodies of at least this many bytes go to `prepare`; smaller ones are parsed here. */
  readonly minBytes: number;
  /**
   * Gets the body as the chunks it arrived in (never joined here). null: not now (the worker is
   * down), the body is parsed here as usual.
   */
  prepare(chunks: readonly Buffer[], byteCount: number): Promise<OffloadedBody | null>;
}

export type OffloadedBody =
  /** §1.2: HTTP 400 `{}` with `reason` in the WARN log. */
  | { readonly kind: 'bad_request'; readonly reason: string }
  | {
      readonly kind: 'parsed';
      readonly traceId: string;
      /** The handler's work for this request. */
      run(ctx: RpcContext): Promise<RpcResult>;
      /** The request will not run (starting, draining, store unreachable). */
      discard(): void;
    };

/** §1.1 /health states. */
export type ServiceState = 'starting' | 'serving' | 'stopping';

export interface MetaHttpServerOptions {
  readonly host: string;
  /** 0 = any free port (tests); the bound port is returned by `listen`. */
  readonly port: number;
  readonly maxBodyBytes: number;
  readonly logger: Logger;
  readonly metrics: MetaMetrics;
  /** Longest wait for in-flight requests on close before connections are cut (§9.3: exit within 10 s). */
  readonly drainTimeoutMs?: number;
  /** Header size and request deadlines (default `META_HTTP_LIMITS`; tests shorten them). */
  readonly limits?: HttpLimits;
  /** meta-svc `--internal_api_token`: required as X-Internal-Token on /api/* when non-empty (401 `{}`). */
  readonly internalApiToken?: string;
  /**
   * False while a shared store is unreachable (kvcm-meta §9.4): /health 503
   * `{"status":"store_unavailable"}`, /api/* SERVICE_NOT_READY (retryable) instead of
   * INTERNAL_ERROR. Absent = always available (SQLite).
   */
  readonly storeAvailable?: () => boolean;
  /** Runs before every dispatched RPC (§9.4: catch up with the other replicas' reporter state). */
  readonly beforeRpc?: () => Promise<void>;
}

const EMPTY_BODY = '{}';
const STORE_UNAVAILABLE: RpcResult = Object.freeze({ code: 'SERVICE_NOT_READY', message: 'store unreachable', fields: Object.freeze({}) });
const JSON_TYPE = 'application/json';
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

/** Outcome of reading a request body under the size limit. */
type BodyRead = { ok: true; chunks: readonly Buffer[]; byteCount: number } | { ok: false; status: 400 | 413; reason: string; byteCount: number };

export class MetaHttpServer {
  private readonly app = new Koa();
  private readonly handlers = new Map<RpcName, RpcHandler>();
  private readonly offloaded = new Map<RpcName, OffloadedBodyRpc>();
  private readonly drainHooks: Array<() => void | Promise<void>> = [];
  private httpServer: Server | null = null;
  private stateValue: ServiceState = 'starting';
  private inFlight = 0;
  private inFlightZero: (() => void) | null = null;
  private closing: Promise<void> | null = null;
  private readonly log: Logger;
  private readonly token: InternalTokenCheck;

  constructor(private readonly opts: MetaHttpServerOptions) {
    this.log = opts.logger;
    this.token = new InternalTokenCheck(opts.internalApiToken ?? '');
    this.app.silent = true;
    const self = this;
    // Readiness as `/health` answers it, read at scrape time (an alert on it sees a replica that
    // is up but not serving: starting, draining, or without its Redis store; /metrics answers in
    // every state).
    new Gauge({
      name: 'kvcm_ready',
      help: '1 when /health answers 200 (serving with a reachable store), else 0 (starting, stopping, store_unavailable)',
      registers: [opts.metrics.registry],
      collect() {
        this.set(self.healthState() === 'serving' ? 1 : 0);
      },
    });
    this.app.use(async (ctx) => {
      try {
        await this.route(ctx);
      } catch (e) {
        // Only a bug gets here (handler errors are business errors); still `{}` and a WARN (§1.2).
        this.log.error({ err: e }, 'meta http route failed');
        this.httpError(ctx, 'unknown', 500, 0, e instanceof Error ? e.message : String(e));
      }
    });
  }

  private storeAvailable(): boolean {
    return this.opts.storeAvailable?.() ?? true;
  }

  get state(): ServiceState {
    return this.stateValue;
  }

  /** Install the handler of one §1.1 RPC; unregistered RPCs answer UNSUPPORTED. */
  registerRpc(name: RpcName, handler: RpcHandler): void {
    if (this.handlers.has(name)) throw new Error(`handler for ${name} registered twice`);
    this.handlers.set(name, handler);
  }

  /** Bodies of `name` of at least `rpc.minBytes` are parsed by `rpc.prepare` instead of here. */
  offloadBodies(name: RpcName, rpc: OffloadedBodyRpc): void {
    this.offloaded.set(name, rpc);
  }

  /**
   * Run `hook` when draining starts, before in-flight requests are awaited (§9.3: e.g. wake
   * gate waiters with SNAPSHOT_REQUIRED so they finish promptly).
   */
  onDrain(hook: () => void | Promise<void>): void {
    this.drainHooks.push(hook);
  }

  /** starting → serving: /health 200 and /api/* dispatched to handlers. */
  markServing(): void {
    if (this.stateValue === 'starting') this.stateValue = 'serving';
  }

  /** Bind and resolve with the bound port. */
  listen(): Promise<number> {
    if (this.httpServer) throw new Error('listen called twice');
    const server = createServer(limitedServerOptions(this.opts.limits ?? META_HTTP_LIMITS), this.app.callback());
    // §1.2 for what node refuses itself (431 oversized headers, 408 slow request, 400 unparsable):
    // body exactly `{}`, a WARN line and a counter.
    answerClientErrors(
      server,
      () => EMPTY_BODY,
      (r) => {
        this.log.warn({ status: r.status, reason: r.code }, 'meta http error');
        this.opts.metrics.httpRequestsTotal.inc({ api: 'unknown', code: `http_${r.status}` });
      },
    );
    this.httpServer = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.port, this.opts.host, () => {
        server.off('error', reject);
        const addr = server.address();
        resolve(typeof addr === 'object' && addr !== null ? addr.port : this.opts.port);
      });
    });
  }

  /**
   * §9.3 drain: /health 503 and new /api/* SERVICE_NOT_READY at once, drain hooks run,
   * in-flight requests finish (bounded by drainTimeoutMs), then the listener closes.
   * Idempotent. The caller closes the store afterwards.
   */
  close(): Promise<void> {
    if (!this.closing) this.closing = this.drain();
    return this.closing;
  }

  private async drain(): Promise<void> {
    this.stateValue = 'stopping';
    for (const hook of this.drainHooks) {
      try {
        await hook();
      } catch (e) {
        this.log.warn({ err: e }, 'meta drain hook failed');
      }
    }
    if (this.inFlight > 0) {
      const timeoutMs = this.opts.drainTimeoutMs ?? 8000;
      await new Promise<void>((resolve) => {
        const timer = setTimeout(() => {
          this.log.warn({ inFlight: this.inFlight }, 'meta drain timed out; cutting connections');
          resolve();
        }, timeoutMs);
        this.inFlightZero = () => {
          clearTimeout(timer);
          resolve();
        };
      });
    }
    const server = this.httpServer;
    if (!server) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  private async route(ctx: Context): Promise<void> {
    const path = ctx.path;
    if (path.startsWith('/api/')) {
      const name = path.slice('/api/'.length);
      if (!isRpcName(name)) return this.httpError(ctx, 'unknown', 404, 0, `unknown path ${path}`);
      if (ctx.method !== 'POST') {
        ctx.set('Allow', 'POST');
        return this.httpError(ctx, name, 405, 0, `method ${ctx.method} on ${path}`);
      }
      // Checked before the body is read: an unauthenticated caller learns nothing. The body stays `{}` (§1.2).
      if (!this.token.accepts(ctx.req.headers[INTERNAL_TOKEN_HEADER])) return this.httpError(ctx, name, 401, 0, 'invalid internal token');
      return this.rpc(ctx, name);
    }
    if (path === '/health' || path === '/metrics') {
      if (ctx.method !== 'GET' && ctx.method !== 'HEAD') {
        ctx.set('Allow', 'GET');
        return this.httpError(ctx, path.slice(1), 405, 0, `method ${ctx.method} on ${path}`);
      }
      return path === '/health' ? this.health(ctx) : this.metricsText(ctx);
    }
    return this.httpError(ctx, 'unknown', 404, 0, `unknown path ${path}`);
  }

  /** What `/health` reports: the service state, or `store_unavailable` while serving without its store. */
  private healthState(): ServiceState | 'store_unavailable' {
    return this.stateValue === 'serving' && !this.storeAvailable() ? 'store_unavailable' : this.stateValue;
  }

  private health(ctx: Context): void {
    const s = this.healthState();
    ctx.status = s === 'serving' ? 200 : 503;
    ctx.body = s === 'serving' ? '{"status":"ok"}' : `{"status":"${s}"}`;
    ctx.set('Content-Type', JSON_TYPE);
  }

  private async metricsText(ctx: Context): Promise<void> {
    const reg = this.opts.metrics.registry;
    ctx.body = await reg.metrics();
    ctx.type = reg.contentType;
  }

  private async rpc(ctx: Context, rpc: RpcName): Promise<void> {
    const started = process.hrtime.bigint();
    // In flight until the response is flushed (or the client went away), not until the handler
    // returns: koa writes the body after this middleware, and the drain must not cut it off.
    this.inFlight++;
    ctx.res.once('close', () => {
      this.opts.metrics.httpRequestDurationSeconds.observe({ api: rpc }, Number(process.hrtime.bigint() - started) / 1e9);
      this.inFlight--;
      if (this.inFlight === 0 && this.inFlightZero) {
        const done = this.inFlightZero;
        this.inFlightZero = null;
        done();
      }
    });
    await this.rpcInner(ctx, rpc);
  }

  private async rpcInner(ctx: Context, rpc: RpcName): Promise<void> {
    const body = await this.readBody(ctx);
    if (!body.ok) return this.httpError(ctx, rpc, body.status, body.byteCount, body.reason);
    const byteCount = body.byteCount;
    if (byteCount === 0) return this.httpError(ctx, rpc, 400, 0, 'empty body');

    let traceId: string;
    let invoke: ((ctx: RpcContext) => Promise<RpcResult>) | null;
    let discard = (): void => undefined;
    const offloaded = this.offloaded.get(rpc);
    let prepared: OffloadedBody | null = null;
    if (offloaded !== undefined && byteCount >= offloaded.minBytes) {
      try {
        prepared = await offloaded.prepare(body.chunks, byteCount);
      } catch (e) {
        // The worker died with the body: a business INTERNAL_ERROR, as for a failing handler.
        this.log.error({ err: e }, 'meta body offload failed');
        prepared = { kind: 'parsed', traceId: '', run: () => Promise.reject(e), discard: () => undefined };
      }
    }
    if (prepared !== null) {
      if (prepared.kind === 'bad_request') return this.httpError(ctx, rpc, 400, byteCount, prepared.reason);
      const p = prepared;
      traceId = p.traceId;
      invoke = (c) => p.run(c);
      discard = () => p.discard();
    } else {
      let req: RequestReader;
      try {
        const text = utf8.decode(joinChunks(body.chunks, byteCount));
        req = RequestReader.ofBody(parseJson(text, { maxDepth: 100, maxChars: this.opts.maxBodyBytes }));
        traceId = req.str('trace_id');
      } catch (e) {
        if (e instanceof JsonParseError || isBadRequestError(e)) return this.httpError(ctx, rpc, 400, byteCount, e.message);
        if (e instanceof TypeError) return this.httpError(ctx, rpc, 400, byteCount, 'body is not valid UTF-8');
        throw e;
      }
      const handler = this.handlers.get(rpc);
      invoke = handler ? (c) => handler(req, c) : null;
    }

    const requestId = randomBytes(16).toString('hex');
    const log = this.log.child({ rpc, request_id: requestId, trace_id: traceId });
    let result: RpcResult;
    if (this.stateValue !== 'serving') {
      discard();
      result = { code: 'SERVICE_NOT_READY', message: `service ${this.stateValue}`, fields: {} };
    } else if (!this.storeAvailable()) {
      discard();
      result = STORE_UNAVAILABLE;
    } else {
      if (!invoke) {
        result = { code: 'UNSUPPORTED', message: `${rpc} is not supported`, fields: {} };
      } else {
        try {
          if (this.opts.beforeRpc) await this.opts.beforeRpc();
          result = await invoke({ rpc, requestId, traceId, log });
        } catch (e) {
          // A catch-up failure may have come before the request ran (releasing twice is harmless).
          discard();
          if (isBadRequestError(e)) return this.httpError(ctx, rpc, 400, byteCount, e.message);
          if (isMetaError(e)) {
            result = { code: e.code, message: e.message, fields: e.fields ?? {} };
          } else {
            log.error({ err: e }, 'meta handler failed');
            result = { code: 'INTERNAL_ERROR', message: 'internal error', fields: {} };
          }
        }
        // The store went away during the call: retryable, and the Lua batch was all or nothing.
        if (result.code === 'INTERNAL_ERROR' && !this.storeAvailable()) result = STORE_UNAVAILABLE;
      }
    }

    const code = result.code ?? 'OK';
    let text: string;
    try {
      text = writeJson(assembleResponse(rpc, code, result.message ?? '', requestId, result.fields));
    } catch (e) {
      log.error({ err: e }, 'meta response serialization failed');
      return this.httpError(ctx, rpc, 500, byteCount, e instanceof Error ? e.message : 'serialization failed');
    }
    // §1.4: every 200 response's request_id is logged with the request's trace_id.
    if (code === 'OK') log.info({ code }, 'meta rpc');
    else log.info({ code, message: result.message }, 'meta rpc');
    this.opts.metrics.httpRequestsTotal.inc({ api: rpc, code });
    ctx.status = 200;
    ctx.body = text;
    ctx.set('Content-Type', JSON_TYPE);
  }

  /**
   * Stream the body with a running byte count: over `maxBodyBytes` → 413. The remainder is
   * drained (not buffered) so the client can read the response instead of a reset.
   */
  private async readBody(ctx: Context): Promise<BodyRead> {
    const max = this.opts.maxBodyBytes;
    const body = await readBodyChunks(ctx.req, max);
    if (body.kind === 'read_failed') {
      const e = body.error;
      return { ok: false, status: 400, reason: `body read failed: ${e instanceof Error ? e.message : String(e)}`, byteCount: body.byteCount };
    }
    if (body.kind === 'too_large') return { ok: false, status: 413, reason: `body larger than http.max_body_bytes ${max}`, byteCount: body.byteCount };
    return { ok: true, chunks: body.chunks, byteCount: body.byteCount };
  }

  /** §1.2: every 4xx/5xx has body exactly `{}`, a WARN line and a counter. */
  private httpError(ctx: Context, api: string, status: 400 | 401 | 404 | 405 | 413 | 500, byteCount: number, reason: string): void {
    this.log.warn({ route: ctx.path, method: ctx.method, status, bytes: byteCount, reason }, 'meta http error');
    this.opts.metrics.httpRequestsTotal.inc({ api, code: `http_${status}` });
    ctx.status = status;
    ctx.body = EMPTY_BODY;
    ctx.set('Content-Type', JSON_TYPE);
  }
}

/**
 * `header` first (§1.4), then the handler's fields in its order, then any response field it
 * left out at its default (§1.3: every scalar/repeated field printed).
 */
function assembleResponse(
  rpc: RpcName,
  code: ErrorCodeName,
  message: string,
  requestId: string,
  fields: Record<string, unknown>,
): Record<string, unknown> {
  const out: Record<string, unknown> = {
    header: { status: { code, message }, request_id: requestId, tracer_result: '' },
  };
  for (const k of Object.keys(fields)) out[k] = fields[k];
  const defaults = defaultResponseFields(rpc);
  for (const k of Object.keys(defaults)) if (out[k] === undefined) out[k] = defaults[k];
  return out;
}
