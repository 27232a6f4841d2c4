// fast-check inputs shared by the block pool's property tests: prompts that share prefixes (each a
// few blocks drawn from a tiny alphabet of block contents, then a partial tail) and pool sizes
// small enough that eviction and offload happen all the time.
import fc from 'fast-check';

/** A prompt of block size 4 sharing prefixes with its siblings. */
export function sharedPrefixPrompt(): fc.Arbitrary<number[]> {
  return fc.array(fc.integer({ min: 0, max: 5 }), { minLength: 0, maxLength: 6 }).chain((blocks) =>
    fc.integer({ min: 0, max: 3 }).map((tail) => [...blocks.flatMap((b) => [b, b + 1, b + 2, b + 3]), ...Array.from({ length: tail }, (_, i) => 900 + i)]),
  );
}

/** Device and Host capacities (blocks) and the offload mode. */
export function smallPoolCaps(): fc.Arbitrary<{ deviceCapacityBlocks: number; hostCapacityBlocks: number; offloadMode: 'sync' | 'async' }> {
  return fc.record({
    deviceCapacityBlocks: fc.integer({ min: 1, max: 6 }),
    hostCapacityBlocks: fc.integer({ min: 0, max: 6 }),
    offloadMode: fc.constantFrom('sync' as const, 'async' as const),
  });
}
