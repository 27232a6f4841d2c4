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

/**
 * `base` (a whole exported residency) with `changes` applied in order, last write wins: the
 * residency of a stream reset whose index kept applying batches before the delta was cut. Keys
 * whose last tier is 0 are left out. O(base + changes) integer work: the changed keys go into an
 * open-addressed table of their last position, probed once per base key; allocates the table and
 * the two result arrays only.
 */
export function mergeResidency(base: { readonly keys: Uint8Array; readonly tiers: Uint8Array }, changes: ResidencyBuffer): { keys: Uint8Array; tiers: Uint8Array } {
  const cw = wordsOf(changes.keys());
  const ct = changes.tiers();
  const n = ct.length;
  let cap = 16;
  while (cap < n * 2) cap <<= 1;
  const mask = cap - 1;
  // slot → 1 + position of the key's last change (0 = empty).
  const table = new Int32Array(cap);
  for (let j = 0; j < n; j++) {
    let h = keyHash(cw, j << 2) & mask;
    for (;;) {
      const at = table[h]!;
      if (at === 0) {
        table[h] = j + 1;
        break;
      }
      if (sameKey(cw, (at - 1) << 2, cw, j << 2)) {
        table[h] = j + 1;
        break;
      }
      h = (h + 1) & mask;
    }
  }
  const bw = wordsOf(base.keys);
  const bt = base.tiers;
  const outWords = new Uint32Array((bt.length + n) * 4);
  const outTiers = new Uint8Array(bt.length + n);
  // Changes taken over by a base key (their slot's entry is negated so they are not appended).
  let m = 0;
  for (let i = 0; i < bt.length; i++) {
    let h = keyHash(bw, i << 2) & mask;
    let tiers = bt[i]!;
    for (;;) {
      const at = table[h]!;
      if (at === 0) break;
      const j = Math.abs(at) - 1;
      if (sameKey(cw, j << 2, bw, i << 2)) {
        tiers = ct[j]!;
        table[h] = -Math.abs(at);
        break;
      }
      h = (h + 1) & mask;
    }
    if (tiers === 0) continue;
    copyKey(bw, i << 2, outWords, m << 2);
    outTiers[m++] = tiers;
  }
  for (let h = 0; h < cap; h++) {
    const at = table[h]!;
    if (at <= 0) continue;
    const j = at - 1;
    if (ct[j] === 0) continue;
    copyKey(cw, j << 2, outWords, m << 2);
    outTiers[m++] = ct[j]!;
  }
  return { keys: new Uint8Array(outWords.buffer, 0, m << 4), tiers: outTiers.subarray(0, m) };
}

/** The 16-byte keys as words; copies only when the bytes are not 4-aligned. */
function wordsOf(keys: Uint8Array): Uint32Array {
  if ((keys.byteOffset & 3) === 0) return new Uint32Array(keys.buffer, keys.byteOffset, keys.byteLength >>> 2);
  return new Uint32Array(keys.slice().buffer);
}

/** Content keys are hashes already (§4): mixing two words spreads them enough. */
function keyHash(w: Uint32Array, o: number): number {
  return (w[o]! ^ Math.imul(w[o + 3]!, 0x9e3779b1)) >>> 0;
}

function sameKey(a: Uint32Array, ao: number, b: Uint32Array, bo: number): boolean {
  return a[ao] === b[bo] && a[ao + 1] === b[bo + 1] && a[ao + 2] === b[bo + 2] && a[ao + 3] === b[bo + 3];
}

function copyKey(from: Uint32Array, fo: number, to: Uint32Array, too: number): void {
  to[too] = from[fo]!;
  to[too + 1] = from[fo + 1]!;
  to[too + 2] = from[fo + 2]!;
  to[too + 3] = from[fo + 3]!;
}
