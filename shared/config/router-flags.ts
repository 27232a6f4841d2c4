/**
 * router-svc's flags (architecture.md "Processes and flags"; routing.md CAR and SLO_AWARE).
 * Only `router-svc/main.ts` calls this with `process.argv`.
 */
import { flagsHelp, parseFlags, type FlagValues, type ParsedArgs } from './flags.js';
import { LOG_LEVEL_VALUES } from './log-level.js';

export const LOAD_BALANCE_POLICIES = ['RR', 'SLO_AWARE', 'CAR', 'TTFT'] as const;
export type LoadBalancePolicy = (typeof LOAD_BALANCE_POLICIES)[number];

export const ROUTER_FLAGS = {
  directory_addr: {
    type: 'host-port-list',
    default: '127.0.0.1:50051',
    help: 'directory-svc gRPC addresses; the router fails over between them',
  },
  http_port: { type: 'int', default: 8888, min: 1, max: 65535, help: 'HTTP port: query endpoint, route, OpenAI-compatible proxy, metrics' },
  load_balance_policy: { type: 'enum', values: LOAD_BALANCE_POLICIES, default: 'RR', help: 'routing policy: RR, SLO_AWARE, CAR (routing.md), or TTFT (the soonest predicted first token)' },
  car_prefill_lambda: {
    type: 'float',
    default: 0.5,
    min: 0,
    max: 1,
    help: 'CAR weight of cache misses against queue cost: 1 compares only misses, 0 only queues',
  },
  car_host_hit_weight: { type: 'float', default: 0.5, min: 0, max: 1, help: 'CAR credit of a host-only hit token relative to a device hit' },
  car_inflight_load: {
    type: 'bool',
    default: true,
    help: "CAR and TTFT add to each instance's reported waiting the requests routed to it (by this router and, through the directory, the others) that no load report reflects yet (TTFT: with their prefill tokens)",
  },
  car_pending_prefix: {
    type: 'bool',
    default: true,
    help: 'with --car_inflight_load, CAR credits the prefix a prompt shares with a request routed to an instance and still in flight there (before its KV events reach the view)',
  },
  car_claim_wait_ms: {
    type: 'int',
    default: 20,
    min: 0,
    max: 1000,
    help: "with --car_pending_prefix and other router replicas: a request no instance holds any prefix of waits at most this long for the directory to order its decision against the other replicas', and follows an earlier one of the same prefix; 0 = off",
  },
  car_claim_wait_fraction: {
    type: 'float',
    default: 0.3,
    min: 0,
    max: 1,
    help: 'with --car_claim_wait_ms: a claim whose own prefill time the policy predicts (TTFT) waits at most this fraction of it when that is longer than --car_claim_wait_ms (at most 1000 ms): a round trip is worth more to a longer prefill; 0 = --car_claim_wait_ms alone',
  },
  car_claim_prefill_tokens: {
    type: 'int',
    default: 1024,
    min: 0,
    max: 100_000_000,
    help: "with --car_claim_wait_ms: a request whose own prefill on its first choice reaches this many tokens is ordered against the other replicas' decisions as a cold one is, so a burst's long prompts decided at once on several replicas do not pile onto one engine; 0 = cold requests only",
  },
  ttft_prefill_tokens_per_s: {
    type: 'float',
    default: 8000,
    min: 1,
    max: 100_000_000,
    help: "TTFT: prior of every engine's prefill throughput in tokens/s, until first-token times the proxy observes replace it",
  },
  ttft_prior_samples: {
    type: 'int',
    default: 8,
    min: 0,
    max: 100000,
    help: 'TTFT: how many first-token observations the throughput prior weighs as; it fades as observations come in',
  },
  ttft_throughput_window: {
    type: 'int',
    default: 64,
    min: 1,
    max: 100000,
    help: 'TTFT: first-token observations per engine the throughput estimate averages over (an exponential window)',
  },
  ttft_host_token_cost: {
    type: 'float',
    default: 0.25,
    min: 0,
    max: 1,
    help: 'TTFT: cost of reloading a host-only hit token relative to recomputing it (0 = free, 1 = no better than a miss)',
  },
  ttft_work_slack: {
    type: 'float',
    default: 1,
    min: 0,
    max: 1,
    help: 'TTFT: among the instances predicted within this fraction of the soonest first token, the one with the least prefill work to do wins (a cached prefix over a recompute)',
  },
  ttft_slack_growth: {
    type: 'float',
    default: 2,
    min: 0,
    max: 10,
    help: "TTFT: a cached prefix widens --ttft_work_slack to (1 + this × the share of the soonest prediction its spared prefill takes) times itself, up to 1 + this (0 = never widens: the plain slack)",
  },
  ttft_tie_tolerance: {
    type: 'float',
    default: 0.05,
    min: 0,
    max: 0.5,
    help: "TTFT: instances left with equal prefill work and predicted within this fraction of the soonest of them count as tied, and CAR's tie rule (fewest Device blocks, then rotation) picks: a difference the throughput estimates' noise makes (0 = the soonest always wins)",
  },
  internal_api_token: { type: 'string', default: '', placeholder: 'token', help: 'required X-Internal-Token on internal endpoints when set' },
  grpc_tls_ca: { type: 'string', default: '', placeholder: 'ca.pem', help: "CA (PEM) verifying the directory's gRPC certificate; empty = plaintext gRPC" },
  grpc_tls_cert: { type: 'string', default: '', placeholder: 'cert.pem', help: 'client certificate (PEM) for a directory requiring mutual TLS' },
  grpc_tls_key: { type: 'string', default: '', placeholder: 'key.pem', help: 'private key (PEM) of --grpc_tls_cert' },
  view_stale_after_ms: {
    type: 'int',
    default: 3000,
    min: 100,
    max: 600000,
    help: 'no view update for this long: no cache credit until the view is fresh again',
  },
  // Spec gives no default: unset means "no target", every candidate is ranked by prediction alone.
  target_ttft: { type: 'float', key: 'targetTtftMs', default: null, min: 0, max: 3600000, help: 'SLO_AWARE TTFT target in ms' },
  target_tpot: { type: 'float', key: 'targetTpotMs', default: null, min: 0, max: 3600000, help: 'SLO_AWARE TPOT target in ms' },
  tokenizer: {
    type: 'string',
    default: '',
    placeholder: 'dir',
    help: 'model directory with tokenizer.json and tokenizer_config.json: text and chat requests get cache credit; empty = routed by load',
  },
  chat_template: { type: 'string', default: '', placeholder: 'file', help: "Jinja chat template overriding tokenizer_config.json's (as the engine's --chat-template)" },
  // cache-identity §2, §5 (issue 26): request identity and per-model tokenizers.
  models_file: {
    type: 'string',
    default: '',
    placeholder: 'file',
    help: 'JSON {"models":[{"model","tokenizer","chat_template"?}]}: each model\'s tokenizer (an adapter uses its parent\'s); --tokenizer then serves the models it does not name',
  },
  log_level: { type: 'enum', values: LOG_LEVEL_VALUES, default: 'info', help: 'pino log level' },
} as const;

export type RouterFlags = FlagValues<typeof ROUTER_FLAGS>;

export const ROUTER_USAGE = 'Usage: node dist/router-svc/main.js [--name=value ...]';

/** Parses router-svc's argv (without node and script); throws `ConfigError`. */
export function parseRouterFlags(argv: readonly string[]): ParsedArgs<RouterFlags> {
  return parseFlags(ROUTER_FLAGS, argv);
}

export function routerHelp(): string {
  return flagsHelp(ROUTER_USAGE, ROUTER_FLAGS);
}
