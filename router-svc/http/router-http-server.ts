/**
 * router-svc's HTTP port (`--http_port`, routing.md "HTTP API"): the query endpoint, `/v1/route`,
 * the OpenAI-compatible proxy and `GET /v1/models` (cache-identity §2), the status page, `/health`,
 * `/ready` and `/metrics`. Every answer is JSON; a failure is OpenAI's error object
 * (router-http-errors.ts) with the status of its RouterHttpError (400 naming the field, 401, 404,
 * 413, 502, 503), and an unexpected error is a bare 500 (logged, never a stack trace in the
 * response). `/ready`'s 503 is a readiness report, not an error: it keeps
 * `{"ready": false, "error": reason}`.
 *
 * `POST /v1/route` itself is answered on node:http in front of the Koa app (route-fast-path.ts);
 * everything else, the same endpoint under other spellings included, goes through Koa.
 *
 * routing.md: "The server opens its port only when it is ready to answer (view received)": main
 * starts this server after the first snapshot was applied; `start` refuses an empty view.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import { createServer, type Server } from 'node:http';
import { answerClientErrors, limitedServerOptions, refusalReason, ROUTER_HTTP_LIMITS } from '../../shared/security/http-limits.js';
import type { Socket } from 'node:net';
import Koa from 'koa';
import type { Context, Next } from 'koa';
import { Router } from '@koa/router';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { ViewCache } from '../viewcache/view-cache.js';
import { mountStatusRoutes } from '../status/status-routes.js';
import { CHAT_COMPLETIONS_PATH, COMPLETIONS_PATH, type OpenAiProxy } from '../proxy/openai-proxy.js';
import { INTERNAL_TOKEN_HEADER, InternalTokenCheck } from '../../shared/security/internal-token.js';
import { MAX_BODY_BYTES, readJsonBody } from './json-body.js';
import { queryResultJson } from './query-json.js';
import type { RouteDecider } from './route-decider.js';
import { routeAnswer, type RouteEndpointDeps } from './route-endpoint.js';
import { withRouteFastPath } from './route-fast-path.js';
import { jsonObject, parseKvQueryRequest } from './route-request.js';
import { PromptResolver } from '../proxy/prompt-resolver.js';
import type { TokenizerInfo } from '../../shared/tokenize/prompt-tokenizer.js';
import { IdentityResolver } from '../identity/identity-resolver.js';
import { ANY_SCOPE, inScope, type RequestIdentity } from '../identity/request-identity.js';
import { MODELS_PATH, servedModelList } from './models-list.js';
import { parseIdentityFields, resolveIdentity } from './request-identity-fields.js';
import type { ModelTokenizerInfo } from '../status/status-snapshot.js';
import { failureAnswer, openAiError, RouterHttpError, unauthorized } from './router-http-errors.js';
import type { RouterMetrics } from './router-metrics.js';

export const KV_QUERY_PATH = '/v1/internal/kv-cache/query';
export const ROUTE_PATH = '/v1/route';

export interface RouterHttpServerOptions {
  /** `--http_port`; 0 = any free port (tests). */
  readonly port: number;
  /** Default 0.0.0.0: clients and load balancers on other hosts. */
  readonly host?: string;
  /** The router's view (already holding its first snapshot). */
  readonly view: ViewCache;
  readonly decider: RouteDecider;
  /** Text and chat prompts → token ids for `/v1/route`; default: no tokenizer (routed by load, counted). */
  readonly prompts?: PromptResolver;
  /** `--tokenizer` in use, for `/v1/status`; default null. */
  readonly tokenizer?: TokenizerInfo | null;
  /** `--models_file`'s tokenizers, for `/v1/status`; default none. */
  readonly modelTokenizers?: readonly ModelTokenizerInfo[];
  /** Request identities against `view` (cache-identity §2); default one of its own over `view`. */
  readonly identities?: IdentityResolver;
  /** null: no proxy routes (404). */
  readonly proxy: OpenAiProxy | null;
  readonly metrics: RouterMetrics;
  /** `--internal_api_token`; '' = internal endpoints are open. */
  readonly internalApiToken: string;
  readonly logger?: Logger;
  /** Default 8 MiB (routing.md). */
  readonly maxBodyBytes?: number;
  /** Wall clock (Date.now): view staleness compares it with update arrival times. */
  readonly clock?: () => number;
}

/** `start` before the view has its first snapshot (routing.md: the port opens only when ready). */
export class ViewNotReadyError extends DomainError {
  readonly class = 'not_ready' as const;
  constructor() {
    super('the HTTP port opens only after the first view snapshot');
  }
}

export class RouterHttpServer {
  private readonly sockets = new Set<Socket>();

  private constructor(
    private readonly server: Server,
    private readonly requestedPort: number,
  ) {}

  /** Binds and resolves once listening. */
  static async start(opts: RouterHttpServerOptions): Promise<RouterHttpServer> {
    if (!opts.view.hasSnapshot) throw new ViewNotReadyError();
    const routeDeps = routeEndpointDeps(opts);
    const log = opts.logger ?? silentLogger;
    const app = buildApp(opts, routeDeps, log);
    const server = createServer(limitedServerOptions(ROUTER_HTTP_LIMITS), withRouteFastPath(ROUTE_PATH, routeDeps, log, app.callback()));
    // Keep-alive clients (load balancers, benchmarks) reuse connections.
    server.keepAliveTimeout = 65_000;
    // Refusals node makes itself (431, 408, 400) get the API's error object, never a stack.
    answerClientErrors(
      server,
      (status) => JSON.stringify(openAiError(status, refusalReason(status))),
      () => undefined,
    );
    const self = new RouterHttpServer(server, opts.port);
    server.on('connection', (s: Socket) => {
      self.sockets.add(s);
      s.once('close', () => self.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(opts.port, opts.host ?? '0.0.0.0', () => {
        server.off('error', reject);
        resolve();
      });
    });
    return self;
  }

  get port(): number {
    const addr = this.server.address();
    return typeof addr === 'object' && addr !== null ? addr.port : this.requestedPort;
  }

  /** Stops listening and cuts every connection (in-flight proxied streams included). */
  close(): Promise<void> {
    return new Promise((resolve) => {
      this.server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }
}

/** What `/v1/route` needs, for the Koa route and the fast path alike. */
function routeEndpointDeps(opts: RouterHttpServerOptions): RouteEndpointDeps {
  return {
    decider: opts.decider,
    prompts: opts.prompts ?? new PromptResolver(null, opts.metrics),
    identities: opts.identities ?? new IdentityResolver(opts.view),
    maxBodyBytes: opts.maxBodyBytes ?? MAX_BODY_BYTES,
    clock: opts.clock ?? Date.now,
  };
}

function buildApp(opts: RouterHttpServerOptions, routeDeps: RouteEndpointDeps, log: Logger): Koa {
  const clock = routeDeps.clock;
  const maxBodyBytes = routeDeps.maxBodyBytes;
  const token = new InternalTokenCheck(opts.internalApiToken);
  const view = opts.view;
  const identities = routeDeps.identities;
  const startedSeconds = Math.floor(clock() / 1000);

  const app = new Koa();
  // Errors are answered and logged below; koa's own handler would print stacks to stderr.
  app.silent = true;
  app.use(async (ctx: Context, next: Next) => {
    try {
      await next();
    } catch (e) {
      const failure = failureAnswer(e, ctx.path, log);
      if (failure.close) ctx.set('Connection', 'close');
      return reply(ctx, failure.status, failure.body);
    }
  });

  const router = new Router();
  router.get('/health', (ctx) => reply(ctx, 200, { status: 'ok' }));
  router.get('/ready', (ctx) => {
    const now = clock();
    if (view.hasSnapshot && !view.isStale(now)) return reply(ctx, 200, { ready: true, epoch: view.epoch, version: Number(view.version) });
    const reason = !view.hasSnapshot ? 'no view snapshot yet' : (view.staleReason ?? 'directory view stale');
    return reply(ctx, 503, { ready: false, error: reason });
  });
  router.get('/metrics', async (ctx) => {
    ctx.status = 200;
    ctx.set('Content-Type', opts.metrics.registry.contentType);
    ctx.body = await opts.metrics.registry.metrics();
  });
  router.post(KV_QUERY_PATH, async (ctx) => {
    // The token is checked before the body is read: an unauthenticated caller learns nothing.
    if (!token.accepts(ctx.req.headers[INTERNAL_TOKEN_HEADER])) throw unauthorized();
    const body = await readJsonBody(ctx.req, maxBodyBytes);
    const request = parseKvQueryRequest(body.json);
    // cache-identity §2: `model` optional here (absent: every stream), `cache_salt` keys block 0.
    const identity = resolveIdentity(identities, parseIdentityFields(jsonObject(body.json)), true);
    ctx.status = 200;
    ctx.type = 'application/json';
    ctx.body = queryResultJson(view.query(request.tokenIds, clock(), identity.keys, identity.scope === ANY_SCOPE ? null : scopeFilter(view, identity)));
  });
  router.post(ROUTE_PATH, async (ctx) => reply(ctx, 200, await routeAnswer(ctx.req, routeDeps)));
  router.get(MODELS_PATH, (ctx) => reply(ctx, 200, servedModelList(view.instances(), startedSeconds)));
  mountStatusRoutes(router, {
    view,
    hitRatios: opts.metrics.hitRatios,
    policyName: opts.decider.policyName,
    tokenizer: opts.tokenizer ?? null,
    modelTokenizers: opts.modelTokenizers ?? [],
    untokenized: () => opts.metrics.untokenizedCounts(),
    clock,
  });
  const proxy = opts.proxy;
  if (proxy !== null) {
    router.post(COMPLETIONS_PATH, (ctx) => proxy.handle(ctx, COMPLETIONS_PATH));
    router.post(CHAT_COMPLETIONS_PATH, (ctx) => proxy.handle(ctx, CHAT_COMPLETIONS_PATH));
  }
  app.use(router.routes());
  app.use(
    router.allowedMethods({
      throw: true,
      methodNotAllowed: () => new RouterHttpError('method_not_allowed', 405, 'method not allowed'),
      notImplemented: () => new RouterHttpError('method_not_allowed', 405, 'method not allowed'),
    }),
  );
  app.use((ctx) => reply(ctx, 404, openAiError(404, 'not found')));
  return app;
}

/** The query endpoint's streams of a model: those of the instances in its scope (a stream of no registered instance may serve any). */
function scopeFilter(view: ViewCache, identity: RequestIdentity): (name: string) => boolean {
  return (name) => {
    const inst = view.instance(name);
    return inst === null || inScope(inst, identity);
  };
}

function reply(ctx: Context, status: number, body: object): void {
  ctx.status = status;
  ctx.type = 'application/json';
  ctx.body = JSON.stringify(body);
}
