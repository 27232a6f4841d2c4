/**
 * Pending incremental residency changes of one stream between two deltas (architecture.md "The
 * view stream": `ResidencyChanges`): N content keys of 16 bytes and their N new tier bytes, in the
 * order the index reported them, so applying them in order is last-write-wins. Hot path (one call
 * per residency change while events are applied): two typed-array writes, no allocation except
 * the amortised doubling when full. Assumes a little-endian host, as the index does.
 */

/** Initial capacity in changes: small, since most streams see a few hundred changes per delta. */
const INITIAL_CHANGES = 256;

export class ResidencyBuffer {
  private keyWords: Uint32Array;
  private keyBytes: Uint8Array;
  private tierBytes: Uint8Array;
  private n = 0;

  constructor(private readonly initialChanges = INITIAL_CHANGES) {
    this.keyWords = new Uint32Array(initialChanges * 4);
    this.keyBytes = new Uint8Array(this.keyWords.buffer);
    this.tierBytes = new Uint8Array(initialChanges);
  }

  /** Changes held. */
  get length(): number {
    return this.n;
  }

  /** Records that the key `words[offset .. offset+4)` now has tier bits `tiers` (0 = gone). */
  push(words: Uint32Array, offset: number, tiers: number): void {
    if (this.n === this.tierBytes.length) this.grow();
    const w = this.n << 2;
    const kw = this.keyWords;
    kw[w] = words[offset];
    kw[w + 1] = words[offset + 1];
    kw[w + 2] = words[offset + 2];
    kw[w + 3] = words[offset + 3];
    this.tierBytes[this.n++] = tiers;
  }

  /** Views of the pending keys and tiers; valid until the next push or clear. */
  keys(): Uint8Array {
    return this.keyBytes.subarray(0, this.n << 4);
  }

  tiers(): Uint8Array {
    return this.tierBytes.subarray(0, this.n);
  }

  /**
   * Forgets the pending changes. Storage is kept for the next delta unless a burst grew it past
   * `shrinkAboveChanges`, so one huge batch does not pin its memory for the process lifetime.
   */
  clear(shrinkAboveChanges: number): void {
    this.n = 0;
    if (this.tierBytes.length > shrinkAboveChanges && shrinkAboveChanges >= this.initialChanges) {
      this.keyWords = new Uint32Array(this.initialChanges * 4);
      this.keyBytes = new Uint8Array(this.keyWords.buffer);
      this.tierBytes = new Uint8Array(this.initialChanges);
    }
  }

  private grow(): void {
    const cap = this.tierBytes.length * 2;
    const kw = new Uint32Array(cap * 4);
    kw.set(this.keyWords);
    const t = new Uint8Array(cap);
    t.set(this.tierBytes);
    this.keyWords = kw;
    this.keyBytes = new Uint8Array(kw.buffer);
    this.tierBytes = t;
  }
}
