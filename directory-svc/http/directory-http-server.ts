/**
 * The directory's HTTP port (`--http_port`, architecture.md): engine heartbeats
 * (`POST /v1/internal/heartbeat`, discovery.md "Heartbeats"), `GET /health` and `GET /metrics`.
 * The answers are exactly those of the spec's table; the body is read under a size limit
 * (413 above it) and the internal token is compared in constant time and never logged.
 */
import { createHash, timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { Socket } from 'node:net';
import Koa from 'koa';
import type { Context } from 'koa';
import type { Registry } from 'prom-client';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
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
}

export const HEARTBEAT_PATH = '/v1/internal/heartbeat';
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
const TOKEN_HEADER = 'x-internal-token';

export class DirectoryHttpServer {
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  /** sha256 of the token, so the compare is over equal-length buffers whatever was sent. */
  private readonly tokenDigest: Buffer | null;

  private readonly server: Server;

  private constructor(private readonly opts: DirectoryHttpServerOptions) {
    this.log = opts.logger ?? silentLogger;
    this.tokenDigest = opts.internalApiToken === '' ? null : digest(opts.internalApiToken);
    const app = new Koa();
    // koa composes its middleware in callback(), so the route goes on before the server exists.
    app.use((ctx) => this.handle(ctx));
    this.server = createServer(app.callback());
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
    if (!this.tokenAccepted(ctx.get(TOKEN_HEADER))) {
      // The body is not read: an unauthenticated caller learns nothing about instances.
      return reply(ctx, 401, { error: 'invalid internal token' });
    }
    const body = await readBody(ctx, this.opts.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES);
    if (body === 'too_large') return reply(ctx, 413, { error: 'body too large' });
    if (body === 'read_failed') return reply(ctx, 400, { error: 'body read failed' });
    let json: unknown;
    try {
      json = JSON.parse(body.toString('utf8'));
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

  /** Constant-time: both sides are hashed to 32 bytes before `timingSafeEqual`. */
  private tokenAccepted(sent: string): boolean {
    if (this.tokenDigest === null) return true;
    if (sent === '') return false;
    return timingSafeEqual(digest(sent), this.tokenDigest);
  }
}

function digest(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

function reply(ctx: Context, status: number, body: Record<string, unknown>): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}

/** Streams the body with a running count; above `max` the rest is drained, not buffered. */
async function readBody(ctx: Context, max: number): Promise<Buffer | 'too_large' | 'read_failed'> {
  const declared = Number(ctx.get('Content-Length') || 'NaN');
  let over = Number.isFinite(declared) && declared > max;
  const chunks: Buffer[] = [];
  let total = 0;
  try {
    for await (const chunk of ctx.req as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (over) continue;
      if (total > max) {
        over = true;
        chunks.length = 0;
        continue;
      }
      chunks.push(chunk);
    }
  } catch {
    return 'read_failed';
  }
  return over ? 'too_large' : Buffer.concat(chunks, total);
}
