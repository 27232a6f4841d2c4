/**
 * Prompt fingerprints for pending prefix credit (routing.md "In-flight load", our extension):
 * the prompt cut into 16-token granules, one 32-bit hash per complete granule, each chained over
 * every token before it, so fingerprint i names the first 16·(i+1) tokens and two prompts share
 * a prefix of k granules exactly when (up to a 2⁻³² collision per granule compared) their first
 * k fingerprints are equal.
 *
 * Why not the engines' block keys: those depend on each engine's block size and hash seed, and
 * are only computed while some stream still matches (a cold prompt stops at its first block);
 * a pending prompt must compare across routers and instances before any engine has hashed it.
 * A 16-token granule divides every block size in use (vLLM 16, SGLang 1–64, xLLM 128), so a
 * granule prefix floors to an instance's complete blocks exactly. A collision can only credit a
 * prefix the engine then recomputes (a slower request, never wrong output).
 *
 * Identity (cache-identity §2, §3): the chain starts from a seed derived from the request's cache
 * identity (LoRA name, salt), so a prompt under one identity never matches another identity's in
 * flight — their blocks are different KV on the engine. The plain identity's seed is FNV-1a's own
 * offset basis, so plain fingerprints are what they were before identities existed; the wire
 * carries the same bytes either way (a router compares them, the directory only stores them).
 *
 * Pure; one pass over the tokens up to `maxGranules` granules, no allocation but the result.
 */
import { isPlainIdentity, type KeyIdentity } from './cache-identity.js';

export const GRANULE_TOKENS = 16;
/** Granules fingerprinted per prompt (8,192 tokens): the wire and the view carry at most this many. */
export const MAX_PROMPT_GRANULES = 512;
/**
 * Pending prompts the view carries per (instance, router), and a router scans of its own: the
 * newest this many of its counted decisions for an instance. Older ones have mostly been admitted
 * and their KV events are in the view already, so the credit would add nothing; the bound keeps an
 * instance row at routers × 8 × 2 KiB and a decision's scan at instances × routers × 8 entries
 * however deep a queue grows (a queue that deep is not worth joining anyway).
 */
export const PENDING_PROMPTS_PER_SHARE = 8;

/** The chain seed of the plain identity (base model, unsalted): FNV-1a's offset basis. */
export const PLAIN_FINGERPRINT_SEED = 0x811c9dc5;

/**
 * The chain seed of `identity`: FNV-1a over its root preimage suffix (the `L` and `S` terms of
 * cache-identity §3, which name the LoRA adapter and the salt unambiguously), mixed once. Computed
 * once per identity by its owner, never per request.
 */
export function fingerprintSeed(identity: KeyIdentity): number {
  if (isPlainIdentity(identity)) return PLAIN_FINGERPRINT_SEED;
  const suffix = identity.rootSuffix!;
  let h = PLAIN_FINGERPRINT_SEED;
  for (let i = 0; i < suffix.length; i++) h = Math.imul(h ^ suffix[i]!, 0x01000193);
  h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d) >>> 0;
  // A seed equal to the plain one would let the identity match plain prompts: step off it.
  return h === PLAIN_FINGERPRINT_SEED ? (h ^ 1) >>> 0 : h;
}

/**
 * The first min(⌊len/16⌋, maxGranules) fingerprints of `tokenIds`, chained from `seed` (the
 * request identity's, fingerprintSeed; default the plain identity's).
 */
export function promptFingerprints(tokenIds: ArrayLike<number>, maxGranules: number = MAX_PROMPT_GRANULES, seed: number = PLAIN_FINGERPRINT_SEED): Uint32Array {
  const n = Math.min(Math.floor(tokenIds.length / GRANULE_TOKENS), maxGranules);
  const out = new Uint32Array(n);
  // FNV-1a over the token ids' 32-bit values, the state carried from granule to granule.
  let h = seed;
  for (let g = 0, t = 0; g < n; g++) {
    for (const end = t + GRANULE_TOKENS; t < end; t++) h = Math.imul(h ^ (tokenIds[t]! | 0), 0x01000193);
    // One extra mix per granule so a granule boundary is part of what is hashed.
    h = Math.imul(h ^ (h >>> 15), 0x2c1b3c6d);
    out[g] = h >>> 0;
  }
  return out;
}

/** How many leading fingerprints `a` and `b` share. */
export function sharedGranules(a: Uint32Array, b: Uint32Array): number {
  return longerShared(a, b, 0);
}

/**
 * max(best, sharedGranules(a, b)) in O(1) when b cannot beat `best`: fingerprints are chained, so
 * b shares more than `best` granules exactly when it equals a at index `best`; only then is the
 * rest compared. Scanning many pending prompts costs one comparison each plus the longest match
 * once, however long the prefix they all share.
 */
export function longerShared(a: Uint32Array, b: Uint32Array, best: number): number {
  if (best >= a.length || best >= b.length || a[best] !== b[best]) return best;
  const n = Math.min(a.length, b.length);
  let i = best + 1;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** Two footprints of one list (footprints), in granules. */
export interface Footprint {
  all: number;
  included: number;
}

/**
 * Granules the prompts `ahead[0..count)` touch beyond what they share with `prompt` (`out.all`):
 * the size of their union as a prefix tree (each counts what it shares with no earlier one), less
 * `prompt`'s own prefix. What requests queued ahead on an engine store or refresh before `prompt`
 * runs, so what a full LRU pool keeps in preference to `prompt`'s cached prefix (the TTFT
 * policy's survivingHitTokens). `out.included`: the same of the entries j with `included[j] === 1`
 * alone (null: all). One pass: each entry is compared with `prompt` once, then with the earlier
 * included entries (its share of their union), then with the others. O(count² + granules); no
 * allocation. Into `out` (returned).
 */
export function footprints(prompt: Uint32Array, ahead: readonly Uint32Array[], count: number, included: Uint8Array | null, out: Footprint): Footprint {
  let all = 0;
  let inIncluded = 0;
  for (let j = 0; j < count; j++) {
    const p = ahead[j]!;
    let shared = longerShared(p, prompt, 0);
    for (let i = 0; i < j && shared < p.length; i++) if (included === null || included[i] === 1) shared = longerShared(p, ahead[i]!, shared);
    if (included === null || included[j] === 1) inIncluded += p.length - shared;
    if (included !== null) for (let i = 0; i < j && shared < p.length; i++) if (included[i] !== 1) shared = longerShared(p, ahead[i]!, shared);
    all += p.length - shared;
  }
  out.all = all;
  out.included = inIncluded;
  return out;
}

/** `p` begins with the first `granules` of `prompt` (chained fingerprints: the last of them decides). O(1). */
export function sharesGranules(p: Uint32Array, prompt: Uint32Array, granules: number): boolean {
  return granules > 0 && p.length >= granules && prompt.length >= granules && p[granules - 1] === prompt[granules - 1];
}

/** The same prompt (up to its fingerprinted length): chained, so the length and the last fingerprint decide. */
export function sameFingerprints(a: Uint32Array, b: Uint32Array): boolean {
  return a.length === b.length && (a.length === 0 || a[a.length - 1] === b[b.length - 1]);
}

/** Fingerprints as the wire carries them: little-endian uint32s. */
export function fingerprintBytes(f: Uint32Array): Buffer {
  const b = Buffer.allocUnsafe(f.length * 4);
  for (let i = 0; i < f.length; i++) b.writeUInt32LE(f[i]!, i * 4);
  return b;
}

/** What the wire may carry as one prompt's fingerprints (the message both ends give when it is not). */
export const FINGERPRINT_BYTES_EXPECTED = `a multiple of 4 bytes, at most ${MAX_PROMPT_GRANULES * 4} (little-endian uint32 fingerprints)`;

/** `bytes` is one prompt's fingerprints as the wire carries them: whole uint32s, at most `maxGranules`. */
export function isFingerprintBytes(bytes: Uint8Array, maxGranules: number = MAX_PROMPT_GRANULES): boolean {
  return bytes.length % 4 === 0 && bytes.length / 4 <= maxGranules;
}

/** The inverse of fingerprintBytes; null when `bytes` is not fingerprints (isFingerprintBytes). */
export function fingerprintsOf(bytes: Uint8Array, maxGranules: number = MAX_PROMPT_GRANULES): Uint32Array | null {
  if (!isFingerprintBytes(bytes, maxGranules)) return null;
  const out = new Uint32Array(bytes.length / 4);
  for (let i = 0; i < out.length; i++) {
    const o = i * 4;
    out[i] = (bytes[o]! | (bytes[o + 1]! << 8) | (bytes[o + 2]! << 16) | (bytes[o + 3]! << 24)) >>> 0;
  }
  return out;
}
