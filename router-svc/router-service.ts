/**
 * router-svc's parts wired together (architecture.md): the view client watching the directory, the
 * policy named by --load_balance_policy, and the HTTP port (query, route, OpenAI proxy, health,
 * readiness, metrics). main.ts adds only flags, logging and signals; tests start this in process.
 *
 * routing.md "HTTP API": the port opens only once the first view snapshot has been applied, so a
 * load balancer never sends traffic to a router that cannot route yet.
 */
import { hostname } from 'node:os';
import type { RouterFlags } from '../shared/config/router-flags.js';
import type { Logger } from '../shared/log/logger.js';
import type { GrpcClientTls } from '../shared/security/grpc-tls.js';
import { InflightLoad } from './inflight/inflight-load.js';
import { InflightReporter } from './inflight/inflight-reporter.js';
import { ClaimOrder } from './inflight/claim-order.js';
import { RouteDecider } from './http/route-decider.js';
import { RouterHttpServer } from './http/router-http-server.js';
import { RouterMetrics, type ViewStatus } from './http/router-metrics.js';
import { createPolicy } from './policy/create-policy.js';
import { TtftPolicy } from './policy/ttft-policy.js';
import type { PromptTokenizer } from '../shared/tokenize/prompt-tokenizer.js';
import { ModelTokenizers } from '../shared/tokenize/model-tokenizers.js';
import { IdentityResolver } from './identity/identity-resolver.js';
import { OpenAiProxy } from './proxy/openai-proxy.js';
import { PromptResolver } from './proxy/prompt-resolver.js';
import { UpstreamForwarder } from './proxy/upstream-forwarder.js';
import { ViewClient } from './viewcache/view-client.js';

export interface RouterServiceOptions {
  readonly flags: RouterFlags;
  readonly logger: Logger;
  /** `--grpc_tls_*` contents, read by main at startup; absent or null = plaintext gRPC to the directory. */
  readonly grpcTls?: GrpcClientTls | null;
  /** Interface the HTTP port binds; default 0.0.0.0. */
  readonly host?: string;
  /** Overrides --http_port (0 = a free port, for tests). */
  readonly httpPort?: number;
  /** Identifies this router to the directory (diagnostics); default `<hostname>:<pid>`. */
  readonly routerId?: string;
  /** `--tokenizer` and `--models_file` loaded by main (start-up errors are exit 2 there). */
  readonly tokenizers?: ModelTokenizers | null;
  /** `--tokenizer` alone (tests, benchmarks): one tokenizer for every model; ignored with `tokenizers`. */
  readonly tokenizer?: PromptTokenizer | null;
  /** Aborting before the port opened (SIGTERM while waiting for the directory) closes everything. */
  readonly signal?: AbortSignal;
}

export class RouterService {
  private closed = false;

  private constructor(
    private readonly viewClient: ViewClient,
    private readonly http: RouterHttpServer,
    private readonly forwarder: UpstreamForwarder,
    readonly metrics: RouterMetrics,
    private readonly reporter: InflightReporter | null,
    private readonly claims: ClaimOrder | null,
    /** The id it watches the view and reports in-flight load under (its tie rotations start from it). */
    readonly routerId: string,
  ) {}

  /**
   * Connects to the directory, waits for the first snapshot, then opens the HTTP port. Rejects if
   * `signal` aborts first or the port cannot be bound (everything started is closed again).
   */
  static async start(opts: RouterServiceOptions): Promise<RouterService> {
    const { flags, logger: log } = opts;
    const routerId = opts.routerId ?? `${hostname()}:${process.pid}`;
    const viewClient = ViewClient.start({
      directoryAddrs: flags.directoryAddr,
      routerId,
      staleAfterMs: flags.viewStaleAfterMs,
      internalApiToken: flags.internalApiToken === '' ? undefined : flags.internalApiToken,
      tls: opts.grpcTls ?? null,
      logger: log.child({ component: 'view' }),
    });
    const forwarder = new UpstreamForwarder();
    // routing.md "In-flight load": counted by every router whatever its policy (a fleet may mix
    // policies; CAR replicas read the others' counts), used by CAR.
    const inflight = flags.carInflightLoad ? new InflightLoad({ routerId }) : null;
    const reporter = inflight === null ? null : new InflightReporter(inflight, viewClient, { logger: log.child({ component: 'inflight' }) });
    const onAbort = (): void => void viewClient.close();
    opts.signal?.addEventListener('abort', onAbort, { once: true });
    try {
      log.info({ directory_addr: flags.directoryAddr.map((a) => `${a.host}:${a.port}`) }, 'waiting for the first view snapshot');
      await viewClient.whenReady();
      const view = viewClient.cache;
      if (view.streams().length === 0) {
        // routing.md CAR: no directory streams (or a stale view) means zero hit ratios, one warning.
        log.warn('the directory view has no KV event streams: no cache credit, routing by load only');
      }

      const viewStatus = (): ViewStatus => {
        const now = Date.now();
        // Age of the newest directory message (heartbeats every ≤ 500 ms included).
        const sinceHeardMs = Number.isFinite(view.lastHeardMs) ? Math.max(0, now - view.lastHeardMs) : null;
        return { version: Number(view.version), lagMs: sinceHeardMs, staleForMs: view.isStale(now) ? (sinceHeardMs ?? 0) : 0 };
      };
      const metrics = new RouterMetrics(viewStatus);
      const policy = createPolicy(flags, inflight, routerId);
      // TTFT learns from counted decisions and first tokens; its engine speeds are a gauge.
      const observer = policy instanceof TtftPolicy ? policy : null;
      if (observer !== null) metrics.registerThroughput(() => observer.throughputEstimates());
      // Claim order needs the prompts' fingerprints, which only pending prefix credit computes.
      const claims = inflight !== null && flags.carPendingPrefix && flags.carClaimWaitMs > 0 ? new ClaimOrder({ view, updates: viewClient, inflight, waitMs: flags.carClaimWaitMs, waitFraction: flags.carClaimWaitFraction, prefillTokens: flags.carClaimPrefillTokens }) : null;
      const decider = new RouteDecider(policy, view, metrics, flags.loadBalancePolicy, inflight, flags.carPendingPrefix, claims, observer);
      const tokenizers = opts.tokenizers ?? ModelTokenizers.single(opts.tokenizer ?? null);
      const tokenizer = tokenizers.fallback;
      const prompts = new PromptResolver(tokenizers, metrics);
      const identities = new IdentityResolver(view);
      if (tokenizers.isEmpty) log.warn('no --tokenizer and no --models_file: text and chat requests are routed by load only (counted in router_untokenized_requests_total)');
      else if (tokenizer !== null && !tokenizer.hasChatTemplate) log.warn({ tokenizer: tokenizer.info.path }, 'the tokenizer has no chat template and no --chat_template was given: chat requests are routed by load');
      for (const m of tokenizers.models) {
        if (!m.tokenizer.hasChatTemplate) log.warn({ model: m.model, tokenizer: m.tokenizer.info.path }, "the model's tokenizer has no chat template and its models-file entry names none: its chat requests are routed by load");
      }
      const proxy = new OpenAiProxy({
        decider,
        prompts,
        identities,
        forwarder,
        metrics,
        logger: log.child({ component: 'proxy' }),
        maxBodyBytes: 8 * 1024 * 1024,
        clock: Date.now,
        // Read right after the decision, from the same in-process view (no lookup on the network).
        upstreamUrl: (name) => view.instance(name)?.url ?? '',
      });
      const http = await RouterHttpServer.start({
        port: opts.httpPort ?? flags.httpPort,
        host: opts.host,
        view,
        decider,
        prompts,
        identities,
        tokenizer: tokenizer?.info ?? null,
        modelTokenizers: tokenizers.models.map((m) => ({ model: m.model, tokenizer: m.tokenizer.info })),
        proxy,
        metrics,
        internalApiToken: flags.internalApiToken,
        logger: log.child({ component: 'http' }),
      });
      log.info(
        {
          http_port: http.port,
          policy: flags.loadBalancePolicy,
          tokenizer: tokenizer?.info.path ?? null,
          tokenizer_fingerprint: tokenizer?.info.fingerprint ?? null,
          model_tokenizers: Object.fromEntries(tokenizers.models.map((m) => [m.model, m.tokenizer.info.path])),
          view_version: Number(view.version),
          streams: view.streams().length,
        },
        'router-svc ready',
      );
      return new RouterService(viewClient, http, forwarder, metrics, reporter, claims, routerId);
    } catch (e) {
      reporter?.close();
      forwarder.close();
      await viewClient.close();
      throw e;
    } finally {
      opts.signal?.removeEventListener('abort', onAbort);
    }
  }

  get port(): number {
    return this.http.port;
  }

  /** The view cache the HTTP port reads (tests compare it with the directory). */
  get view(): ViewClient['cache'] {
    return this.viewClient.cache;
  }

  /** Closes the port first (no new requests), then upstream sockets, then the view stream. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    // Waiting claims answer with their first decision now, not at the end of their wait.
    this.claims?.close();
    await this.http.close();
    this.reporter?.close();
    this.forwarder.close();
    await this.viewClient.close();
  }
}
