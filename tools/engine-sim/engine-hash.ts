/**
 * Engine hashes of the simulated engine (kv-events §11.4): 64 bits identifying a block's content
 * and prefix, i.e. derived from the parent's engine hash, the block's token ids and the block's
 * extra keys (cache-identity §6: the LoRA name on every block of a LoRA request, the cache salt on
 * the request's first block, as vLLM's `hash_block_tokens` folds `extra_keys` in). Unrelated to
 * content keys (§4), which the directory derives itself; the simulator must not share their
 * hashing, or a directory bug keyed by engine hash could go unnoticed.
 *
 * Two murmur3-style 32-bit lanes with different seeds make the 64 bits; hashes are spread over
 * the whole range, so most exceed 2^53 and exercise exact 64-bit decoding (§3.1). Never 0.
 * Cost: O(block_size) integer ops, one bigint per block; extra keys are folded in as two words
 * computed once per request (`extraKeyWords`), so an identity costs nothing per token.
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

/**
 * A block's extra keys as two 32-bit words (0, 0 = none: a plain block). Each term is tagged by
 * its kind, so a LoRA named `x` and a salt `x` never hash alike (vLLM's bare tuples would), and
 * length-prefixed, so term boundaries cannot shift. The high word of an identity is never 0,
 * which is what tells `engineHashOf` to fold the words in. Cost O(length of the names).
 */
export interface ExtraKeyWords {
  readonly lo: number;
  readonly hi: number;
}

export const NO_EXTRA_KEYS: ExtraKeyWords = Object.freeze({ lo: 0, hi: 0 });

const TAG_LORA = 0x4c; // 'L'
const TAG_SALT = 0x53; // 'S'

function fnvTerm(h: number, tag: number, text: string): number {
  h = Math.imul(h ^ tag, 0x01000193);
  h = Math.imul(h ^ text.length, 0x01000193);
  for (let i = 0; i < text.length; i++) h = Math.imul(h ^ text.charCodeAt(i), 0x01000193);
  return h;
}

/** Words for a block whose extra keys are `loraName` and/or `salt` (either null). */
export function extraKeyWords(loraName: string | null, salt: string | null): ExtraKeyWords {
  if (loraName === null && salt === null) return NO_EXTRA_KEYS;
  let lo = 0x811c9dc5;
  let hi = 0x050c5d1f;
  if (loraName !== null) {
    lo = fnvTerm(lo, TAG_LORA, loraName);
    hi = fnvTerm(hi, TAG_LORA ^ 0xff, loraName);
  }
  if (salt !== null) {
    lo = fnvTerm(lo, TAG_SALT, salt);
    hi = fnvTerm(hi, TAG_SALT ^ 0xff, salt);
  }
  return { lo: lo | 0, hi: (hi | 1) | 0 };
}

/**
 * Engine hash of tokens[start, start+count) on top of `parent` (null for a first block), with the
 * block's extra keys. A null parent and parent 0 hash differently (a marker word), though 0 is
 * never produced. A plain block (`NO_EXTRA_KEYS`) hashes exactly as before identities existed.
 */
export function engineHashOf(parent: bigint | null, tokens: ArrayLike<number>, start: number, count: number, extra: ExtraKeyWords = NO_EXTRA_KEYS): bigint {
  const pLo = parent === null ? 0 : Number(parent & 0xffffffffn) | 0;
  const pHi = parent === null ? 0 : Number(parent >> 32n) | 0;
  const marker = parent === null ? 0x6e696c21 : 0x70617221;
  let lo = SEED_LO;
  let hi = SEED_HI;
  lo = mix(mix(mix(mix(lo, marker), pLo), pHi), extra.lo);
  hi = mix(mix(mix(mix(hi, pHi), extra.lo), pLo), marker);
  if (extra.hi !== 0) {
    lo = mix(lo, extra.hi);
    hi = mix(hi, extra.hi ^ 0x2545f491);
  }
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
