/**
 * The directory's HTTP port (`--http_port`, architecture.md): engine heartbeats
 * (`POST /v1/internal/heartbeat`, discovery.md "Heartbeats"), `GET /health` and `GET /metrics`.
 * The answers are exactly those of the spec's table; the body is read under a size limit
 * (413 above it) and the internal token is compared in constant time and never logged.
 */
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import Koa from 'koa';
import type { Context } from 'koa';
import type { Registry } from 'prom-client';
import type { Logger } from '../../shared/log/logger.js';
import { readBoundedBody } from '../../shared/http/bounded-body.js';
import { silentLogger } from '../../shared/log/logger.js';
import { answerClientErrors, jsonRefusalBody, INTERNAL_HTTP_LIMITS, limitedServerOptions, type HttpLimits } from '../../shared/security/http-limits.js';
import { INTERNAL_TOKEN_HEADER, INVALID_TOKEN_MESSAGE, InternalTokenCheck } from '../../shared/security/internal-token.js';
import { isDiscoveryError } from '../discovery/discovery-errors.js';
import type { HeartbeatOutcome } from '../discovery/instance-table.js';
import { heartbeatName, parseHeartbeat, type HeartbeatReport } from '../discovery/load-report.js';

/** Where accepted heartbeats go (the DiscoveryService). */
export interface HeartbeatSink {
  heartbeat(report: HeartbeatReport): HeartbeatOutcome;
  /** An invalid report naming `name`: that instance is no routing candidate until a valid one. */
  invalidReport(name: string): void;
}

export interface DirectoryHttpServerOptions {
  /** 0 = any free port (tests). */
  readonly port: number;
  readonly host?: string;
  /** `--internal_api_token`; '' = no token required. */
  readonly internalApiToken: string;
  readonly heartbeats: HeartbeatSink;
  /** The registry `GET /metrics` serves. */
  readonly registry: Registry;
  readonly logger?: Logger;
  /** Largest accepted body (default 64 KiB; a heartbeat is ~200 bytes). */
  readonly maxBodyBytes?: number;
  /** Extra fields for `GET /health` (e.g. etcd connectivity); the status is 200 while serving. */
  readonly health?: () => Record<string, unknown>;
  /** Header size and request deadlines (default `INTERNAL_HTTP_LIMITS`; tests shorten them). */
  readonly limits?: HttpLimits;
}

export const HEARTBEAT_PATH = '/v1/internal/heartbeat';
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;

export class DirectoryHttpServer {
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  private readonly token: InternalTokenCheck;

  private readonly server: Server;

  private constructor(private readonly opts: DirectoryHttpServerOptions) {
    this.log = opts.logger ?? silentLogger;
    this.token = new InternalTokenCheck(opts.internalApiToken);
    const app = new Koa();
    app.silent = true;
    // koa composes its middleware in callback(), so the route goes on before the server exists.
    app.use((ctx) => this.handleSafely(ctx));
    this.server = createServer(limitedServerOptions(opts.limits ?? INTERNAL_HTTP_LIMITS), app.callback());
    // 431 / 408 / 400 that node answers before a handler runs: JSON like every other answer here.
    answerClientErrors(
      this.server,
      jsonRefusalBody,
      (r) => this.log.warn({ status: r.status, code: r.code }, 'http request refused'),
    );
    this.server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
  }

  /** Binds and resolves once listening. */
  static async start(opts: DirectoryHttpServerOptions): Promise<DirectoryHttpServer> {
    const self = new DirectoryHttpServer(opts);
    await new Promise<void>((resolve, reject) => {
      self.server.once('error', reject);
      self.server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
        self.server.off('error', reject);
        resolve();
      });
    });
    return self;
  }

  get port(): number {
    const addr = this.server.address();
    return typeof addr === 'object' && addr !== null ? addr.port : this.opts.port;
  }

  /** Stops listening and cuts idle keep-alive connections. */
  async close(): Promise<void> {
    await new Promise<void>((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }

  /** A bug in a handler answers 500 with a fixed body: the error (and its stack) goes to the log only. */
  private async handleSafely(ctx: Context): Promise<void> {
    try {
      await this.handle(ctx);
    } catch (e) {
      this.log.error({ path: ctx.path, err: e instanceof Error ? e.message : String(e) }, 'http handler failed');
      reply(ctx, 500, { error: 'internal error' });
    }
  }

  private async handle(ctx: Context): Promise<void> {
    const path = ctx.path;
    if (path === HEARTBEAT_PATH) {
      if (ctx.method !== 'POST') return reply(ctx, 405, { error: 'method not allowed' });
      return this.heartbeat(ctx);
    }
    if (path === '/health') {
      if (ctx.method !== 'GET' && ctx.method !== 'HEAD') return reply(ctx, 405, { error: 'method not allowed' });
      return reply(ctx, 200, { status: 'ok', ...(this.opts.health?.() ?? {}) });
    }
    if (path === '/metrics') {
      if (ctx.method !== 'GET') return reply(ctx, 405, { error: 'method not allowed' });
      ctx.status = 200;
      ctx.set('Content-Type', this.opts.registry.contentType);
      ctx.body = await this.opts.registry.metrics();
      return;
    }
    return reply(ctx, 404, { error: 'not found' });
  }

  private async heartbeat(ctx: Context): Promise<void> {
    if (!this.token.accepts(ctx.req.headers[INTERNAL_TOKEN_HEADER])) {
      // The body is not read: an unauthenticated caller learns nothing about instances.
      return reply(ctx, 401, { error: INVALID_TOKEN_MESSAGE });
    }
    const body = await readBoundedBody(ctx.req, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    if (body.kind === 'too_large') return reply(ctx, 413, { error: 'body too large' });
    if (body.kind === 'read_failed') return reply(ctx, 400, { error: 'body read failed' });
    let json: unknown;
    try {
      json = JSON.parse(body.bytes.toString('utf8'));
    } catch {
      return reply(ctx, 400, { error: 'body is not JSON' });
    }
    let report: HeartbeatReport;
    try {
      report = parseHeartbeat(json);
    } catch (e) {
      if (!isDiscoveryError(e)) throw e;
      const name = heartbeatName(json);
      if (name !== null) this.opts.heartbeats.invalidReport(name);
      this.log.warn({ instance: name, err: e.detail }, 'invalid heartbeat');
      return reply(ctx, 400, { error: e.detail });
    }
    const outcome = this.opts.heartbeats.heartbeat(report);
    if (outcome !== 'accepted') {
      this.log.debug({ instance: report.name, outcome }, 'heartbeat refused');
      return reply(ctx, 409, { error: 'instance not registered or stale incarnation' });
    }
    return reply(ctx, 200, { ok: true });
  }
}

function reply(ctx: Context, status: number, body: Record<string, unknown>): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}
