/**
 * The token id range, in one place: token ids are int32 on the engine side (kv-events §3.2) and
 * routing.md accepts integers in [0, 2^31) from clients. Each edge (router HTTP, directory gRPC,
 * kvctl, engine simulator) words its own error, naming the first bad index this module finds.
 */

/** Exclusive upper bound of a client token id: 2^31. */
const TOKEN_ID_LIMIT = 0x80000000;

export function isTokenId(t: unknown): t is number {
  return typeof t === 'number' && Number.isInteger(t) && t >= 0 && t < TOKEN_ID_LIMIT;
}

/** Index of the first element that is not a token id; -1 when all are. One loop, no allocation (8k-token prompts). */
export function firstInvalidTokenId(values: readonly unknown[]): number {
  for (let i = 0; i < values.length; i++) if (!isTokenId(values[i])) return i;
  return -1;
}
