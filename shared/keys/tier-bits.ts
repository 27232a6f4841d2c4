/**
 * Tier bits, in one place: where a content key (or an engine block) is resident is a subset of
 * {Device, Host} (kv-events §3.4: gpu → Device, cpu → Host). The decoder, the directory's index,
 * the view and the engine simulator all speak these numbers.
 */

export const TIER_DEVICE = 1;
export const TIER_HOST = 2;
export const TIER_BOTH = 3;
/** 1 = Device (gpu), 2 = Host (cpu), 3 = both. */
export type TierBits = 1 | 2 | 3;
/**
 * An event's medium when it is neither Device nor Host (vLLM's `"STORAGE"`, engines.md §2): a
 * tier we do not serve. Only vllm/sglang streams decode it; for xllm it stays `parse`.
 */
export const TIER_UNSERVED = 0;
