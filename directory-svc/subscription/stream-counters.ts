/**
 * The per-stream counters of kv-events §10 (labels `instance`, `dp_rank` are the metrics edge's).
 * One live object per subscriber, written only by the subscriber and its reconciliation, read at
 * scrape and ListStreams time.
 */
import type { SkipCounters } from '../index/stream-index.js';

export interface StreamCounters {
  batchesApplied: number;
  topicMismatch: number;
  skipped: SkipCounters;
  /** Keyed by StreamError class. */
  syncLost: Record<string, number>;
  recoveriesOk: number;
  recoveriesFailed: number;
  restores: number;
  silentLoss: number;
  reconcileFailures: number;
}

export function newStreamCounters(): StreamCounters {
  return {
    batchesApplied: 0,
    topicMismatch: 0,
    skipped: zeroSkips(),
    syncLost: {},
    recoveriesOk: 0,
    recoveriesFailed: 0,
    restores: 0,
    silentLoss: 0,
    reconcileFailures: 0,
  };
}

/** `sync_lost{class}`: every failure recorded in the stream's `error`. */
export function countSyncLost(counters: StreamCounters, errorClass: string): void {
  counters.syncLost[errorClass] = (counters.syncLost[errorClass] ?? 0) + 1;
}

/** Skips of an index being built, added to the stream's only once that index is served. */
export function zeroSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

export function addSkips(into: SkipCounters, from: SkipCounters): void {
  into.outOfScope += from.outOfScope;
  into.descendant += from.descendant;
  into.orphan += from.orphan;
  if (from.medium !== undefined) into.medium = (into.medium ?? 0) + from.medium;
  if (from.multimodal !== undefined) into.multimodal = (into.multimodal ?? 0) + from.multimodal;
  if (from.group !== undefined) into.group = (into.group ?? 0) + from.group;
}
