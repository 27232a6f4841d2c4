/**
 * `GET /v1/status`: what the router knows, as the status page draws it — instances (type, role,
 * state, load, incarnation, served models and where the directory found them), streams (sync state, sequence, residency per tier), the view's
 * epoch/version/staleness, the policy and the per-second hit-ratio series. Pure: the view, the
 * series and `nowMs` come in; one pass over instances and streams, for an operator's poll (once a
 * second per open page), never on the request path.
 *
 * Streams are reported as the directory sent them (`synchronized`, block counts), with the view's
 * staleness beside them: the query endpoint zeroes a stale view's streams, the page says why.
 */
import { isCandidate } from '../policy/candidates.js';
import type { TokenizerInfo } from '../../shared/tokenize/prompt-tokenizer.js';
import type { ViewCache } from '../viewcache/view-cache.js';
import type { HitRatioSeries } from './hit-ratio-series.js';

export interface WireStatusInstance {
  name: string;
  type: string;
  /** MIX's current role; '' for the other types. */
  role: string;
  state: string;
  schedulable: boolean;
  /** Schedulable, not SUSPECT, with a load report (routing.md "Candidates"). */
  candidate: boolean;
  incarnation_id: string;
  register_ts_ms: number;
  dp_size: number;
  /** cache-identity §1: the models it serves (`parent` set for a LoRA adapter); null = unknown (any model). */
  models: { name: string; parent: string | null }[] | null;
  /** Where the directory learned of it ("etcd", "engines_file", "dns:<name>"); '' when not said. */
  source: string;
  /** null: no valid load report yet. */
  load: { waiting_requests_num: number; gpu_cache_usage_perc: number; reported_at_ms: number } | null;
}

export interface WireStatusStream {
  instance_name: string;
  dp_rank: number;
  block_size: number;
  synchronized: boolean;
  /** kv-events §8 `last` as a decimal string (a u64: exact, whatever its size); "-1" when none. */
  sequence: string;
  error: string;
  device_blocks: number;
  host_blocks: number;
  incarnation_id: string;
}

export interface WireStatus {
  now_ms: number;
  policy: { name: string };
  view: {
    epoch: string;
    version: string;
    stale: boolean;
    /** Why the view was marked stale; '' when it was not (or is stale by silence alone). */
    stale_reason: string;
    /** Since the last directory message (heartbeats included); null before the first. */
    since_heard_ms: number | null;
  };
  /** tokenization.md §4: the tokenizer in use (null: text is routed by load) and the requests left without ids. */
  tokenizer: TokenizerInfo | null;
  /** cache-identity §5: each `--models_file` model's tokenizer (an adapter uses its parent's); [] without the file. */
  model_tokenizers: ModelTokenizerInfo[];
  untokenized_requests: { total: number; by_reason: Record<string, number> };
  instances: WireStatusInstance[];
  streams: WireStatusStream[];
  hit_ratio: {
    interval_ms: number;
    decisions: number;
    points: { t_ms: number; mean: number; max: number; count: number }[];
  };
}

/** One `--models_file` model and the tokenizer its requests use. */
export interface ModelTokenizerInfo {
  readonly model: string;
  readonly tokenizer: TokenizerInfo;
}

export interface StatusSources {
  readonly view: ViewCache;
  readonly hitRatios: HitRatioSeries;
  /** `--load_balance_policy`. */
  readonly policyName: string;
  /** Absent: no tokenizer, no untokenized counts (callers that predate tokenization). */
  readonly tokenizer?: TokenizerInfo | null;
  /** Absent: no models file. */
  readonly modelTokenizers?: readonly ModelTokenizerInfo[];
  readonly untokenized?: () => Readonly<Record<string, number>>;
}

export function buildStatus(src: StatusSources, nowMs: number): WireStatus {
  const { view } = src;
  const instances: WireStatusInstance[] = [];
  for (const i of view.instances()) {
    instances.push({
      name: i.name,
      type: i.type,
      role: i.currentRole,
      state: i.state,
      schedulable: i.schedulable,
      candidate: isCandidate(i),
      incarnation_id: i.incarnationId,
      register_ts_ms: i.registerTsMs,
      dp_size: i.dpSize,
      models: i.models === null ? null : i.models.map((m) => ({ name: m.name, parent: m.parent })),
      source: i.source,
      load:
        i.load === null
          ? null
          : { waiting_requests_num: i.load.waitingRequestsNum, gpu_cache_usage_perc: i.load.gpuCacheUsagePerc, reported_at_ms: i.load.reportedAtMs },
    });
  }
  const streams: WireStatusStream[] = [];
  for (const s of view.streams()) {
    streams.push({
      instance_name: s.instanceName,
      dp_rank: s.dpRank,
      block_size: s.blockSize,
      synchronized: s.synchronized,
      sequence: s.sequence.toString(),
      error: s.error,
      device_blocks: s.deviceBlocks,
      host_blocks: s.hostBlocks,
      incarnation_id: s.incarnationId,
    });
  }
  const heard = view.lastHeardMs;
  const byReason = { ...(src.untokenized?.() ?? {}) };
  let untokenizedTotal = 0;
  for (const n of Object.values(byReason)) untokenizedTotal += n;
  return {
    now_ms: nowMs,
    policy: { name: src.policyName },
    view: {
      epoch: view.epoch,
      version: view.version.toString(),
      stale: view.isStale(nowMs),
      stale_reason: view.staleReason ?? '',
      since_heard_ms: Number.isFinite(heard) ? Math.max(0, nowMs - heard) : null,
    },
    tokenizer: src.tokenizer ?? null,
    model_tokenizers: [...(src.modelTokenizers ?? [])],
    untokenized_requests: { total: untokenizedTotal, by_reason: byReason },
    instances,
    streams,
    hit_ratio: {
      interval_ms: src.hitRatios.intervalMs,
      decisions: src.hitRatios.decisions,
      points: src.hitRatios.series().map((p) => ({ t_ms: p.tMs, mean: p.mean, max: p.max, count: p.count })),
    },
  };
}
