/**
 * The directory's per-stream Prometheus metrics: the kv-events §10 counters and the stream and
 * index gauges, labelled `instance` and `dp_rank`. They wrap the subscribers from outside: every
 * value is read at scrape time from the subscriber's live `counters`, `state` and served index
 * (shared/metrics/scraped-metrics.ts), so the event hot path gains no work and no allocation.
 *
 * Series of a stream exist from its opening until its close (a `StreamTracker` of the Directory):
 * each scrape re-emits only the tracked streams, so a removed stream's series are gone from the
 * next scrape.
 *
 * Metric names (all per stream, labels `instance`, `dp_rank`, plus the one named):
 *   kv_batches_applied_total, kv_topic_mismatch_total, kv_skipped_total{reason},
 *   kv_sync_lost_total{class}, kv_recoveries_total{result}, kv_restores_total,
 *   kv_silent_loss_total, kv_reconcile_failures_total            (§10 counters)
 *   kv_stream_state            numeric state, the proto's StreamState numbers:
 *                              1 CONNECTING, 2 RECOVERING, 3 SYNCHRONIZED, 4 UNSYNCHRONIZED
 *   kv_stream_in_state{state}  1 for the current state, 0 for the other three, so
 *                              `sum by (state) (kv_stream_in_state)` counts streams per state
 *   kv_stream_sequence         `last` (−1 when none); a float, so exact up to 2^53
 *   kv_index_blocks{tier}      device / host content keys of the SERVED index (§8)
 *   kv_index_entries           (engine hash, tier) pairs of the served index (§5.2)
 *   kv_index_bytes             estimated bytes retained by the served index
 * The index gauges read the index the stream serves, so they are 0 outside SYNCHRONIZED (§7: no
 * other state serves an index), matching ListStreams.
 */
import type { Registry } from 'prom-client';
import { scrapedCounter, scrapedGauge, type EmitSample } from '../../shared/metrics/scraped-metrics.js';
import type { DirectoryStream, OpenedStream, StreamTracker } from '../directory.js';
import type { StreamListener } from '../subscription/stream-observer.js';
import type { StreamErrorClass } from '../errors/stream-errors.js';
import type { StreamIndex } from '../index/stream-index.js';
import { STREAM_STATES, type StreamState } from '../subscription/stream-state.js';

type StreamLabel = 'instance' | 'dp_rank';

/** proto/kvdirectory.proto `StreamState` numbers, so a dashboard and `kvctl streams` agree. */
export const STREAM_STATE_VALUES: Readonly<Record<StreamState, number>> = Object.freeze({
  CONNECTING: 1,
  RECOVERING: 2,
  SYNCHRONIZED: 3,
  UNSYNCHRONIZED: 4,
});

/**
 * Every §10 error class, emitted at 0 from a stream's first scrape so `increase()` sees the first
 * loss of each class (a series that appears at 1 hides that increment).
 */
const SYNC_LOST_CLASSES: readonly StreamErrorClass[] = [
  'connecting',
  'disconnected',
  'parse',
  'protocol',
  'inconsistent',
  'gap',
  'seq_reset',
  'timeout',
  'limit',
  // engines.md §3 (vllm/sglang streams); at 0 on xllm streams like every other class.
  'history_lost',
];

interface Tracked {
  readonly labels: Readonly<Record<StreamLabel, string>>;
  readonly stream: DirectoryStream;
}

export class StreamMetrics implements StreamTracker {
  private readonly tracked = new Set<Tracked>();

  constructor(registry: Registry) {
    const registers = [registry];
    const perStream = ['instance', 'dp_rank'] as const;
    const counter = (name: string, help: string, read: (s: DirectoryStream) => number): void => {
      scrapedCounter({ name, help, labelNames: perStream, registers, sample: (emit) => this.each((t) => emit(t.labels, read(t.stream))) });
    };
    counter('kv_batches_applied_total', 'Live batches applied to the served index (kv-events §10)', (s) => s.counters.batchesApplied);
    counter('kv_topic_mismatch_total', 'Live messages ignored for a foreign topic (kv-events §2, D6)', (s) => s.counters.topicMismatch);
    counter('kv_restores_total', 'Synchronization restored from a full-state batch (kv-events §7.3)', (s) => s.counters.restores);
    counter('kv_silent_loss_total', 'Reconciliations that found and replaced a diverged index (kv-events §7.5)', (s) => s.counters.silentLoss);
    counter('kv_reconcile_failures_total', 'Reconciliation checks abandoned (kv-events §7.5)', (s) => s.counters.reconcileFailures);

    scrapedCounter({
      name: 'kv_skipped_total',
      help: 'Blocks skipped instead of indexed, by reason: out_of_scope, descendant, orphan (kv-events §5), multimodal, group (cache-identity §4), medium (engines.md §2)',
      labelNames: ['instance', 'dp_rank', 'reason'],
      registers,
      sample: (emit) =>
        this.each(({ labels, stream }) => {
          const k = stream.counters.skipped;
          emit({ ...labels, reason: 'out_of_scope' }, k.outOfScope);
          emit({ ...labels, reason: 'descendant' }, k.descendant);
          emit({ ...labels, reason: 'orphan' }, k.orphan);
          // cache-identity §4 rules 2 and 4: any stream can meet these, so they start at 0 (a
          // series that appears at 1 hides that first increment from increase()).
          emit({ ...labels, reason: 'multimodal' }, k.multimodal ?? 0);
          emit({ ...labels, reason: 'group' }, k.group ?? 0);
          // engines.md §2: only streams that ever saw a STORAGE block report this reason.
          if (k.medium !== undefined) emit({ ...labels, reason: 'medium' }, k.medium);
        }),
    });
    scrapedCounter({
      name: 'kv_sync_lost_total',
      help: 'Losses of synchronization and aborted recoveries, by error class (kv-events §10)',
      labelNames: ['instance', 'dp_rank', 'class'],
      registers,
      sample: (emit) => this.each((t) => emitSyncLost(emit, t)),
    });
    scrapedCounter({
      name: 'kv_recoveries_total',
      help: 'Snapshot recoveries by result (kv-events §7.2)',
      labelNames: ['instance', 'dp_rank', 'result'],
      registers,
      sample: (emit) =>
        this.each(({ labels, stream }) => {
          emit({ ...labels, result: 'ok' }, stream.counters.recoveriesOk);
          emit({ ...labels, result: 'failed' }, stream.counters.recoveriesFailed);
        }),
    });

    scrapedGauge({
      name: 'kv_stream_state',
      help: 'Subscriber state: 1 CONNECTING, 2 RECOVERING, 3 SYNCHRONIZED, 4 UNSYNCHRONIZED (kv-events §7)',
      labelNames: perStream,
      registers,
      sample: (emit) => this.each((t) => emit(t.labels, STREAM_STATE_VALUES[t.stream.state])),
    });
    scrapedGauge({
      name: 'kv_stream_in_state',
      help: '1 for the subscriber\'s current state, 0 for the others (kv-events §7)',
      labelNames: ['instance', 'dp_rank', 'state'],
      registers,
      sample: (emit) =>
        this.each(({ labels, stream }) => {
          const current = stream.state;
          for (const state of STREAM_STATES) emit({ ...labels, state }, state === current ? 1 : 0);
        }),
    });
    scrapedGauge({
      name: 'kv_stream_sequence',
      help: 'Seq of the last batch reflected in the index, -1 when none (kv-events §8 sequence)',
      labelNames: perStream,
      registers,
      // Number(bigint): exact up to 2^53, and Prometheus samples are doubles anyway.
      sample: (emit) => this.each((t) => emit(t.labels, Number(t.stream.toQueryable().sequence))),
    });
    scrapedGauge({
      name: 'kv_index_blocks',
      help: 'Content keys of the served index by tier; replicas count in both (kv-events §8)',
      labelNames: ['instance', 'dp_rank', 'tier'],
      registers,
      sample: (emit) =>
        this.each(({ labels, stream }) => {
          const index = servedIndex(stream);
          emit({ ...labels, tier: 'device' }, index === null ? 0 : index.deviceBlocks);
          emit({ ...labels, tier: 'host' }, index === null ? 0 : index.hostBlocks);
        }),
    });
    scrapedGauge({
      name: 'kv_index_entries',
      help: '(engine hash, tier) entries of the served index, against max_blocks_per_stream (kv-events §5.2)',
      labelNames: perStream,
      registers,
      sample: (emit) => this.each((t) => emit(t.labels, servedIndex(t.stream)?.entryCount ?? 0)),
    });
    scrapedGauge({
      name: 'kv_index_bytes',
      help: 'Estimated bytes retained by the served index (typed arrays)',
      labelNames: perStream,
      registers,
      sample: (emit) => this.each((t) => emit(t.labels, servedIndex(t.stream)?.approxBytes() ?? 0)),
    });
  }

  /** Number of streams with series (tests, diagnostics). */
  get streamCount(): number {
    return this.tracked.size;
  }

  /** Gives the stream its series until it closes; nothing else is heard (values are read at scrape). */
  streamOpened({ config, stream }: OpenedStream): StreamListener {
    const entry: Tracked = { labels: Object.freeze({ instance: config.instanceName, dp_rank: String(config.dpRank) }), stream };
    this.tracked.add(entry);
    return { streamClosed: () => this.tracked.delete(entry) };
  }

  private each(fn: (t: Tracked) => void): void {
    for (const t of this.tracked) fn(t);
  }
}

function emitSyncLost(emit: EmitSample<'instance' | 'dp_rank' | 'class'>, { labels, stream }: Tracked): void {
  const byClass = stream.counters.syncLost;
  for (const cls of SYNC_LOST_CLASSES) emit({ ...labels, class: cls }, byClass[cls] ?? 0);
  // A class this list does not know yet still shows up rather than being dropped.
  for (const cls of Object.keys(byClass)) {
    if (!(SYNC_LOST_CLASSES as readonly string[]).includes(cls)) emit({ ...labels, class: cls }, byClass[cls] ?? 0);
  }
}

/** The index the stream serves (§7: only SYNCHRONIZED serves one), or null. */
function servedIndex(stream: DirectoryStream): StreamIndex | null {
  const q = stream.toQueryable();
  return q.synchronized ? q.index : null;
}
