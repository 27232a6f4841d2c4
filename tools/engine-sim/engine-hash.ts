/**
 * Engine hashes of the simulated engine (kv-events §11.4): 64 bits identifying a block's content
 * and prefix, i.e. derived from the parent's engine hash, the block's token ids and (for LoRA
 * blocks) the adapter name. Unrelated to content keys (§4), which the directory derives itself;
 * the simulator must not share their hashing, or a directory bug keyed by engine hash could go
 * unnoticed.
 *
 * Two murmur3-style 32-bit lanes with different seeds make the 64 bits; hashes are spread over
 * the whole range, so most exceed 2^53 and exercise exact 64-bit decoding (§3.1). Never 0.
 * Cost: O(block_size) integer ops, one bigint per block.
 */

const SEED_LO = 0x9747b28c;
const SEED_HI = 0x2f6b3c1d;
const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

function mix(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

function fmix(h: number, len: number): number {
  h ^= len;
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

/** A small integer standing for a LoRA adapter name (0 = plain text). */
export function loraSalt(loraName: string | null): number {
  if (loraName === null) return 0;
  let h = 0x811c9dc5;
  for (let i = 0; i < loraName.length; i++) h = Math.imul(h ^ loraName.charCodeAt(i), 0x01000193);
  return (h >>> 0) | 1;
}

/**
 * Engine hash of tokens[start, start+count) on top of `parent` (null for a first block).
 * A null parent and parent 0 hash differently (a marker word), though 0 is never produced.
 */
export function engineHashOf(parent: bigint | null, tokens: ArrayLike<number>, start: number, count: number, salt = 0): bigint {
  const pLo = parent === null ? 0 : Number(parent & 0xffffffffn) | 0;
  const pHi = parent === null ? 0 : Number(parent >> 32n) | 0;
  const marker = parent === null ? 0x6e696c21 : 0x70617221;
  let lo = SEED_LO;
  let hi = SEED_HI;
  lo = mix(mix(mix(mix(lo, marker), pLo), pHi), salt);
  hi = mix(mix(mix(mix(hi, pHi), salt), pLo), marker);
  for (let i = start; i < start + count; i++) {
    const t = tokens[i] | 0;
    lo = mix(lo, t);
    hi = mix(hi, t ^ 0x5bd1e995);
  }
  const l = fmix(lo, count);
  const h = fmix(hi ^ l, count + 1);
  const v = (BigInt(h) << 32n) | BigInt(l);
  return v === 0n ? 1n : v;
}
