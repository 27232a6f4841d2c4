/**
 * Content-key hashers by hash seed, resolved ahead of use: ContentKeyHasher.forSeed is async, the
 * view cache and the request path are synchronous, so the view client loads the hashers of an
 * update's new seeds (`ensure`) before handing the update to the cache (`get`).
 */
import { ContentKeyHasher } from '../../shared/keys/content-key.js';

export class HasherPool {
  private readonly ready = new Map<bigint, ContentKeyHasher>();

  /** The hasher of `seed`, or null when it has not been loaded. */
  get(seed: bigint): ContentKeyHasher | null {
    return this.ready.get(seed) ?? null;
  }

  has(seed: bigint): boolean {
    return this.ready.has(seed);
  }

  /** Loads every seed not yet loaded; resolves when all are ready. */
  async ensure(seeds: Iterable<bigint>): Promise<void> {
    for (const seed of seeds) {
      if (this.ready.has(seed)) continue;
      const hasher = await ContentKeyHasher.forSeed(seed);
      this.ready.set(seed, hasher);
    }
  }
}
