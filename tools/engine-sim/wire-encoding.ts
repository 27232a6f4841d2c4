/**
 * Byte-level encoding of what a publisher sends (kv-events §2, §3, §6): u64be frames, array
 * batches `[ts, events, dp_rank]`, map events with `"type"`, snapshot chunk envelopes.
 *
 * Events and snapshot blocks are encoded one by one and batches/chunks are assembled from
 * those bytes, so splitting to `max_message_bytes` knows every size exactly without re-encoding.
 */
import { Encoder } from '@msgpack/msgpack';
import { InvalidWireValueError, SimLimitError } from './sim-errors.js';
import type { WireEvent, WireHash, WireSnapshotBlock } from './wire-types.js';

const U64_MAX = 0xffffffffffffffffn;
const TWO_POW_32 = 0x1_0000_0000;

/** §6: frame 1 of the terminator message. */
export const TERMINATOR_WATERMARK = new Uint8Array([0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff]);
export const EMPTY_FRAME = new Uint8Array(0);

/** §2 frame 1 / §6 frame 1: exactly 8 bytes, big-endian. */
export function u64be(value: bigint): Uint8Array {
  const out = new Uint8Array(8);
  new DataView(out.buffer).setBigUint64(0, BigInt.asUintN(64, value), false);
  return out;
}

/** Inverse of u64be; null unless exactly 8 bytes. */
export function readU64be(frame: Uint8Array): bigint | null {
  if (frame.length !== 8) return null;
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0, false);
}

/** §3.3: the engine hash a wire value denotes (integers mod 2^64, bin = last 8 bytes BE). */
export function hashToU64(h: WireHash): bigint {
  if (typeof h === 'bigint') return BigInt.asUintN(64, h);
  if (typeof h === 'number') {
    if (!Number.isSafeInteger(h)) throw new InvalidWireValueError(`hash ${h} is not a safe integer`);
    return BigInt.asUintN(64, BigInt(h));
  }
  let v = 0n;
  for (let i = Math.max(0, h.length - 8); i < h.length; i++) v = (v << 8n) | BigInt(h[i]);
  return v;
}

/**
 * The value to hand to msgpack for a hash field. @msgpack/msgpack with useBigInt64 writes a
 * number ≥ 2^32 as float64 (not exact, §3.1), so those become bigint (uint64/int64); a bigint
 * below 2^32 becomes a number so small hashes take the compact form real engines emit
 * (`0b`, §3.5). Bins pass through. Anything else is passed as-is so decoder tests can send
 * wrong types.
 */
function wireHashValue(h: unknown): unknown {
  if (typeof h === 'bigint') {
    if (h >= 0n && h < 0x1_0000_0000n) return Number(h);
    if (h < 0n && h >= -0x8000_0000n) return Number(h);
    if (h > U64_MAX || h < -0x8000_0000_0000_0000n) {
      throw new InvalidWireValueError(`hash ${h} does not fit 64 bits`);
    }
    return h;
  }
  if (typeof h === 'number' && Number.isInteger(h) && (h >= TWO_POW_32 || h < -0x8000_0000)) {
    if (!Number.isSafeInteger(h)) throw new InvalidWireValueError(`hash ${h} is not exact as a number; pass a bigint`);
    return BigInt(h);
  }
  return h;
}

function wireHashList(list: unknown): unknown {
  if (!Array.isArray(list)) return list;
  const out = new Array<unknown>(list.length);
  for (let i = 0; i < list.length; i++) out[i] = wireHashValue(list[i]);
  return out;
}

/**
 * Key order of each map event: vLLM's struct field order (the §3.5 example's order, then the
 * 0.19+ identity and group fields), unknown keys after. The same order is the positional layout.
 */
const EVENT_KEY_ORDER: Readonly<Record<string, readonly string[]>> = {
  BlockStored: [
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
  ],
  BlockRemoved: ['type', 'block_hashes', 'medium', 'group_idx'],
  AllBlocksCleared: ['type', 'medium'],
};
/**
 * Positional (msgspec `array_like`) events: how many leading positions have no default and are
 * always written; the rest default to nil and are left off the end when nil (`omit_defaults`).
 * AllBlocksCleared has no fields at all in vLLM.
 */
const POSITIONAL_REQUIRED: Readonly<Record<string, number>> = { BlockStored: 8, BlockRemoved: 3, AllBlocksCleared: 1 };
const HASH_LIST_KEYS = new Set(['block_hashes']);
const SNAPSHOT_BLOCK_KEYS = ['block_hash', 'parent_block_hash', 'token_ids', 'media', 'lora_id', 'lora_name', 'extra_keys'];

/**
 * How a publisher writes its map events (engines.md §2): `map` (kv-events §3.2 canonical, newer
 * vLLM) or `array`, the positional form older vLLM releases shipped (msgspec `array_like`).
 */
export type EventEncoding = 'map' | 'array';

/** Encodes events, snapshot blocks and the envelopes around them. One instance per publisher. */
export class WireEncoder {
  private readonly msgpack = new Encoder({ useBigInt64: true });

  constructor(private readonly eventEncoding: EventEncoding = 'map') {}

  /**
   * One event's MessagePack bytes: a map event in this encoder's event encoding, or a positional
   * one passed through.
   */
  encodeEvent(event: WireEvent): Uint8Array {
    if (Array.isArray(event)) return this.msgpack.encode(normalizePositional(event));
    const map = normalizeMapEvent(event as Record<string, unknown>);
    const positional = this.eventEncoding === 'array' ? positionalOf(map) : null;
    return this.msgpack.encode(positional ?? map);
  }

  encodeSnapshotBlock(block: WireSnapshotBlock): Uint8Array {
    const src = block as unknown as Record<string, unknown>;
    const out: Record<string, unknown> = {};
    for (const k of SNAPSHOT_BLOCK_KEYS) if (k in src) out[k] = src[k];
    out.block_hash = wireHashValue(block.block_hash);
    out.parent_block_hash = wireHashValue(block.parent_block_hash);
    return this.msgpack.encode(out);
  }

  /** Any value, for envelope scalars. */
  encodeValue(value: unknown): Uint8Array {
    return this.msgpack.encode(value);
  }

  /**
   * §3.1 array batch `[ts, events, dp_rank]`. `ts` is always float64 (`cb`), even when the
   * clock reads a whole second. `dpRank` null writes nil (fault injection for D8/P3).
   */
  encodeBatch(ts: number, events: readonly Uint8Array[], dpRank: number | null): Uint8Array {
    const rank = dpRank === null ? NIL : this.msgpack.encode(dpRank);
    let size = 1 + 9 + arrayHeaderBytes(events.length) + rank.length;
    for (const e of events) size += e.length;
    const out = new Uint8Array(size);
    const view = new DataView(out.buffer);
    out[0] = 0x93;
    out[1] = 0xcb;
    view.setFloat64(2, ts, false);
    let pos = writeArrayHeader(out, view, 10, events.length);
    for (const e of events) {
      out.set(e, pos);
      pos += e.length;
    }
    out.set(rank, pos);
    return out;
  }

  /**
   * A batch in one of the forms vLLM and SGLang have shipped (engines.md §2): array
   * `[ts, events, dp_rank]` or `[ts, events]` (rank omitted), map
   * `{ts, events, data_parallel_rank}` or `{ts, events}`. The array form with the rank is
   * exactly `encodeBatch`.
   */
  encodeBatchAs(ts: number, events: readonly Uint8Array[], dpRank: number | null, form: BatchForm): Uint8Array {
    if (form.encoding === 'array' && !form.omitDpRank) return this.encodeBatch(ts, events, dpRank);
    const rank = form.omitDpRank ? null : dpRank === null ? NIL : this.msgpack.encode(dpRank);
    const isMap = form.encoding === 'map';
    const head: Uint8Array[] = [];
    head.push(new Uint8Array([(isMap ? 0x80 : 0x90) | (rank === null ? 2 : 3)]));
    if (isMap) head.push(KEY_TS);
    const tsBytes = new Uint8Array(9);
    tsBytes[0] = 0xcb;
    new DataView(tsBytes.buffer).setFloat64(1, ts, false);
    head.push(tsBytes);
    if (isMap) head.push(KEY_EVENTS);
    const arr = new Uint8Array(arrayHeaderBytes(events.length));
    writeArrayHeader(arr, new DataView(arr.buffer), 0, events.length);
    head.push(arr);
    const tail: Uint8Array[] = rank === null ? [] : isMap ? [KEY_DATA_PARALLEL_RANK, rank] : [rank];
    let size = 0;
    for (const part of [...head, ...events, ...tail]) size += part.length;
    const out = new Uint8Array(size);
    let pos = 0;
    for (const part of [...head, ...events, ...tail]) {
      out.set(part, pos);
      pos += part.length;
    }
    return out;
  }

  /** Bytes a batch adds around its events (for splitting; worst case: the map form's keys). */
  batchOverheadBytes(dpRank: number | null): number {
    return 1 + KEY_TS.length + 9 + KEY_EVENTS.length + 5 + KEY_DATA_PARALLEL_RANK.length + (dpRank === null ? 1 : this.msgpack.encode(dpRank).length);
  }

  /** §6 chunk envelope `{dp_rank, block_size, blocks}` over pre-encoded blocks [from, to). */
  encodeChunk(dpRank: number, blockSize: number, blocks: readonly Uint8Array[], from: number, to: number): Uint8Array {
    const head = this.chunkHead(dpRank, blockSize);
    const n = to - from;
    let size = head.length + arrayHeaderBytes(n);
    for (let i = from; i < to; i++) size += blocks[i].length;
    const out = new Uint8Array(size);
    out.set(head, 0);
    let pos = writeArrayHeader(out, new DataView(out.buffer), head.length, n);
    for (let i = from; i < to; i++) {
      out.set(blocks[i], pos);
      pos += blocks[i].length;
    }
    return out;
  }

  /** Bytes a chunk adds around its blocks (worst case of the array header). */
  chunkOverheadBytes(dpRank: number, blockSize: number): number {
    return this.chunkHead(dpRank, blockSize).length + 5;
  }

  private chunkHead(dpRank: number, blockSize: number): Uint8Array {
    // Map of 3 with the "blocks" key last, so the array header follows directly.
    const rank = this.msgpack.encode(dpRank);
    const bs = this.msgpack.encode(blockSize);
    const out = new Uint8Array(1 + KEY_DP_RANK.length + rank.length + KEY_BLOCK_SIZE.length + bs.length + KEY_BLOCKS.length);
    let pos = 0;
    out[pos++] = 0x83;
    for (const part of [KEY_DP_RANK, rank, KEY_BLOCK_SIZE, bs, KEY_BLOCKS]) {
      out.set(part, pos);
      pos += part.length;
    }
    return out;
  }
}

const NIL = new Uint8Array([0xc0]);
const utf8 = new TextEncoder();
const KEY_DP_RANK = fixstr('dp_rank');
const KEY_BLOCK_SIZE = fixstr('block_size');
const KEY_BLOCKS = fixstr('blocks');
const KEY_TS = fixstr('ts');
const KEY_EVENTS = fixstr('events');
const KEY_DATA_PARALLEL_RANK = fixstr('data_parallel_rank');

/** engines.md §2 / §5 `--batch_encoding`, `--omit_dp_rank` and `--event_encoding`. */
export interface BatchForm {
  readonly encoding: 'array' | 'map';
  readonly omitDpRank: boolean;
  /** The events inside the batch; absent = map. */
  readonly eventEncoding?: EventEncoding;
}

/** kv-events §3.1: what publishers MUST emit, and what xLLM engines do. */
export const CANONICAL_BATCH_FORM: BatchForm = Object.freeze({ encoding: 'array', omitDpRank: false });

function fixstr(s: string): Uint8Array {
  const b = utf8.encode(s);
  const out = new Uint8Array(1 + b.length);
  out[0] = 0xa0 | b.length;
  out.set(b, 1);
  return out;
}

function arrayHeaderBytes(n: number): number {
  return n < 16 ? 1 : n < 0x10000 ? 3 : 5;
}

function writeArrayHeader(out: Uint8Array, view: DataView, pos: number, n: number): number {
  if (n < 16) {
    out[pos] = 0x90 | n;
    return pos + 1;
  }
  if (n < 0x10000) {
    out[pos] = 0xdc;
    view.setUint16(pos + 1, n, false);
    return pos + 3;
  }
  out[pos] = 0xdd;
  view.setUint32(pos + 1, n, false);
  return pos + 5;
}

function normalizeMapEvent(e: Record<string, unknown>): Record<string, unknown> {
  const order = typeof e.type === 'string' ? EVENT_KEY_ORDER[e.type] : undefined;
  const out: Record<string, unknown> = {};
  if (order) for (const k of order) if (k in e) out[k] = e[k];
  for (const k of Object.keys(e)) if (!(k in out)) out[k] = e[k];
  for (const k of Object.keys(out)) {
    if (HASH_LIST_KEYS.has(k)) out[k] = wireHashList(out[k]);
    else if (k === 'parent_block_hash') out[k] = wireHashValue(out[k]);
  }
  return out;
}

/**
 * A normalized map event in vLLM's positional layout: the fields in struct order, trailing nil
 * defaults left off. Null when the event has no positional form that means the same: an unknown
 * type, or an `AllBlocksCleared` of one tier (positional ones clear both, §3.2); such an event goes
 * as a map, which a batch may mix with positional ones (§3.2).
 */
function positionalOf(e: Record<string, unknown>): unknown[] | null {
  const type = e.type;
  if (typeof type !== 'string') return null;
  const order = EVENT_KEY_ORDER[type];
  const required = POSITIONAL_REQUIRED[type];
  if (order === undefined || required === undefined) return null;
  if (type === 'AllBlocksCleared') return e.medium === null || e.medium === undefined ? [type] : null;
  const out: unknown[] = [type];
  for (let i = 1; i < order.length; i++) out.push(e[order[i]!] ?? null);
  while (out.length > required && out[out.length - 1] === null) out.pop();
  return out;
}

function normalizePositional(e: readonly unknown[]): unknown[] {
  const out = e.slice();
  // §3.2 positional layouts: hashes at 1 for both; the parent at 2 for BlockStored.
  if (out[0] === 'BlockStored' || out[0] === 'BlockRemoved') out[1] = wireHashList(out[1]);
  if (out[0] === 'BlockStored' && out.length > 2) out[2] = wireHashValue(out[2]);
  return out;
}

/**
 * §6/§11.8: encode a snapshot as chunk payloads, parent-first order kept, each within
 * `maxMessageBytes` and holding at most `maxBlocksPerChunk` blocks. An empty state still gives
 * one chunk (`blocks: []`) because at least one chunk must precede the terminator.
 */
export function encodeSnapshotChunks(
  encoder: WireEncoder,
  blocks: readonly WireSnapshotBlock[],
  dpRank: number,
  blockSize: number,
  maxMessageBytes: number,
  maxBlocksPerChunk: number,
): Uint8Array[] {
  const encoded = blocks.map((b) => encoder.encodeSnapshotBlock(b));
  const budget = maxMessageBytes - encoder.chunkOverheadBytes(dpRank, blockSize);
  const chunks: Uint8Array[] = [];
  let from = 0;
  let bytes = 0;
  for (let i = 0; i < encoded.length; i++) {
    const len = encoded[i].length;
    if (len > budget) throw new SimLimitError(`snapshot block ${i} needs ${len} bytes, over max_message_bytes ${maxMessageBytes}`);
    if (i > from && (bytes + len > budget || i - from >= maxBlocksPerChunk)) {
      chunks.push(encoder.encodeChunk(dpRank, blockSize, encoded, from, i));
      from = i;
      bytes = 0;
    }
    bytes += len;
  }
  if (from < encoded.length || chunks.length === 0) chunks.push(encoder.encodeChunk(dpRank, blockSize, encoded, from, encoded.length));
  return chunks;
}
