/**
 * Snapshot reply decoder (kv-events §6): one DEALER message → a chunk of blocks or the
 * terminator, or a typed StreamError. Pure: the recovery edge module owns the socket and the
 * replay_timeout_ms timer; SnapshotAssembler checks the rules that span messages of one reply.
 *
 * Error classes where the §6 table leaves the choice to us (parse = malformed or wrong type,
 * protocol = well-formed but breaks a rule, as §10 defines them):
 * | Input                                                        | Class    |
 * |--------------------------------------------------------------|----------|
 * | frame count ≠ 3, non-empty frame 0, frame 1 not 8 bytes      | parse    |
 * | empty chunk, non-empty terminator payload                    | parse    |
 * | chunk > max_message_bytes                                    | limit    |
 * | envelope not a map; `blocks` nil/missing/not an array        | parse    |
 * | `dp_rank`/`block_size` not an int                            | parse    |
 * | `dp_rank`/`block_size` nil, missing or ≠ the stream's        | protocol |
 * | block not a map; `block_hash` nil/missing/not a hash         | parse    |
 * | `token_ids` not an array or an id outside int32              | parse    |
 * | `token_ids` count ≠ block_size (nil/missing counts as 0)     | protocol |
 * | `media` nil/missing/not an array; an element not gpu/cpu     | parse    |
 * | `media` empty or with a repeated medium                      | protocol |
 * Parse errors take precedence: the first protocol violation is thrown only once the whole
 * chunk has decoded (as in the live decoder), so the class does not depend on key order.
 *
 * Identity fields (`lora_name`, `lora_id`, `extra_keys`, cache-identity §4 rules 1–2) are read
 * per block as in live events (identity-fields.ts); a block's `extra_keys` is its own entry.
 *
 * Not checked here, because they span chunks: differing watermarks and a missing chunk
 * (SnapshotAssembler below), and duplicate block hashes within the reply (`protocol`), which the
 * index builder detects as it records each hash (it holds the hash map anyway).
 */
import { ParseError, ProtocolError } from '../errors/stream-errors.js';
import type { EngineHash, SnapshotBlock, SnapshotChunk } from './kv-batch.js';
import type { TierBits } from '../../shared/keys/tier-bits.js';
import { KeyTable, MsgpackReader } from './msgpack-reader.js';
import { IdentityFields, IdentityInterner } from './identity-fields.js';
import { NO_TOKEN_IDS, checkPayloadSize, describeFound, readHashValue, readMedium, readTokenIds, readU64Frame } from './wire-fields.js';

export interface SnapshotDecoderOptions {
  /** The stream's dp_rank; every chunk's MUST equal it. */
  readonly dpRank: number;
  /** The stream's block_size; every chunk's and every block's token count MUST equal it. */
  readonly blockSize: number;
  /** §9 max_message_bytes, applied to each chunk payload. */
  readonly maxMessageBytes: number;
}

export interface SnapshotChunkMessage extends SnapshotChunk {
  readonly kind: 'chunk';
}

export type SnapshotMessage = SnapshotChunkMessage | { readonly kind: 'terminator' };

const TERMINATOR: SnapshotMessage = Object.freeze({ kind: 'terminator' });

/** Decodes one reply message as seen by the DEALER: `["", W u64be, chunk]` or `["", ff×8, ""]`. */
export function decodeSnapshotMessage(frames: readonly Uint8Array[], opts: SnapshotDecoderOptions): SnapshotMessage {
  if (frames.length !== 3) throw new ParseError(`snapshot message has ${frames.length} frames, expected 3`);
  if (frames[0].byteLength !== 0) {
    throw new ParseError(`snapshot message frame 0 is ${frames[0].byteLength} bytes, expected empty`);
  }
  const watermark = readU64Frame(frames[1], 'watermark');
  const payload = frames[2];
  // §6: all-ones is the terminator marker, never a watermark.
  if (watermark === 0xffffffffffffffffn) {
    if (payload.byteLength !== 0) {
      throw new ParseError(`snapshot terminator carries a ${payload.byteLength}-byte payload, expected empty`);
    }
    return TERMINATOR;
  }
  if (payload.byteLength === 0) throw new ParseError('snapshot chunk is empty');
  checkPayloadSize(payload, opts.maxMessageBytes);
  return { kind: 'chunk', watermark, blocks: decodeSnapshotChunk(payload, opts) };
}

const ENVELOPE_KEYS = new KeyTable(['dp_rank', 'block_size', 'blocks']);
const E_DP_RANK = 0;
const E_BLOCK_SIZE = 1;
const E_BLOCKS = 2;

const BLOCK_KEYS = new KeyTable([
  'block_hash',
  'parent_block_hash',
  'token_ids',
  'media',
  'lora_name',
  'lora_id',
  'extra_keys',
]);
const K_HASH = 0;
const K_PARENT = 1;
const K_TOKENS = 2;
const K_MEDIA = 3;
const K_LORA_NAME = 4;
const K_LORA_ID = 5;
const K_EXTRA_KEYS = 6;

/** One block's identity fields, reused by every block of every chunk (one decoder per process). */
const identityFields = new IdentityFields(new IdentityInterner());

/** Collects the first protocol violation of a chunk; thrown after the chunk decoded cleanly. */
class Violations {
  first: string | null = null;
  note(detail: string): void {
    if (this.first === null) this.first = detail;
  }
}

/** Decodes a chunk envelope `{dp_rank, block_size, blocks}` (§6); exported for tests and tools. */
export function decodeSnapshotChunk(payload: Uint8Array, opts: SnapshotDecoderOptions): SnapshotBlock[] {
  const r = new MsgpackReader(payload);
  const violations = new Violations();
  if (!r.nextIsMap()) throw new ParseError(`snapshot chunk: expected map, got ${describeFound(r)}`);
  const n = r.readMapLength('snapshot chunk');
  let dpRank: number | null = null;
  let blockSize: number | null = null;
  let blocks: SnapshotBlock[] | null = null;
  for (let i = 0; i < n; i++) {
    switch (r.readKey(ENVELOPE_KEYS)) {
      case E_DP_RANK:
        dpRank = r.tryNil() ? null : r.readIntNumber('dp_rank');
        break;
      case E_BLOCK_SIZE:
        blockSize = r.tryNil() ? null : r.readIntNumber('block_size');
        break;
      case E_BLOCKS:
        blocks = r.tryNil() ? null : readBlocks(r, opts.blockSize, violations);
        break;
      default:
        r.skipValue();
    }
  }
  if (!r.atEnd()) throw new ParseError(`${r.remaining()} trailing bytes after the snapshot chunk at offset ${r.pos}`);
  if (blocks === null) throw new ParseError('snapshot chunk has no blocks');
  if (dpRank !== opts.dpRank) {
    throw new ProtocolError(`snapshot chunk dp_rank ${dpRank ?? 'nil'}, stream dp_rank is ${opts.dpRank}`);
  }
  if (blockSize !== opts.blockSize) {
    throw new ProtocolError(`snapshot chunk block_size ${blockSize ?? 'nil'}, stream block_size is ${opts.blockSize}`);
  }
  if (violations.first !== null) throw new ProtocolError(violations.first);
  return blocks;
}

function readBlocks(r: MsgpackReader, blockSize: number, violations: Violations): SnapshotBlock[] {
  const n = r.readArrayLength('blocks');
  const blocks: SnapshotBlock[] = [];
  for (let i = 0; i < n; i++) {
    try {
      blocks.push(readBlock(r, blockSize, i, violations));
    } catch (e: unknown) {
      if (e instanceof ParseError) throw new ParseError(`block ${i}: ${e.detail}`);
      throw e;
    }
  }
  return blocks;
}

function readBlock(r: MsgpackReader, blockSize: number, index: number, violations: Violations): SnapshotBlock {
  if (!r.nextIsMap()) throw new ParseError(`expected map, got ${describeFound(r)}`);
  const n = r.readMapLength('block');
  let hash: EngineHash | null = null;
  let parent: EngineHash | null = null;
  let tokens: Int32Array = NO_TOKEN_IDS;
  let tiers = 0;
  let mediaSeen = false;
  const id = identityFields;
  id.reset();
  for (let i = 0; i < n; i++) {
    switch (r.readKey(BLOCK_KEYS)) {
      case K_HASH:
        hash = r.tryNil() ? null : readHashValue(r, 'block_hash');
        break;
      case K_PARENT:
        parent = r.tryNil() ? null : readHashValue(r, 'parent_block_hash');
        break;
      case K_TOKENS:
        tokens = readTokenIds(r, 'token_ids');
        break;
      case K_MEDIA:
        mediaSeen = !r.tryNil();
        tiers = mediaSeen ? readMedia(r, index, violations) : 0;
        break;
      case K_LORA_NAME:
        id.readLoraName(r, 'lora_name');
        break;
      case K_LORA_ID:
        id.readLoraId(r, 'lora_id');
        break;
      case K_EXTRA_KEYS:
        id.readExtraKeys(r, 'extra_keys');
        break;
      default:
        r.skipValue();
    }
  }
  if (hash === null) throw new ParseError('block_hash is nil or missing');
  if (!mediaSeen) throw new ParseError('media is nil or missing');
  if (tokens.length !== blockSize) {
    violations.note(`block ${index}: ${tokens.length} token ids, block_size is ${blockSize}`);
  }
  id.resolveSnapshotBlock(r, parent === null);
  // An empty media list was noted as a violation; keep the type total with Device.
  return {
    blockHash: hash,
    parentBlockHash: parent,
    tokenIds: tokens,
    tiers: (tiers || 1) as TierBits,
    outOfScope: id.outOfScope,
    multimodal: id.multimodal,
    identity: id.identity,
  };
}

/** media: non-empty array of distinct §3.4 values → tier bits (0 when empty, noted). */
function readMedia(r: MsgpackReader, index: number, violations: Violations): number {
  const n = r.readArrayLength('media');
  let tiers = 0;
  for (let i = 0; i < n; i++) {
    const m = readMedium(r, 'media');
    if (m === 0) throw new ParseError('media: element is nil, expected gpu or cpu');
    if ((tiers & m) !== 0) violations.note(`block ${index}: media lists ${m === 1 ? 'gpu' : 'cpu'} twice`);
    tiers |= m;
  }
  if (n === 0) violations.note(`block ${index}: media is empty`);
  return tiers;
}

/**
 * Checks the rules spanning the messages of one reply (§6): every chunk carries the same
 * watermark, at least one chunk precedes the terminator, nothing follows it. Feed it every
 * decoded message of one request, in order; pure, no timers.
 */
export class SnapshotAssembler {
  private wm: bigint | null = null;
  private chunks = 0;
  private done = false;

  /** Throws ProtocolError on a differing watermark, a chunkless reply or a message after the end. */
  accept(msg: SnapshotMessage): void {
    if (this.done) throw new ProtocolError('snapshot message after the terminator');
    if (msg.kind === 'terminator') {
      if (this.chunks === 0) throw new ProtocolError('snapshot reply has no chunk before the terminator');
      this.done = true;
      return;
    }
    if (this.wm === null) this.wm = msg.watermark;
    else if (msg.watermark !== this.wm) {
      throw new ProtocolError(`snapshot chunk watermark ${msg.watermark} differs from ${this.wm}`);
    }
    this.chunks++;
  }

  /** True once the terminator was accepted. */
  get complete(): boolean {
    return this.done;
  }

  /** The reply's watermark W, or null before the first chunk. */
  get watermark(): bigint | null {
    return this.wm;
  }

  get chunkCount(): number {
    return this.chunks;
  }
}
