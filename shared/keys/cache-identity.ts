/**
 * Cache identity in content keys (cache-identity §3): what, beside its tokens and its parent, makes
 * a block's KV reusable only by the same kind of request. A LoRA adapter's name enters the key of
 * every block of its chain; a cache salt only the key of the chain's first (parentless) block, and
 * reaches the rest through the parent key, exactly as vLLM hashes them:
 *
 *   preimage = P || t[0] .. t[bs-1] (int32 LE)
 *              || 'L' (0x4C) || u32 LE byte length || UTF-8 lora_name   -- every block of a LoRA chain
 *              || 'S' (0x53) || u32 LE byte length || UTF-8 salt        -- only a block with no parent
 *
 * A plain block has no suffix, so every kv-events §4 key stays what it was. The suffixes are built
 * once per identity (`keyIdentity`) and handed to `ContentKeyHasher.keyInto` as bytes: the hot path
 * copies them after the token words and allocates nothing per block.
 */

/** One chain's identity terms, with their preimage suffixes built once. Frozen. */
export interface KeyIdentity {
  /** The LoRA adapter whose KV the chain holds; null for the base model. */
  readonly loraName: string | null;
  /** The cache salt of the chain's first block (vLLM `cache_salt`); null when unsalted. */
  readonly salt: string | null;
  /** Suffix of a parentless block: the L term, then the S term; null for a plain identity. */
  readonly rootSuffix: Uint8Array | null;
  /** Suffix of a block with a parent: the L term; null without LoRA. */
  readonly chainSuffix: Uint8Array | null;
}

/** The base model, unsalted: kv-events §4 keys unchanged. */
export const PLAIN_IDENTITY: KeyIdentity = Object.freeze({ loraName: null, salt: null, rootSuffix: null, chainSuffix: null });

const TAG_LORA = 0x4c; // 'L'
const TAG_SALT = 0x53; // 'S'

/** One `tag || u32 LE length || UTF-8` term. */
function term(tag: number, text: string): Uint8Array {
  const utf8 = Buffer.from(text, 'utf8');
  const out = new Uint8Array(5 + utf8.length);
  out[0] = tag;
  new DataView(out.buffer).setUint32(1, utf8.length, true);
  out.set(utf8, 5);
  return out;
}

function concat(a: Uint8Array | null, b: Uint8Array | null): Uint8Array | null {
  if (a === null) return b;
  if (b === null) return a;
  const out = new Uint8Array(a.length + b.length);
  out.set(a, 0);
  out.set(b, a.length);
  return out;
}

/**
 * The identity of a LoRA name and a salt (either null). Empty strings are not identities: callers
 * validate (`cache_salt` must be non-empty, cache-identity §2) before they get here.
 */
export function keyIdentity(loraName: string | null, salt: string | null): KeyIdentity {
  if (loraName === null && salt === null) return PLAIN_IDENTITY;
  const lora = loraName === null ? null : term(TAG_LORA, loraName);
  const s = salt === null ? null : term(TAG_SALT, salt);
  return Object.freeze({ loraName, salt, rootSuffix: concat(lora, s), chainSuffix: lora });
}

/** True for the base model unsalted (no suffix on any block). */
export function isPlainIdentity(id: KeyIdentity): boolean {
  return id.rootSuffix === null && id.chainSuffix === null;
}

/** Same LoRA name and salt. */
export function sameIdentity(a: KeyIdentity, b: KeyIdentity): boolean {
  return a === b || (a.loraName === b.loraName && a.salt === b.salt);
}

/**
 * A bounded cache of identities by (LoRA name, salt), for paths that meet the same few identities
 * again and again (a stream's events, a router's requests): one allocation per new identity, none
 * per block or request. Cleared whole when full (identities are few; a flood of salts only costs
 * rebuilding them).
 */
export class KeyIdentityCache {
  private readonly byKey = new Map<string, KeyIdentity>();

  constructor(private readonly max = 4096) {}

  get(loraName: string | null, salt: string | null): KeyIdentity {
    if (loraName === null && salt === null) return PLAIN_IDENTITY;
    // U+0000 cannot be confused: it separates the two parts, and a null part is marked apart.
    const k = `${loraName === null ? '\u0001' : `=${loraName}`}\u0000${salt === null ? '\u0001' : `=${salt}`}`;
    let id = this.byKey.get(k);
    if (id === undefined) {
      if (this.byKey.size >= this.max) this.byKey.clear();
      id = keyIdentity(loraName, salt);
      this.byKey.set(k, id);
    }
    return id;
  }
}
