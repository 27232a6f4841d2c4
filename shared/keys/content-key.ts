/**
 * Content keys (kv-events §4, kvcm-meta §4.3): XXH3-128 chained over int32-LE token ids.
 *
 *   preimage = parentKey (16 B, only when the block has a parent) || t[0] || t[1] || ...  (int32 LE)
 *              || identity terms (cache-identity §3, cache-identity.ts; none for a plain block)
 *   key      = XXH3-128(preimage, seed) stored as low64 LE || high64 LE
 *
 * hash-wasm's digest('binary') is xxHash's canonical big-endian digest; the content key is its
 * byte reverse (using the canonical digest as the key is the bug the spec warns about).
 * Hot path: the preimage is written as int32 words (a little-endian host, x86-64 or arm64, as the
 * index's typed-array views assume too) straight into the input area of hash-wasm's xxHash
 * module (xxh128-direct.ts): no allocation per block from a JS array, one subarray view per block
 * from an Int32Array (then copied as one memcpy). Where that is not available, through
 * hash-wasm's wrapper: one preallocated preimage buffer per hasher and one cached view of its length.
 */
import { createXXHash128 } from 'hash-wasm';
import type { IHasher } from 'hash-wasm/dist/lib/WASMInterface.js';
import { Xxh128Direct } from './xxh128-direct.js';
import { PLAIN_IDENTITY, type KeyIdentity } from './cache-identity.js';

export const CONTENT_KEY_BYTES = 16;
export const DEFAULT_HASH_SEED = 1024;

const hasherBySeed = new Map<string, Promise<ContentKeyHasher>>();

export class ContentKeyHasher {
  private preimage: Uint8Array;
  /** Int32 view of `preimage`: token ids go in as words (int32 LE on a little-endian host). */
  private preimageWords: Int32Array;
  /** preimage.subarray(0, viewLength), re-made only when the length changes. */
  private preimageSlice: Uint8Array;
  private viewLength = -1;

  /** hash-wasm's module called directly; null: through its wrapper (`xxh`). */
  private readonly direct: Xxh128Direct | null;

  private constructor(private readonly xxh: IHasher, readonly seed: bigint) {
    this.direct = Xxh128Direct.load(seed, xxh);
    this.preimage = new Uint8Array(16 + 4 * 128);
    this.preimageWords = new Int32Array(this.preimage.buffer);
    this.preimageSlice = this.preimage;
  }

  /** Which path hashes: hash-wasm's module called directly, or its wrapper (diagnostics and tests). */
  get backend(): 'direct' | 'wrapper' {
    return this.direct === null ? 'wrapper' : 'direct';
  }

  /** One hasher per seed, shared by every stream using it (hashing is synchronous once created). */
  static forSeed(seed: number | bigint = DEFAULT_HASH_SEED): Promise<ContentKeyHasher> {
    const s = BigInt(seed);
    if (s < 0n || s > 0xffffffffffffffffn) throw new RangeError(`hash_seed out of range: ${s}`);
    const cacheKey = s.toString();
    let p = hasherBySeed.get(cacheKey);
    if (!p) {
      const low = Number(s & 0xffffffffn);
      const high = Number(s >> 32n);
      p = createXXHash128(low, high).then((h) => new ContentKeyHasher(h, s));
      hasherBySeed.set(cacheKey, p);
    }
    return p;
  }

  private ensureCapacity(bytes: number): void {
    if (this.preimage.length >= bytes) return;
    // Whole words: identity suffixes (cache-identity §3) make odd preimage lengths.
    this.preimage = new Uint8Array((Math.max(bytes, this.preimage.length * 2) + 3) & ~3);
    this.preimageWords = new Int32Array(this.preimage.buffer);
    this.viewLength = -1;
  }

  /**
   * Key of one block: tokens[start .. start+count) chained on `parent` (16 bytes at parentOffset,
   * or null for a first block), then `suffix` (cache-identity §3: the block's identity terms,
   * KeyIdentity.rootSuffix or chainSuffix; null for a plain block). Writes 16 bytes into
   * out[outOffset..]. Token ids must already be validated as int32 by the caller.
   */
  keyInto(
    parent: Uint8Array | null,
    parentOffset: number,
    tokens: ArrayLike<number>,
    start: number,
    count: number,
    out: Uint8Array,
    outOffset: number,
    suffix: Uint8Array | null = null,
  ): void {
    const head = parent === null ? 0 : 16;
    const body = head + 4 * count;
    const len = suffix === null ? body : body + suffix.length;
    // The preimage goes straight into the xxHash module's input area, or (too long for it, or
    // no direct path) into this hasher's own buffer for the wrapper.
    const direct = this.direct !== null && len <= this.direct.capacity ? this.direct : null;
    if (direct !== null) direct.begin();
    else this.ensureCapacity(len);
    const buf = direct !== null ? direct.input : this.preimage;
    const words = direct !== null ? direct.words : this.preimageWords;
    if (parent !== null) {
      for (let i = 0; i < 16; i++) buf[i] = parent[parentOffset + i]!;
    }
    const w = head >>> 2;
    // An Int32Array source is one memcpy; a JS array is copied element by element (about as
    // long as the WebAssembly hash of the block itself: ~0.2 µs per 128 tokens).
    if (tokens instanceof Int32Array) words.set(tokens.subarray(start, start + count), w);
    else for (let i = 0; i < count; i++) words[w + i] = tokens[start + i]!;
    if (suffix !== null) buf.set(suffix, body);
    if (direct !== null) {
      direct.finish(len, out, outOffset);
      return;
    }
    if (len !== this.viewLength) {
      this.preimageSlice = buf.subarray(0, len);
      this.viewLength = len;
    }
    const xxh = this.xxh;
    xxh.init();
    xxh.update(this.preimageSlice);
    const digest = xxh.digest('binary');
    for (let i = 0; i < 16; i++) out[outOffset + i] = digest[15 - i];
  }

  /**
   * Chained keys of the floor(n / blockSize) complete blocks of `tokens` (the rest is ignored),
   * as one buffer of 16 bytes per block, under `identity` (cache-identity §3; plain by default).
   */
  chain(tokens: ArrayLike<number>, blockSize: number, out?: Uint8Array, identity: KeyIdentity = PLAIN_IDENTITY): Uint8Array {
    const blocks = Math.floor(tokens.length / blockSize);
    const keys = out && out.length >= blocks * 16 ? out : new Uint8Array(blocks * 16);
    for (let b = 0; b < blocks; b++) {
      this.keyInto(b === 0 ? null : keys, (b - 1) * 16, tokens, b * blockSize, blockSize, keys, b * 16, b === 0 ? identity.rootSuffix : identity.chainSuffix);
    }
    return keys.length === blocks * 16 ? keys : keys.subarray(0, blocks * 16);
  }
}

/** Hex of a 16-byte content key as stored (low64 LE || high64 LE), for logs and tests. */
export function contentKeyHex(key: Uint8Array, offset = 0): string {
  return Buffer.from(key.buffer, key.byteOffset + offset, 16).toString('hex');
}

/** kvcm-meta §4.3: block_key = low64 of the content key reinterpreted as a signed int64. */
export function blockKeyOf(keys: Uint8Array, offset = 0): bigint {
  return new DataView(keys.buffer, keys.byteOffset + offset, 8).getBigInt64(0, true);
}
