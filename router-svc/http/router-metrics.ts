/**
 * router-svc's Prometheus metrics (routing.md "Operations"): decisions by policy and outcome, the
 * chosen prefill's hit ratio, decision latency, the view's version, lag and stale time, and proxy
 * outcomes. Metrics wrap the core from the HTTP edge; the policy and the view cache never see them.
 * View gauges are read at scrape time from a callback, so the request path does no gauge work.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { createMetricsRegistry } from '../../shared/metrics/metrics-registry.js';
import { UNTOKENIZED_REASONS, type UntokenizedReason } from '../../shared/tokenize/chat-encoding.js';
import { HitRatioSeries } from '../status/hit-ratio-series.js';
import { UPSTREAM_RETRY_REASONS, type UpstreamRetryReason } from '../proxy/upstream-forwarder.js';

/** The view's state at scrape time (main wires it to the ViewClient). */
export interface ViewStatus {
  /** Version of the last applied update (0 before the first). */
  readonly version: number;
  /**
   * How old the router's knowledge is: time since the last view message was applied (the
   * directory heartbeats at least every 500 ms, so a healthy stream keeps this under ~0.5 s); null
   * before the first.
   */
  readonly lagMs: number | null;
  /** How long the view has been stale, 0 while fresh. */
  readonly staleForMs: number;
}

/** How a decision ended: `ok`, `no_candidate` (503), `bad_request` (400, never reached the policy). */
export type DecisionOutcome = 'ok' | 'no_candidate' | 'error';

/** How a claim (claim-order.ts) ended: its first decision kept, moved to another instance, or not back within the wait. */
export const CLAIM_OUTCOMES = ['stayed', 'moved', 'not_back'] as const;
export type ClaimOutcome = (typeof CLAIM_OUTCOMES)[number];

/** How a proxied request ended (`unknown_model`: the 404 of cache-identity §2). */
export type ProxyOutcome = 'ok' | 'upstream_error' | 'client_abort' | 'no_candidate' | 'bad_request' | 'unknown_model';

export class RouterMetrics {
  readonly registry = createMetricsRegistry({ processMetricsPrefix: 'router_' });
  /** Per-second kv_hit_ratio of recent decisions, for the status page (one array write per decision). */
  readonly hitRatios = new HitRatioSeries();
  private readonly decisions: Counter<'policy' | 'outcome'>;
  private readonly hitRatio: Histogram<'policy'>;
  private readonly latency: Histogram<'policy'>;
  private readonly proxied: Counter<'path' | 'outcome'>;
  private readonly untokenizedTotal: Counter<'reason'>;
  private readonly firstTokenSeconds: Histogram<'policy'>;
  private readonly ttftPredictionRatio: Histogram;
  /** The TTFT policy's θ per engine, read at scrape time (registerThroughput); none otherwise. */
  private throughputSource: (() => readonly { instance: string; tokensPerS: number }[]) | null = null;
  private readonly upstreamRetries: Counter<'reason'>;
  private readonly claims: Counter<'outcome'>;
  private readonly claimWait: Histogram;
  /** The same counts for the status page (tokenization.md §4), without a registry read. */
  private readonly untokenizedByReason = new Map<UntokenizedReason, number>();

  constructor(viewStatus: () => ViewStatus) {
    const registers = [this.registry];
    this.decisions = new Counter({
      name: 'router_decisions_total',
      help: 'Routing decisions by policy and outcome',
      labelNames: ['policy', 'outcome'],
      registers,
    });
    this.hitRatio = new Histogram({
      name: 'router_decision_kv_hit_ratio',
      help: 'kv_hit_ratio of the chosen prefill instance (routing.md CAR; 0 for text prompts and other policies)',
      labelNames: ['policy'],
      buckets: [0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.99, 1],
      registers,
    });
    this.latency = new Histogram({
      name: 'router_decision_latency_seconds',
      help: 'Time to decide (view read and scoring), excluding body read and forwarding',
      labelNames: ['policy'],
      buckets: [0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05],
      registers,
    });
    this.proxied = new Counter({
      name: 'router_proxy_requests_total',
      help: 'OpenAI-compatible requests by path and outcome',
      labelNames: ['path', 'outcome'],
      registers,
    });
    this.untokenizedTotal = new Counter({
      name: 'router_untokenized_requests_total',
      help: 'Text and chat requests routed without token ids (load only), by reason (tokenization.md §4)',
      labelNames: ['reason'],
      registers,
    });
    this.firstTokenSeconds = new Histogram({
      name: 'router_first_token_seconds',
      help: 'Proxied requests whose first token is visible (stream, or max_tokens 1): decision to the first response byte from the engine',
      labelNames: ['policy'],
      buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers,
    });
    this.ttftPredictionRatio = new Histogram({
      name: 'router_ttft_prediction_ratio',
      help: 'TTFT policy: observed over predicted time to first token of the chosen engine (1 = exact)',
      buckets: [0.25, 0.5, 0.67, 0.8, 0.9, 1, 1.1, 1.25, 1.5, 2, 4],
      registers,
    });
    const throughput = (): readonly { instance: string; tokensPerS: number }[] => this.throughputSource?.() ?? [];
    new Gauge({
      name: 'router_ttft_prefill_throughput_tokens_per_second',
      help: "TTFT policy: each engine's learned prefill throughput (the prior until first tokens are observed)",
      labelNames: ['instance'],
      registers,
      collect() {
        this.reset();
        for (const e of throughput()) this.set({ instance: e.instance }, e.tokensPerS);
      },
    });
    // Every reason is exported from the start, so an alert on a rate sees 0 rather than no series.
    for (const reason of UNTOKENIZED_REASONS) {
      this.untokenizedTotal.inc({ reason }, 0);
      this.untokenizedByReason.set(reason, 0);
    }
    this.upstreamRetries = new Counter({
      name: 'router_upstream_retries_total',
      help: 'Proxied requests sent once more, to the next-best instance, because the chosen engine vanished before any answer byte (refused, reset, unreachable)',
      labelNames: ['reason'],
      registers,
    });
    for (const reason of UPSTREAM_RETRY_REASONS) this.upstreamRetries.inc({ reason }, 0);
    this.claims = new Counter({
      name: 'router_claims_total',
      help: "Claims (no prefix credit anywhere, or an own prefill of --car_claim_prefill_tokens or more; other replicas about) that waited for the directory's order against the other replicas', by outcome: stayed, moved to another instance, not_back within its wait (--car_claim_wait_ms, or --car_claim_wait_fraction of its own prefill)",
      labelNames: ['outcome'],
      registers,
    });
    this.claimWait = new Histogram({
      name: 'router_claim_wait_seconds',
      help: `How long a claim's answer waited for the directory's order and then for the claims ordered before it to settle (each wait at most --car_claim_wait_ms, or --car_claim_wait_fraction of its own prefill)`,
      buckets: [0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1],
      registers,
    });
    for (const outcome of CLAIM_OUTCOMES) this.claims.inc({ outcome }, 0);
    new Gauge({
      name: 'router_view_version',
      help: 'Version of the last view update applied',
      registers,
      collect() {
        this.set(viewStatus().version);
      },
    });
    new Gauge({
      name: 'router_view_lag_seconds',
      help: 'Directory-to-router delay of the last view update (clocks of both hosts)',
      registers,
      collect() {
        const lag = viewStatus().lagMs;
        this.set(lag === null ? 0 : lag / 1000);
      },
    });
    new Gauge({
      name: 'router_view_stale_seconds',
      help: 'How long the view has been stale (no cache credit while > 0); 0 while fresh',
      registers,
      collect() {
        this.set(viewStatus().staleForMs / 1000);
      },
    });
  }

  /** One decision; `hitRatio` is the chosen prefill's, null when there was no decision. */
  decision(policy: string, outcome: DecisionOutcome, seconds: number, hitRatio: number | null): void {
    this.decisions.inc({ policy, outcome });
    this.latency.observe({ policy }, seconds);
    if (hitRatio !== null) {
      this.hitRatio.observe({ policy }, hitRatio);
      this.hitRatios.record(hitRatio);
    }
  }

  /** A text or chat request that got no token ids. */
  untokenized(reason: UntokenizedReason): void {
    this.untokenizedTotal.inc({ reason });
    this.untokenizedByReason.set(reason, (this.untokenizedByReason.get(reason) ?? 0) + 1);
  }

  /** Untokenized requests so far, by reason (every reason present). */
  untokenizedCounts(): Record<UntokenizedReason, number> {
    return Object.fromEntries(this.untokenizedByReason) as Record<UntokenizedReason, number>;
  }

  /** A first token `ms` after its decision; `predictedMs` when the policy predicted one (TTFT). */
  firstToken(policy: string, ms: number, predictedMs: number | null): void {
    this.firstTokenSeconds.observe({ policy }, ms / 1000);
    if (predictedMs !== null && predictedMs > 0) this.ttftPredictionRatio.observe(ms / predictedMs);
  }

  /** Where the θ gauge reads from (the TTFT policy). */
  registerThroughput(source: () => readonly { instance: string; tokensPerS: number }[]): void {
    this.throughputSource = source;
  }

  proxyRequest(path: string, outcome: ProxyOutcome): void {
    this.proxied.inc({ path, outcome });
  }

  /** A claim (claim-order.ts) answered after `heldMs`. */
  claim(outcome: ClaimOutcome, heldMs: number): void {
    this.claims.inc({ outcome });
    this.claimWait.observe(heldMs / 1000);
  }

  /** A proxied request sent again to the next-best instance (openai-proxy.ts). */
  upstreamRetry(reason: UpstreamRetryReason): void {
    this.upstreamRetries.inc({ reason });
  }
}
