/**
 * The routing.md query response as JSON text, fields in the spec's order. JSON.stringify cannot
 * write a bigint, and kv-events §8 keeps `sequence` exact as a u64: a sequence above 2^53 − 1
 * reaches here as a bigint and is written as a bare integer, never through a double.
 */
import type { QueryResult } from '../../shared/view/query-result.js';

/** Cost: one pass over the matches, strings only for the names and errors (JSON-escaped). */
export function queryResultJson(r: QueryResult): string {
  let out = `{"input_tokens":${r.input_tokens},"block_size":${r.block_size},"matches":[`;
  for (let i = 0; i < r.matches.length; i++) {
    const m = r.matches[i]!;
    if (i > 0) out += ',';
    out +=
      `{"instance_name":${JSON.stringify(m.instance_name)},"dp_rank":${m.dp_rank},"synchronized":${m.synchronized},` +
      `"sequence":${m.sequence.toString()},"device_hit_tokens":${m.device_hit_tokens},` +
      `"host_only_hit_tokens":${m.host_only_hit_tokens},"reusable_prefix_tokens":${m.reusable_prefix_tokens},` +
      `"device_blocks":${m.device_blocks},"host_blocks":${m.host_blocks},"error":${JSON.stringify(m.error)},` +
      `"engine_kind":"${m.engine_kind}"}`;
  }
  return out + ']}';
}
