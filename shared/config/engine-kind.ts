/**
 * The engine kinds of engines.md §1. `xllm` streams follow kv-events.md unchanged (snapshot
 * replay, etcd registration); `vllm` and `sglang` streams replay buffered history instead of a
 * snapshot, may omit the batch's dp rank, and are found through the engines file.
 */
export const ENGINE_KINDS = ['xllm', 'vllm', 'sglang'] as const;

export type EngineKind = (typeof ENGINE_KINDS)[number];

export const DEFAULT_ENGINE_KIND: EngineKind = 'xllm';

export function isEngineKind(value: unknown): value is EngineKind {
  return typeof value === 'string' && (ENGINE_KINDS as readonly string[]).includes(value);
}

/** Kinds whose replay endpoint answers with history batches (engines.md §3), not a snapshot. */
export function replaysHistory(kind: EngineKind): boolean {
  return kind !== 'xllm';
}
