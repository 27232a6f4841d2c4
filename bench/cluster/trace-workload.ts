/**
 * A Mooncake-format trace (mooncake-trace.ts) as a cluster-benchmark workload: every request is a
 * session of one `/v1/completions` request (token ids, max_tokens 1), bodies serialized before
 * timing, replayed open loop at its trace times scaled to the run's rate. Conversations need no
 * session here: a later turn's hash ids repeat the earlier context's, so its prompt extends it.
 *
 * Used for `--trace=FILE` (a published trace) and for the generated mixed-length workload
 * (mixed-trace.ts).
 */
import { traceStats, traceTokenIds, type TraceRecord, type TraceStats } from './mooncake-trace.js';
import { workingSetBlocks, type SessionRequest, type Workload } from './workloads.js';

export interface TraceWorkload extends Workload {
  readonly name: 'mixed_length' | 'trace';
  /** Each request's arrival, ms after the first request's (the trace's own time). */
  readonly arrivalsMs: readonly number[];
  /** Requests per second of the trace as recorded (over its whole span). */
  readonly nativeRatePerS: number;
  readonly stats: TraceStats;
}

export function isTraceWorkload(w: Workload): w is TraceWorkload {
  return (w as Partial<TraceWorkload>).arrivalsMs !== undefined;
}

/** The records (sorted by time) as a workload; `seed` fixes the tokens each hash id stands for. */
export function traceWorkload(name: TraceWorkload['name'], records: readonly TraceRecord[], blockSize: number, seed: number): TraceWorkload {
  if (records.length === 0) throw new RangeError('traceWorkload: no request');
  const t0 = records[0]!.timestampMs;
  const sessions: SessionRequest[][] = records.map((r, i) => {
    const tokenIds = traceTokenIds(r, seed, i);
    return [{ tokenIds, path: '/v1/completions', body: JSON.stringify({ prompt: tokenIds, max_tokens: 1 }), delayMs: 0 }];
  });
  const stats = traceStats(records);
  const spanS = Math.max(stats.spanMs / 1000, 1e-3);
  let promptTokens = 0;
  for (const r of records) promptTokens += r.inputLength;
  return {
    name,
    sessions,
    requests: records.length,
    promptTokens,
    workingSetBlocks: workingSetBlocks(sessions, blockSize),
    shape: { requests: records.length, mean_input_tokens: stats.inputTokens.mean, p90_input_tokens: stats.inputTokens.p90, span_s: Math.round(spanS) },
    arrivalsMs: records.map((r) => r.timestampMs - t0),
    nativeRatePerS: records.length > 1 ? (records.length - 1) / spanS : 1,
    stats,
  };
}

/**
 * Send times (ms from the run start) of `arrivalsMs` replayed at `ratePerS` requests per second
 * on average: the trace's times divided by the speed ratePerS / nativeRatePerS, from the first.
 */
export function traceStarts(arrivalsMs: readonly number[], nativeRatePerS: number, ratePerS: number): number[] {
  if (!(ratePerS > 0) || !(nativeRatePerS > 0)) throw new RangeError(`traceStarts: rates must be positive, got ${ratePerS} (native ${nativeRatePerS})`);
  const speed = ratePerS / nativeRatePerS;
  const t0 = arrivalsMs.length === 0 ? 0 : arrivalsMs[0]!;
  return arrivalsMs.map((a) => (a - t0) / speed);
}
