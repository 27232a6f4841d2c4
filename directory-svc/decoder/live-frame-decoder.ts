/**
 * Live message decoder (kv-events §2, §3): three ZeroMQ frames → one LiveBatch, or a typed
 * StreamError. Pure: no sockets, clock or logging; the subscriber counts and logs around it.
 * Hot path: one call per live batch, reading the payload in place through MsgpackReader; the
 * only allocations are the result objects and one typed array per hash list / token list.
 *
 * Decisions where the spec is silent:
 * - Parse errors take precedence over protocol errors: the whole payload (including trailing
 *   bytes) is decoded before the batch dp_rank is compared, whatever the map key order.
 * - A present dp_rank that is not an integer is a field of the wrong type (`parse`); a nil or
 *   missing one is `protocol` (§3.1).
 * - Extra elements after dp_rank in an array batch are ignored, like extra event elements.
 * - Duplicate map keys: the last value wins, except `"type"`, where the first one is used.
 * - Non-str map keys count as unknown keys and are skipped.
 * - block_size and token counts are NOT checked here: the index does it only for token-bearing,
 *   in-scope events (§5.1).
 * - cache-identity §4 fields (identity-fields.ts): `group_idx`, `kv_cache_spec_kind`,
 *   `kv_cache_spec_sliding_window` and `locality` are read in both forms, positionally after
 *   `extra_keys` (BlockStored 9–12, BlockRemoved 3–4, vLLM's field order). In the array form a
 *   map at position 7 or later of a BlockStored is SGLang's `metadata` (`{"cache_salt": s}`), not
 *   a field of the wrong type: no vLLM field from there on is a map. The map form also accepts
 *   SGLang's `cache_salt` field and a `metadata` map.
 * - `locality: "REMOTE"` is a tier we do not serve on every stream kind (the field is new; on an
 *   xllm stream a STORAGE medium stays `parse`, a remote locality is never credited either way).
 */
import { ParseError, ProtocolError } from '../errors/stream-errors.js';
import { TIER_BOTH, TIER_DEVICE, TIER_HOST, TIER_UNSERVED } from '../../shared/keys/tier-bits.js';
import type { EngineHash, KvEvent, LiveBatch } from './kv-batch.js';
import { KeyTable, MsgpackReader } from './msgpack-reader.js';
import { IdentityFields, IdentityInterner, readGroupIndex, readLocalityRemote, readSpecKindReusable, skipOptionalInt } from './identity-fields.js';
import {
  NO_TOKEN_IDS,
  checkPayloadSize,
  describeFound,
  readHashArray,
  readHashValue,
  readMedium,
  readTokenIds,
  readU64Frame,
} from './wire-fields.js';
import type { MediumCode } from './wire-fields.js';

/** What decodeBatchPayload needs from the stream's configuration. */
export interface BatchPayloadOptions {
  /** The stream's configured dp_rank; the batch's MUST equal it (§3.1). */
  readonly dpRank: number;
  /**
   * engines.md §2 batch rules (vllm/sglang streams): a missing or nil rank takes `dpRank`, and a
   * medium other than GPU/CPU decodes as TIER_UNSERVED. False (xllm): both stay errors.
   */
  readonly historyKindRules?: boolean;
}

export interface LiveDecoderOptions extends BatchPayloadOptions {
  /** Configured topic bytes; frame 0 must be byte-equal (§2 step 1). */
  readonly topic: Uint8Array;
  /** §9 max_message_bytes: the payload frame's limit (§2 step 3). */
  readonly maxMessageBytes: number;
}

export type LiveDecodeResult = { readonly kind: 'topic_mismatch' } | { readonly kind: 'batch'; readonly batch: LiveBatch };

const TOPIC_MISMATCH: LiveDecodeResult = Object.freeze({ kind: 'topic_mismatch' });

/** §7.2 buffer cost weights. */
const COST_PER_EVENT = 64;
const COST_PER_BLOCK_HASH = 8;
const COST_PER_TOKEN_ID = 4;

/**
 * Applies the §2 checks in order, then decodes the payload (§3).
 * 1. frame 0 ≠ topic → `topic_mismatch` (no decode, no seq check);
 * 2. frame count ≠ 3 or frame 1 not 8 bytes → ParseError;
 * 3. payload > maxMessageBytes → LimitError;
 * 4. decode → ParseError / ProtocolError.
 */
export function decodeLiveMessage(frames: readonly Uint8Array[], opts: LiveDecoderOptions): LiveDecodeResult {
  if (frames.length === 0) throw new ParseError('live message has no frames, expected 3');
  if (!bytesEqual(frames[0], opts.topic)) return TOPIC_MISMATCH;
  if (frames.length !== 3) throw new ParseError(`live message has ${frames.length} frames, expected 3`);
  const seq = readU64Frame(frames[1], 'seq');
  const payload = frames[2];
  checkPayloadSize(payload, opts.maxMessageBytes);
  const frameBytes = frames[0].byteLength + 8 + payload.byteLength;
  return { kind: 'batch', batch: decodeBatchPayload(payload, seq, frameBytes, opts) };
}

// Batch map keys (§3.1).
const BATCH_KEYS = new KeyTable(['ts', 'events', 'data_parallel_rank']);
const B_TS = 0;
const B_EVENTS = 1;
const B_DP_RANK = 2;

// Event names (§3.2), compared case-sensitively.
const EVENT_NAMES = new KeyTable(['BlockStored', 'BlockRemoved', 'AllBlocksCleared']);
const TAG_STORED = 0;
const TAG_REMOVED = 1;
const TAG_CLEARED = 2;

// Event fields (§3.2, cache-identity §4); the id doubles as a bit in the per-event masks below.
const EVENT_KEYS = new KeyTable([
  'type',
  'block_hashes',
  'parent_block_hash',
  'token_ids',
  'block_size',
  'lora_id',
  'medium',
  'lora_name',
  'extra_keys',
  'group_idx',
  'kv_cache_spec_kind',
  'kv_cache_spec_sliding_window',
  'locality',
  'cache_salt',
  'metadata',
]);
const F_TYPE = 0;
const F_HASHES = 1;
const F_PARENT = 2;
const F_TOKENS = 3;
const F_BLOCK_SIZE = 4;
const F_LORA_ID = 5;
const F_MEDIUM = 6;
const F_LORA_NAME = 7;
const F_EXTRA_KEYS = 8;
const F_GROUP = 9;
const F_SPEC_KIND = 10;
const F_SLIDING_WINDOW = 11;
const F_LOCALITY = 12;
const F_CACHE_SALT = 13;
const F_METADATA = 14;

/** Fields each event reads from its map form; other keys are ignored (§3.2). */
const FIELDS_OF_TAG: readonly number[] = [
  0b111111111111110, // BlockStored: every field but type
  (1 << F_HASHES) | (1 << F_MEDIUM) | (1 << F_GROUP) | (1 << F_LOCALITY), // BlockRemoved
  (1 << F_MEDIUM) | (1 << F_LOCALITY), // AllBlocksCleared (medium optional)
];

/**
 * Positional layouts (§3.2, vLLM's field order), element 0 being the name:
 *   BlockStored      [tag, block_hashes, parent_block_hash, token_ids, block_size, lora_id, medium,
 *                     lora_name, extra_keys, group_idx, kv_cache_spec_kind,
 *                     kv_cache_spec_sliding_window, locality, ...]
 *   BlockRemoved     [tag, block_hashes, medium, group_idx, locality, ...]
 *   AllBlocksCleared [tag, ...]   no medium position: it always clears both tiers
 * Missing trailing elements are nil; extra ones are skipped. A BlockStored map at position 7 or
 * later is SGLang's metadata (METADATA_FROM).
 */
const POSITIONS_OF_TAG: readonly (readonly number[])[] = [
  [F_HASHES, F_PARENT, F_TOKENS, F_BLOCK_SIZE, F_LORA_ID, F_MEDIUM, F_LORA_NAME, F_EXTRA_KEYS, F_GROUP, F_SPEC_KIND, F_SLIDING_WINDOW, F_LOCALITY],
  [F_HASHES, F_MEDIUM, F_GROUP, F_LOCALITY],
  [],
];
/** SGLang's BlockStoredWithMetadata: [tag, hashes, parent, tokens, block_size, lora_id, medium, metadata]. */
const METADATA_FROM = 7;

/** Fields of the event being decoded: one reused scratch object, reset per event. */
class EventDraft {
  hashes: BigUint64Array | null = null;
  parent: EngineHash | null = null;
  tokens: Int32Array = NO_TOKEN_IDS;
  blockSize: number | null = null;
  medium: MediumCode = 0;
  group = 0;
  reusableGroup = true;
  remote = false;
  readonly identity = new IdentityFields(new IdentityInterner());

  reset(): void {
    this.hashes = null;
    this.parent = null;
    this.tokens = NO_TOKEN_IDS;
    this.blockSize = null;
    this.medium = 0;
    this.group = 0;
    this.reusableGroup = true;
    this.remote = false;
    this.identity.reset();
  }
}

const draft = new EventDraft();
/** engines.md §2 medium rule for the batch being decoded (set once per batch, read per event). */
let allowUnservedMedium = false;

/**
 * Decodes one batch payload (§3.1–§3.4) already through the §2 framing checks. `frameBytes` is
 * the total size of the message's frames, the base of the §7.2 buffer cost.
 */
export function decodeBatchPayload(
  payload: Uint8Array,
  seq: bigint,
  frameBytes: number,
  opts: BatchPayloadOptions,
): LiveBatch {
  const r = new MsgpackReader(payload);
  const historyKind = opts.historyKindRules === true;
  allowUnservedMedium = historyKind;
  let ts: number | null = null;
  let events: KvEvent[] | null = null;
  let dpRank: number | null = null;

  if (r.nextIsArray()) {
    // [ts, events, dp_rank, ...]
    const n = r.readArrayLength('batch');
    if (n < 2) throw new ParseError(`batch array has ${n} elements, expected at least 2 (ts, events)`);
    ts = r.readNumber('ts');
    events = readEvents(r);
    if (n >= 3 && !r.tryNil()) dpRank = r.readIntNumber('dp_rank');
    for (let i = 3; i < n; i++) r.skipValue();
  } else if (r.nextIsMap()) {
    const n = r.readMapLength('batch');
    for (let i = 0; i < n; i++) {
      switch (r.readKey(BATCH_KEYS)) {
        case B_TS:
          ts = r.tryNil() ? null : r.readNumber('ts');
          break;
        case B_EVENTS:
          events = r.tryNil() ? null : readEvents(r);
          break;
        case B_DP_RANK:
          dpRank = r.tryNil() ? null : r.readIntNumber('data_parallel_rank');
          break;
        default:
          r.skipValue();
      }
    }
    if (ts === null) throw new ParseError('batch map has no ts');
    if (events === null) throw new ParseError('batch map has no events');
  } else {
    throw new ParseError(`batch: expected array or map, got ${describeFound(r)}`);
  }
  if (!r.atEnd()) throw new ParseError(`${r.remaining()} trailing bytes after the batch at offset ${r.pos}`);
  // §3.1: checked after the payload decoded cleanly (parse before protocol, whatever the key order).
  // engines.md §2: vLLM/SGLang batches without a rank (or SGLang's attn_dp_rank nil) are the stream's.
  if (dpRank === null) {
    if (!historyKind) throw new ProtocolError(`batch dp_rank is nil or missing, stream dp_rank is ${opts.dpRank}`);
    dpRank = opts.dpRank;
  }
  if (dpRank !== opts.dpRank) throw new ProtocolError(`batch dp_rank ${dpRank}, stream dp_rank is ${opts.dpRank}`);

  let cost = frameBytes + COST_PER_EVENT * events.length;
  for (let i = 0; i < events.length; i++) {
    const e = events[i];
    if (e.kind === 'cleared') continue;
    cost += COST_PER_BLOCK_HASH * e.blockHashes.length;
    if (e.kind === 'stored') cost += COST_PER_TOKEN_ID * e.tokenIds.length;
  }
  return { seq, ts, dpRank, events, bufferCost: cost };
}

function readEvents(r: MsgpackReader): KvEvent[] {
  const n = r.readArrayLength('events');
  const events: KvEvent[] = [];
  for (let i = 0; i < n; i++) {
    try {
      events.push(readEvent(r));
    } catch (e: unknown) {
      // Name the event in the detail; only runs on the error path.
      if (e instanceof ParseError) throw new ParseError(`event ${i}: ${e.detail}`);
      throw e;
    }
  }
  return events;
}

function readEvent(r: MsgpackReader): KvEvent {
  draft.reset();
  if (r.nextIsMap()) return readMapEvent(r);
  if (r.nextIsArray()) return readPositionalEvent(r);
  throw new ParseError(`expected map or array, got ${describeFound(r)}`);
}

function readMapEvent(r: MsgpackReader): KvEvent {
  const n = r.readMapLength('event');
  const body = r.pos;
  // Pass 1: find "type" (publishers put it first, so this usually reads one key).
  let tag = -1;
  for (let i = 0; i < n; i++) {
    if (r.readKey(EVENT_KEYS) === F_TYPE) {
      tag = readTag(r);
      break;
    }
    r.skipValue();
  }
  if (tag < 0) throw new ParseError('event map has no "type"');
  // Pass 2: the fields this event uses, in wire order.
  r.pos = body;
  const mask = FIELDS_OF_TAG[tag];
  for (let i = 0; i < n; i++) {
    const field = r.readKey(EVENT_KEYS);
    if (field > F_TYPE && (mask & (1 << field)) !== 0) readField(r, field);
    else r.skipValue();
  }
  return buildEvent(r, tag, false);
}

function readPositionalEvent(r: MsgpackReader): KvEvent {
  const n = r.readArrayLength('event');
  if (n === 0) throw new ParseError('positional event is empty: no event name');
  const tag = readTag(r);
  const layout = POSITIONS_OF_TAG[tag];
  for (let p = 1; p < n; p++) {
    if (tag === TAG_STORED && p >= METADATA_FROM && r.nextIsMap()) draft.identity.readMetadata(r, 'metadata');
    else if (p - 1 < layout.length) readField(r, layout[p - 1]);
    else r.skipValue();
  }
  return buildEvent(r, tag, true);
}

function readTag(r: MsgpackReader): number {
  if (!r.nextIsStr()) throw new ParseError(`event name: expected str, got ${describeFound(r)}`);
  const len = r.readStrLength('event name');
  const tag = EVENT_NAMES.match(r.bytes, r.strStart, len);
  if (tag < 0) {
    const name = new TextDecoder().decode(r.bytes.subarray(r.strStart, r.strStart + Math.min(len, 64)));
    throw new ParseError(`unknown event name ${JSON.stringify(name)}`);
  }
  return tag;
}

function readField(r: MsgpackReader, field: number): void {
  switch (field) {
    case F_HASHES:
      draft.hashes = r.tryNil() ? null : readHashArray(r, 'block_hashes');
      return;
    case F_PARENT:
      draft.parent = r.tryNil() ? null : readHashValue(r, 'parent_block_hash');
      return;
    case F_TOKENS:
      draft.tokens = readTokenIds(r, 'token_ids');
      return;
    case F_BLOCK_SIZE:
      draft.blockSize = r.tryNil() ? null : r.readIntNumber('block_size');
      return;
    case F_LORA_ID:
      draft.identity.readLoraId(r, 'lora_id');
      return;
    case F_MEDIUM:
      draft.medium = readMedium(r, 'medium', allowUnservedMedium);
      return;
    case F_LORA_NAME:
      draft.identity.readLoraName(r, 'lora_name');
      return;
    case F_EXTRA_KEYS:
      draft.identity.readExtraKeys(r, 'extra_keys');
      return;
    case F_GROUP:
      draft.group = readGroupIndex(r, 'group_idx');
      return;
    case F_SPEC_KIND:
      draft.reusableGroup = readSpecKindReusable(r, 'kv_cache_spec_kind');
      return;
    case F_SLIDING_WINDOW:
      skipOptionalInt(r, 'kv_cache_spec_sliding_window');
      return;
    case F_LOCALITY:
      draft.remote = readLocalityRemote(r, 'locality');
      return;
    case F_CACHE_SALT:
      draft.identity.readEventSalt(r, 'cache_salt');
      return;
    case F_METADATA:
      draft.identity.readMetadata(r, 'metadata');
      return;
    default:
      r.skipValue();
  }
}

function buildEvent(r: MsgpackReader, tag: number, positional: boolean): KvEvent {
  if (tag === TAG_CLEARED) {
    // §3.2: positional AllBlocksCleared has no medium and clears both tiers; map form nil → both.
    if (draft.remote) return { kind: 'cleared', tiers: TIER_UNSERVED };
    if (positional || draft.medium === 0) return { kind: 'cleared', tiers: TIER_BOTH };
    return { kind: 'cleared', tiers: draft.medium === 3 ? TIER_UNSERVED : draft.medium };
  }
  const hashes = draft.hashes;
  if (hashes === null) {
    throw new ParseError(`${tag === TAG_STORED ? 'BlockStored' : 'BlockRemoved'}: block_hashes is nil or missing`);
  }
  // §3.4: nil medium → Device for Stored and Removed; engines.md §2: STORAGE → no tier we serve;
  // cache-identity §4 rule 5: a REMOTE locality is a tier we do not serve either.
  const medium = draft.medium;
  const tier = draft.remote || medium === 3 ? TIER_UNSERVED : medium === 2 ? TIER_HOST : TIER_DEVICE;
  if (tag === TAG_REMOVED) return { kind: 'removed', blockHashes: hashes, tier, group: draft.group };
  const id = draft.identity;
  id.resolveEvent(r, hashes.length, draft.parent === null);
  return {
    kind: 'stored',
    blockHashes: hashes,
    parentBlockHash: draft.parent,
    tokenIds: draft.tokens,
    blockSize: draft.blockSize,
    tier,
    outOfScope: id.outOfScope,
    identity: id.identity,
    reproducibleBlocks: id.reproducibleBlocks,
    group: draft.group,
    reusableGroup: draft.reusableGroup,
  };
}

function bytesEqual(a: Uint8Array, b: Uint8Array): boolean {
  const n = a.byteLength;
  if (n !== b.byteLength) return false;
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return false;
  return true;
}
