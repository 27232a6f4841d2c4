/**
 * A small, fast, fixed-seed PRNG (mulberry32) for benchmark loads and test inputs: the same seed
 * gives the same sequence on every run and machine; `mix32` hashes two ints for inputs picked by
 * position (block `b` of document `a`) rather than drawn in order. Not for anything that must be unpredictable.
 */

/** Returns a generator of uniform floats in [0, 1), fixed by `seed` (taken as uint32). */
export function seededRandom(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** A uint32 hash of two ints (murmur3-style finalizer): the same pair gives the same value everywhere. */
export function mix32(a: number, b: number): number {
  let h = Math.imul(a ^ 0x9e3779b9, 0x85ebca6b) ^ Math.imul(b + 0x7f4a7c15, 0xc2b2ae35);
  h ^= h >>> 16;
  h = Math.imul(h, 0x7feb352d);
  h ^= h >>> 15;
  h = Math.imul(h, 0x846ca68b);
  h ^= h >>> 16;
  return h >>> 0;
}
