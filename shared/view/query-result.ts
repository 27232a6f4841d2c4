/**
 * The routing.md query response (`POST /v1/internal/kv-cache/query`, kv-events §8), in wire field
 * names. The directory's Query and the router's view cache both answer with these types, so the
 * two endpoints cannot drift apart.
 */
import type { StreamIdentity } from '../keys/stream-key.js';
import type { EngineKind } from '../config/engine-kind.js';

/** One `matches` entry of the routing.md query response (wire field names). */
export interface StreamMatch {
  instance_name: string;
  dp_rank: number;
  synchronized: boolean;
  /** A number when it fits in 2^53 − 1 (−1 when none), else a bigint the JSON writer must emit as an integer. */
  sequence: number | bigint;
  device_hit_tokens: number;
  host_only_hit_tokens: number;
  reusable_prefix_tokens: number;
  device_blocks: number;
  host_blocks: number;
  error: string;
  /** engines.md §1: the stream's engine kind. */
  engine_kind: EngineKind;
}

/** The routing.md query response body. */
export interface QueryResult {
  input_tokens: number;
  /** The block size shared by every stream; 0 when there is no stream or they differ. */
  block_size: number;
  matches: StreamMatch[];
}

/** §8 `sequence` for JSON: exact as a number up to 2^53 − 1, a bigint above. */
export function sequenceForJson(seq: bigint): number | bigint {
  return seq <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(seq) : seq;
}

/** The stream fields a `matches` row repeats (the directory's and the router's stream records). */
export interface QueriedStream extends StreamIdentity {
  readonly sequence: bigint;
  /** engines.md §1; absent = xllm. */
  readonly engineKind?: EngineKind;
}

/** One `matches` row; reusable_prefix_tokens is the sum of the two hit counts (§8). */
export function streamMatch(
  s: QueriedStream,
  synchronized: boolean,
  deviceHitTokens: number,
  hostOnlyHitTokens: number,
  deviceBlocks: number,
  hostBlocks: number,
  error: string,
): StreamMatch {
  return {
    instance_name: s.instanceName,
    dp_rank: s.dpRank,
    synchronized,
    sequence: sequenceForJson(s.sequence),
    device_hit_tokens: deviceHitTokens,
    host_only_hit_tokens: hostOnlyHitTokens,
    reusable_prefix_tokens: deviceHitTokens + hostOnlyHitTokens,
    device_blocks: deviceBlocks,
    host_blocks: hostBlocks,
    error,
    engine_kind: s.engineKind ?? 'xllm',
  };
}

/** The response's `block_size`: the one every stream has, 0 when there is none or they differ. */
export function commonBlockSize(streams: readonly { readonly blockSize: number }[], count: number = streams.length): number {
  if (count === 0) return 0;
  const blockSize = streams[0]!.blockSize;
  for (let i = 1; i < count; i++) if (streams[i]!.blockSize !== blockSize) return 0;
  return blockSize;
}
