/**
 * Field readers shared by the live and snapshot decoders (kv-events §3.2–§3.4, §6). Private to
 * decoder/. Each reads exactly one wire value at the cursor, applies the field's type rule, and
 * throws ParseError on a present value of the wrong type.
 */
import { LimitError, ParseError } from '../errors/stream-errors.js';
import type { EngineHash } from './kv-batch.js';
import { U64_HI, U64_LO, wireTypeName } from './msgpack-reader.js';
import type { MsgpackReader } from './msgpack-reader.js';

/** An 8-byte big-endian uint64 frame (§2 seq, §6 watermark); any other length is a ParseError. */
export function readU64Frame(frame: Uint8Array, what: string): bigint {
  if (frame.byteLength !== 8) throw new ParseError(`${what} frame is ${frame.byteLength} bytes, expected 8`);
  return new DataView(frame.buffer, frame.byteOffset, 8).getBigUint64(0, false);
}

/** §9 max_message_bytes: a larger payload is a LimitError, before it is decoded. */
export function checkPayloadSize(payload: Uint8Array, maxMessageBytes: number): void {
  if (payload.byteLength > maxMessageBytes) throw new LimitError(`max_message_bytes ${maxMessageBytes} exceeded`);
}

/** Shared by every tokenless event: a zero-length typed array has no element to mutate. */
export const NO_TOKEN_IDS: Int32Array = new Int32Array(0);

/**
 * Medium code: 0 = nil (meaning depends on the event, §3.4), 1 = gpu/Device, 2 = cpu/Host,
 * 3 = another medium (vLLM's `"STORAGE"`), a tier we do not serve (engines.md §2; only when
 * the caller allows it).
 */
export type MediumCode = 0 | 1 | 2 | 3;

// One-element scratch to turn a hash's uint32 halves into a bigint without string math.
const scratchHash = new BigUint64Array(1);
const scratchHalves = new Uint32Array(scratchHash.buffer);

/** Array of hashes (§3.3) into a BigUint64Array; one allocation per event, not per block. */
export function readHashArray(r: MsgpackReader, what: string): BigUint64Array {
  const n = r.readArrayLength(what);
  const hashes = new BigUint64Array(n);
  const halves = new Uint32Array(hashes.buffer);
  for (let i = 0; i < n; i++) {
    r.readHash(what);
    halves[2 * i + U64_LO] = r.hashLo;
    halves[2 * i + U64_HI] = r.hashHi;
  }
  return hashes;
}

/** One hash (§3.3) as an exact unsigned bigint. */
export function readHashValue(r: MsgpackReader, what: string): EngineHash {
  r.readHash(what);
  scratchHalves[U64_LO] = r.hashLo;
  scratchHalves[U64_HI] = r.hashHi;
  return scratchHash[0] as EngineHash;
}

/** token_ids: array of int32, nil ≡ [] (§3.2). */
export function readTokenIds(r: MsgpackReader, what: string): Int32Array {
  if (r.tryNil()) return NO_TOKEN_IDS;
  const n = r.readArrayLength(what);
  if (n === 0) return NO_TOKEN_IDS;
  const ids = new Int32Array(n);
  r.readInt32Into(ids, n, what);
  return ids;
}

/**
 * §3.4: `gpu`/`cpu`, ASCII case-insensitive; nil → 0. Any other string (including `""`) or a
 * non-string is `parse`. Compared in place: `b | 0x20` folds exactly the ASCII capitals.
 */
export function readMedium(r: MsgpackReader, what: string, allowUnserved = false): MediumCode {
  if (r.tryNil()) return 0;
  const len = r.readStrLength(what);
  const bytes = r.bytes;
  const s = r.strStart;
  if (len === 3 && (bytes[s + 1] | 0x20) === 0x70 && (bytes[s + 2] | 0x20) === 0x75) {
    const first = bytes[s] | 0x20;
    if (first === 0x67) return 1; // g
    if (first === 0x63) return 2; // c
  }
  // engines.md §2: for vllm/sglang any other string is a tier we do not serve, not an error.
  if (allowUnserved) return 3;
  const shown = new TextDecoder().decode(bytes.subarray(s, s + Math.min(len, 32)));
  throw new ParseError(`${what}: ${JSON.stringify(shown)} is not gpu or cpu`);
}

/** The detail used when a value that must be a map or an array is neither. */
export function describeFound(r: MsgpackReader): string {
  return `${wireTypeName(r.peek())} at offset ${r.pos}`;
}
