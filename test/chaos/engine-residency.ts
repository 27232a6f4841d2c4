/**
 * The chaos engine's test-only routes (chaos-engine.ts) as its clients see them: paths and wire
 * shapes, kept apart from the engine entry so importing them does not start an engine.
 */

/** POST {"prompts": [[token ids], ...]} → WireResidencyAnswer. Read-only. */
export const RESIDENCY_PATH = '/v1/internal/sim/residency';
/** POST → every rank publishes AllBlocksCleared (kv-events §11.7) and empties its pool. */
export const CLEAR_PATH = '/v1/internal/sim/clear';

/** One prompt's resident prefix on one rank (kv-events §8 field names). */
export interface WirePromptResidency {
  readonly device_hit_tokens: number;
  readonly host_only_hit_tokens: number;
}

export interface WireRankResidency {
  readonly dp_rank: number;
  readonly device_blocks: number;
  readonly host_blocks: number;
  /** In the order of the request's prompts. */
  readonly prompts: readonly WirePromptResidency[];
}

export interface WireResidencyAnswer {
  readonly incarnation_id: string;
  readonly ranks: readonly WireRankResidency[];
}
