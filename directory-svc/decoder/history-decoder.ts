/**
 * One message of a vLLM/SGLang history reply (engines.md §3) as the DEALER sees it, in either
 * layout, into a LiveBatch or the terminator. Pure.
 *
 *   layout 2   ["", seq u64be, payload]          terminator ["", ff×8, ""]
 *   layout 3   ["", topic, seq u64be, payload]   terminator ["", "", ff×8, ""]
 *
 * Malformed framing is `parse`; a history message whose topic differs from the stream's is
 * `protocol` (the terminator's empty topic frame is not compared); a payload above
 * max_message_bytes is `limit`; the payload decodes with the stream's batch rules (§2).
 */
import { ParseError, ProtocolError } from '../errors/stream-errors.js';
import type { LiveBatch } from './kv-batch.js';
import { decodeBatchPayload } from './live-frame-decoder.js';
import type { BatchPayloadOptions } from './live-frame-decoder.js';
import { checkPayloadSize, readU64Frame } from './wire-fields.js';

export interface HistoryDecoderOptions extends BatchPayloadOptions {
  readonly topic: Uint8Array;
  readonly maxMessageBytes: number;
}

export type HistoryMessage = { readonly kind: 'terminator' } | { readonly kind: 'batch'; readonly batch: LiveBatch };

const TERMINATOR: HistoryMessage = Object.freeze({ kind: 'terminator' });
const END_SEQ = 0xffffffffffffffffn;

export function decodeHistoryMessage(frames: readonly Uint8Array[], opts: HistoryDecoderOptions): HistoryMessage {
  const n = frames.length;
  if (n !== 3 && n !== 4) throw new ParseError(`history message has ${n} frames, expected 3 or 4 (delimiter, [topic,] seq, payload)`);
  if (frames[0].byteLength !== 0) throw new ParseError(`history message frame 0 is ${frames[0].byteLength} bytes, expected the empty delimiter`);
  const topic = n === 4 ? frames[1] : null;
  const seq = readU64Frame(frames[n - 2], 'history seq');
  const payload = frames[n - 1];
  if (seq === END_SEQ) {
    if (payload.byteLength !== 0) throw new ParseError(`history terminator payload is ${payload.byteLength} bytes, expected empty`);
    return TERMINATOR;
  }
  if (topic !== null && !sameBytes(topic, opts.topic)) {
    throw new ProtocolError(`history message topic ${JSON.stringify(new TextDecoder().decode(topic.subarray(0, 64)))} differs from the stream's`);
  }
  checkPayloadSize(payload, opts.maxMessageBytes);
  const frameBytes = (topic === null ? 0 : topic.byteLength) + 8 + payload.byteLength;
  return { kind: 'batch', batch: decodeBatchPayload(payload, seq, frameBytes, opts) };
}

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  if (a.byteLength !== b.byteLength) return false;
  for (let i = 0; i < a.byteLength; i++) if (a[i] !== b[i]) return false;
  return true;
}
