/**
 * Cache identity read from BlockStored events and snapshot blocks (cache-identity §4 rules 1–3).
 * Private to decoder/: the live and snapshot decoders note where each identity field sits in the
 * payload while they read it (`IdentityFields`), then resolve the identity once the whole event
 * is read, because map keys come in any order and rule 2 needs `lora_name` and the parent before
 * it can read `extra_keys`.
 *
 * Wire shape (vLLM `BlockStored.extra_keys`, vllm/v1/core/kv_cache_utils.py): one entry per block
 * hash, nil or a tuple (array) holding, in order, the LoRA name, the block's multimodal items
 * `(identifier, offset)`, the cache salt (only in the first block of a request's chain) and the
 * block's prompt-embedding hash (`bin`). SGLang puts the salt in the event instead: a `cache_salt`
 * field (map form) or `{"cache_salt": s}` in a trailing `metadata` map (array form, its
 * `BlockStoredWithMetadata`).
 *
 * Hot path: a plain event costs nothing here (no field noted). An identity event costs one pass
 * over its `extra_keys` and, when the identity differs from the previous event's, one string
 * decode and a KeyIdentityCache lookup: consecutive events of one identity allocate nothing.
 *
 * Decisions where the spec is silent:
 * - An `extra_keys` entry that is neither nil nor an array (a bare string, a map, a number) is not
 *   a tuple of key parts we can read: that block is out of scope (§4 rule 2 "anything else"),
 *   as before this spec, not a `parse` error; `extra_keys` itself must be an array or nil.
 * - Entries past the last block hash are ignored; missing trailing entries are nil (kv-events §3:
 *   missing trailing elements are nil), so `[nil]` on a two-block event is plain.
 * - An empty `lora_name` or salt cannot be requested (cache-identity §2 wants a non-empty
 *   cache_salt; a model name is never empty): such an event is out of scope, counted
 *   `out_of_scope`. So is an SGLang salt on an event that also carries a different salt in
 *   `extra_keys`. An event with both a `cache_salt` field and `metadata.cache_salt` takes the
 *   field's.
 * - Names and salts must be valid UTF-8 (`parse` otherwise): keys hash their UTF-8 bytes, and two
 *   malformed names must never decode to the same replacement text.
 * - Snapshot blocks (kv-events §6) carry their own entry as `extra_keys` (a tuple, or nil); a
 *   one-element list holding an array or nil (the live per-hash form) is read as that entry. The
 *   two readings can only differ on inputs no engine builds (`[["s"]]`, `[nil]`), never on a
 *   multimodal or embedding entry.
 */
import { KeyIdentityCache, PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';
import { ParseError } from '../errors/stream-errors.js';
import { KeyTable, type MsgpackReader } from './msgpack-reader.js';

/** §4 rule 4: the reusable-prefix kinds; any other string is a group we never index. */
const REUSABLE_KINDS = new KeyTable(['full_attention', 'mla_attention', 'sink_full_attention']);

/** `metadata` map keys (SGLang array form). */
const METADATA_KEYS = new KeyTable(['cache_salt']);

/** Outcome of one block's `extra_keys` entry (cache-identity §4 rule 2). */
const ENTRY_PLAIN = 0;
const ENTRY_SALT = 1;
const ENTRY_OUT = 2;

const utf8 = new TextDecoder('utf-8', { fatal: true });

function decodeUtf8(buf: Uint8Array, start: number, len: number, what: string): string {
  try {
    return utf8.decode(buf.subarray(start, start + len));
  } catch {
    throw new ParseError(`${what}: invalid UTF-8`);
  }
}

/** buf[start, start+len) equals `bytes` (null = absent, matched by start < 0). */
function sameBytes(bytes: Uint8Array | null, buf: Uint8Array, start: number, len: number): boolean {
  if (bytes === null) return start < 0;
  if (start < 0 || bytes.length !== len) return false;
  for (let i = 0; i < len; i++) if (bytes[i] !== buf[start + i]) return false;
  return true;
}

/**
 * KeyIdentity instances by the wire bytes of (lora_name, salt): the previous identity is kept
 * with its bytes, so a run of events of one identity compares bytes and allocates nothing; any
 * other goes through a bounded KeyIdentityCache (one allocation per new identity).
 */
export class IdentityInterner {
  private readonly cache = new KeyIdentityCache();
  private lastLora: Uint8Array | null = null;
  private lastSalt: Uint8Array | null = null;
  private last: KeyIdentity = PLAIN_IDENTITY;

  get(buf: Uint8Array, loraStart: number, loraLen: number, saltStart: number, saltLen: number): KeyIdentity {
    if (loraStart < 0 && saltStart < 0) return PLAIN_IDENTITY;
    if (sameBytes(this.lastLora, buf, loraStart, loraLen) && sameBytes(this.lastSalt, buf, saltStart, saltLen)) return this.last;
    const lora = loraStart < 0 ? null : decodeUtf8(buf, loraStart, loraLen, 'lora_name');
    const salt = saltStart < 0 ? null : decodeUtf8(buf, saltStart, saltLen, 'cache_salt');
    const id = this.cache.get(lora, salt);
    this.lastLora = loraStart < 0 ? null : buf.slice(loraStart, loraStart + loraLen);
    this.lastSalt = saltStart < 0 ? null : buf.slice(saltStart, saltStart + saltLen);
    this.last = id;
    return id;
  }
}

/** `group_idx` (§4 rule 4): int or nil (= 0); a negative or huge index is `parse`. */
export function readGroupIndex(r: MsgpackReader, what: string): number {
  if (r.tryNil()) return 0;
  const v = r.readIntNumber(what);
  if (v < 0 || v > 0x7fffffff) throw new ParseError(`${what}: ${v} is not a KV cache group index (0..2147483647)`);
  return v;
}

/** `kv_cache_spec_kind` (§4 rule 4): str or nil; true for nil and the reusable-prefix kinds. */
export function readSpecKindReusable(r: MsgpackReader, what: string): boolean {
  if (r.tryNil()) return true;
  const len = r.readStrLength(what);
  return REUSABLE_KINDS.match(r.bytes, r.strStart, len) >= 0;
}

/** An int-or-nil field read only for its type (`kv_cache_spec_sliding_window`). */
export function skipOptionalInt(r: MsgpackReader, what: string): void {
  if (!r.tryNil()) r.readIntNumber(what);
}

/** `locality` (§4 rule 5): str or nil; true for `"REMOTE"` (ASCII case-insensitive). */
export function readLocalityRemote(r: MsgpackReader, what: string): boolean {
  if (r.tryNil()) return false;
  const len = r.readStrLength(what);
  if (len !== 6) return false;
  const b = r.bytes;
  const s = r.strStart;
  // 'remote', folded with | 0x20 as medium names are (wire-fields.ts readMedium).
  return (b[s] | 0x20) === 0x72 && (b[s + 1] | 0x20) === 0x65 && (b[s + 2] | 0x20) === 0x6d && (b[s + 3] | 0x20) === 0x6f && (b[s + 4] | 0x20) === 0x74 && (b[s + 5] | 0x20) === 0x65;
}

/**
 * The identity fields of one BlockStored or snapshot block, as offsets into the payload while it
 * is read, then resolved (`resolveEvent`, `resolveSnapshotBlock`). One reused scratch object per
 * decoder; `reset` before each event or block.
 */
export class IdentityFields {
  loraIdPresent = false;
  /** lora_name bytes in the payload; −1 = nil. */
  loraStart = -1;
  loraLen = 0;
  /** Offset of the `extra_keys` array (validated, not yet interpreted); −1 = nil. */
  extraKeysAt = -1;
  /** SGLang's event salt: the `cache_salt` field; −1 = nil. */
  eventSaltStart = -1;
  eventSaltLen = 0;
  /** SGLang's `metadata.cache_salt` (used when the event has no `cache_salt` field); −1 = nil. */
  metaSaltStart = -1;
  metaSaltLen = 0;

  // Results of resolveEvent / resolveSnapshotBlock.
  identity: KeyIdentity = PLAIN_IDENTITY;
  outOfScope = false;
  /** Live events: blocks before the first unreproducible one. */
  reproducibleBlocks = 0;
  /** Snapshot blocks: its entry is unreproducible. */
  multimodal = false;

  private saltStart = -1;
  private saltLen = 0;

  constructor(private readonly interner: IdentityInterner) {}

  reset(): void {
    this.loraIdPresent = false;
    this.loraStart = -1;
    this.loraLen = 0;
    this.extraKeysAt = -1;
    this.eventSaltStart = -1;
    this.eventSaltLen = 0;
    this.metaSaltStart = -1;
    this.metaSaltLen = 0;
  }

  /** lora_id: int or nil (§4 rule 1: only its presence matters). */
  readLoraId(r: MsgpackReader, what: string): void {
    if (r.tryNil()) {
      this.loraIdPresent = false;
      return;
    }
    r.readIntNumber(what);
    this.loraIdPresent = true;
  }

  /** lora_name: str or nil. */
  readLoraName(r: MsgpackReader, what: string): void {
    if (r.tryNil()) {
      this.loraStart = -1;
      return;
    }
    this.loraLen = r.readStrLength(what);
    this.loraStart = r.strStart;
  }

  /** extra_keys: array or nil; its structure is checked now, its meaning read on resolve. */
  readExtraKeys(r: MsgpackReader, what: string): void {
    if (r.tryNil()) {
      this.extraKeysAt = -1;
      return;
    }
    const at = r.pos;
    r.readArrayLength(what);
    r.pos = at;
    r.skipValue();
    this.extraKeysAt = at;
  }

  /** SGLang's `cache_salt` field of the event: str or nil. */
  readEventSalt(r: MsgpackReader, what: string): void {
    if (r.tryNil()) {
      this.eventSaltStart = -1;
      return;
    }
    this.eventSaltLen = r.readStrLength(what);
    this.eventSaltStart = r.strStart;
  }

  /** SGLang's `metadata` map: `{"cache_salt": s}` (str or nil); other keys ignored; nil = none. */
  readMetadata(r: MsgpackReader, what: string): void {
    if (r.tryNil()) return;
    const n = r.readMapLength(what);
    for (let i = 0; i < n; i++) {
      if (r.readKey(METADATA_KEYS) !== 0) {
        r.skipValue();
      } else if (r.tryNil()) {
        this.metaSaltStart = -1;
      } else {
        this.metaSaltLen = r.readStrLength(`${what}.cache_salt`);
        this.metaSaltStart = r.strStart;
      }
    }
  }

  /**
   * §4 rules 1–3 for a BlockStored of `blocks` hashes (`parentless`: its parent_block_hash is
   * nil). Sets identity, outOfScope and reproducibleBlocks (0 with PLAIN_IDENTITY when the whole
   * event is out of scope). Leaves the reader where it was.
   */
  resolveEvent(r: MsgpackReader, blocks: number, parentless: boolean): void {
    this.reproducibleBlocks = blocks;
    if (!this.begin()) return;
    if (this.extraKeysAt >= 0) {
      const back = r.pos;
      r.pos = this.extraKeysAt;
      this.reproducibleBlocks = this.readEventEntries(r, blocks, parentless);
      r.pos = back;
    }
    this.finish(r.bytes, parentless);
  }

  /**
   * §4 rules 1–2 for one snapshot block (kv-events §6): sets identity, outOfScope and multimodal
   * (at most one of the two; PLAIN_IDENTITY unless the block is in scope).
   */
  resolveSnapshotBlock(r: MsgpackReader, parentless: boolean): void {
    this.reproducibleBlocks = 1;
    if (!this.begin()) return;
    if (this.extraKeysAt >= 0) {
      const back = r.pos;
      r.pos = this.extraKeysAt;
      this.multimodal = this.readSnapshotEntry(r, parentless) === ENTRY_OUT;
      r.pos = back;
    }
    if (!this.multimodal) this.finish(r.bytes, parentless);
  }

  /**
   * Plain results, SGLang's salt settled (the `cache_salt` field, else the metadata's), then
   * rule 1 and the empty-name rule. False when nothing is left to read: no identity field at all
   * (a plain block, the hot path), or the whole event is out of scope.
   */
  private begin(): boolean {
    this.identity = PLAIN_IDENTITY;
    this.outOfScope = false;
    this.multimodal = false;
    this.saltStart = -1;
    this.saltLen = 0;
    if (this.eventSaltStart < 0) {
      this.eventSaltStart = this.metaSaltStart;
      this.eventSaltLen = this.metaSaltLen;
    }
    if (this.loraStart < 0 && this.extraKeysAt < 0 && this.eventSaltStart < 0) {
      // Rule 1: ids are per-process counters, not names.
      if (this.loraIdPresent) this.setOutOfScope();
      return false;
    }
    if ((this.loraIdPresent && this.loraStart < 0) || (this.loraStart >= 0 && this.loraLen === 0)) {
      this.setOutOfScope();
      return false;
    }
    return true;
  }

  /** The whole event (or block) is out of scope: no block reproducible, no identity. */
  private setOutOfScope(): void {
    this.outOfScope = true;
    this.multimodal = false;
    this.reproducibleBlocks = 0;
    this.identity = PLAIN_IDENTITY;
  }

  /** The salt (from extra_keys or SGLang's field) and the identity; out of scope when unusable. */
  private finish(buf: Uint8Array, parentless: boolean): void {
    // Rule 3: SGLang's salt belongs to the event's parentless first block only.
    if (this.eventSaltStart >= 0 && parentless) {
      if (this.saltStart >= 0 && !sameRange(buf, this.saltStart, this.saltLen, this.eventSaltStart, this.eventSaltLen)) {
        this.setOutOfScope();
        return;
      }
      this.saltStart = this.eventSaltStart;
      this.saltLen = this.eventSaltLen;
    }
    if (this.saltStart >= 0 && this.saltLen === 0) {
      this.setOutOfScope();
      return;
    }
    this.identity = this.interner.get(buf, this.loraStart, this.loraLen, this.saltStart, this.saltLen);
  }

  /** Live form: one entry per block hash; returns the first unreproducible block (or `blocks`). */
  private readEventEntries(r: MsgpackReader, blocks: number, parentless: boolean): number {
    const n = r.readArrayLength('extra_keys');
    const m = n < blocks ? n : blocks;
    for (let i = 0; i < m; i++) {
      if (this.readEntry(r, i === 0 && parentless) === ENTRY_OUT) return i;
    }
    return blocks;
  }

  /** Snapshot form: the block's own entry, or a one-element per-hash list holding it. */
  private readSnapshotEntry(r: MsgpackReader, parentless: boolean): number {
    const at = r.pos;
    const n = r.readArrayLength('extra_keys');
    if (n === 1 && (r.nextIsArray() || r.peek() === 0xc0)) return this.readEntry(r, parentless);
    r.pos = at;
    return this.readEntry(r, parentless);
  }

  /**
   * One block's entry at the cursor (rule 2): drop a leading element equal to lora_name; nothing
   * left → plain; exactly one string on a parentless block → its salt; anything else → out.
   */
  private readEntry(r: MsgpackReader, saltAllowed: boolean): number {
    if (r.tryNil()) return ENTRY_PLAIN;
    if (!r.nextIsArray()) return ENTRY_OUT;
    const n = r.readArrayLength('extra_keys entry');
    let rest = n;
    if (rest > 0 && this.loraStart >= 0 && r.nextIsStr()) {
      const at = r.pos;
      const len = r.readStrLength('extra_keys entry');
      if (sameRange(r.bytes, r.strStart, len, this.loraStart, this.loraLen)) rest--;
      else r.pos = at;
    }
    if (rest === 0) return ENTRY_PLAIN;
    if (rest === 1 && saltAllowed && r.nextIsStr()) {
      this.saltLen = r.readStrLength('extra_keys salt');
      this.saltStart = r.strStart;
      return ENTRY_SALT;
    }
    return ENTRY_OUT;
  }
}

function sameRange(buf: Uint8Array, a: number, aLen: number, b: number, bLen: number): boolean {
  if (aLen !== bLen) return false;
  for (let i = 0; i < aLen; i++) if (buf[a + i] !== buf[b + i]) return false;
  return true;
}
