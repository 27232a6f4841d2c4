/**
 * A small, fast, fixed-seed PRNG (mulberry32) for benchmark loads and test inputs: the same seed
 * gives the same sequence on every run and machine. Not for anything that must be unpredictable.
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
