/**
 * The kvdirectory.v1 messages as grpc-js sees them under KVDIRECTORY_LOADER_OPTIONS (wire field
 * names, 64-bit integers as decimal strings), and the mapping from the directory's domain types.
 * The shapes come from proto/generated/ (`npm run proto:types`); wire names appear only there,
 * here and in the .proto.
 */
import type { QueryRequest__Output } from '../../proto/generated/kvdirectory/v1/QueryRequest.js';
import type { QueryResponse__Output } from '../../proto/generated/kvdirectory/v1/QueryResponse.js';
import type { StreamCounters__Output } from '../../proto/generated/kvdirectory/v1/StreamCounters.js';
import type { StreamMatch__Output } from '../../proto/generated/kvdirectory/v1/StreamMatch.js';
import type { StreamStatus__Output } from '../../proto/generated/kvdirectory/v1/StreamStatus.js';
import type { QueryResult } from '../../shared/view/query-result.js';
import type { DirectoryStats, StreamStatus } from '../directory.js';

export type WireQueryRequest = QueryRequest__Output;

/** A routing.md `matches` row in the proto: `sequence` is an int64, so a decimal string. */
export type WireStreamMatch = StreamMatch__Output;

export type WireQueryResponse = QueryResponse__Output;

export type WireStreamCounters = StreamCounters__Output;

/** Always sent with its counters (the generated type allows a message field to be null). */
export type WireStreamStatus = Omit<StreamStatus__Output, 'counters'> & { counters: WireStreamCounters };

export interface WireListStreamsResponse {
  streams: WireStreamStatus[];
}

export interface WireGetStatsResponse {
  directory_enabled: boolean;
  stream_source: string;
  streams_total: number;
  streams_synchronized: number;
  streams_by_state: Record<string, number>;
  device_blocks_total: string;
  host_blocks_total: string;
  entries_total: string;
  queries_total: string;
  started_at_ms: string;
  uptime_ms: string;
  /** Set by the view handlers when the view stream is served; proto defaults otherwise. */
  view_epoch?: string;
  view_version?: string;
  view_watchers?: number;
}

export function toWireQueryResponse(r: QueryResult): WireQueryResponse {
  const matches: WireStreamMatch[] = new Array<WireStreamMatch>(r.matches.length);
  for (let i = 0; i < r.matches.length; i++) {
    const m = r.matches[i]!;
    matches[i] = { ...m, sequence: String(m.sequence) };
  }
  return { input_tokens: r.input_tokens, block_size: r.block_size, matches };
}

export function toWireStreamStatus(s: StreamStatus): WireStreamStatus {
  const c = s.counters;
  const syncLost: Record<string, string> = {};
  for (const [cls, n] of Object.entries(c.syncLost)) syncLost[cls] = String(n);
  return {
    instance_name: s.instanceName,
    dp_rank: s.dpRank,
    block_size: s.blockSize,
    endpoint: s.endpoint,
    replay_endpoint: s.replayEndpoint,
    topic: s.topic,
    hash_seed: String(s.hashSeed),
    engine_kind: s.engineKind,
    state: s.state,
    synchronized: s.synchronized,
    sequence: String(s.sequence),
    error: s.error,
    device_blocks: String(s.deviceBlocks),
    host_blocks: String(s.hostBlocks),
    entry_count: String(s.entryCount),
    counters: {
      batches_applied: String(c.batchesApplied),
      topic_mismatch: String(c.topicMismatch),
      skipped_out_of_scope: String(c.skipped.outOfScope),
      skipped_descendant: String(c.skipped.descendant),
      skipped_orphan: String(c.skipped.orphan),
      sync_lost: syncLost,
      recoveries_ok: String(c.recoveriesOk),
      recoveries_failed: String(c.recoveriesFailed),
      restores: String(c.restores),
      silent_loss: String(c.silentLoss),
      reconcile_failures: String(c.reconcileFailures),
      skipped_medium: String(c.skipped.medium ?? 0),
      skipped_multimodal: String(c.skipped.multimodal ?? 0),
      skipped_group: String(c.skipped.group ?? 0),
    },
  };
}

export function toWireStats(s: DirectoryStats): WireGetStatsResponse {
  return {
    directory_enabled: s.directoryEnabled,
    stream_source: s.streamSource,
    streams_total: s.streamsTotal,
    streams_synchronized: s.streamsSynchronized,
    streams_by_state: { ...s.streamsByState },
    device_blocks_total: String(s.deviceBlocksTotal),
    host_blocks_total: String(s.hostBlocksTotal),
    entries_total: String(s.entriesTotal),
    queries_total: String(s.queriesTotal),
    started_at_ms: String(s.startedAtMs),
    uptime_ms: String(s.uptimeMs),
  };
}
