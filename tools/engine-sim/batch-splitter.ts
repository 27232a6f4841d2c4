/**
 * §11.3: split a step's events into batches whose payloads stay within `max_message_bytes`.
 * Events are kept in order and grouped greedily; an event too large for any batch is cut in
 * two at a block boundary (a token-bearing `BlockStored` continues with the last hash of the
 * first part as parent, §4), recursively, so every batch still obeys §11.5.
 */
import { SimLimitError } from './sim-errors.js';
import type { WireEncoder } from './wire-encoding.js';
import type { WireEvent } from './wire-types.js';

export interface PlannedBatch {
  readonly events: WireEvent[];
  /** The events' MessagePack bytes, index for index. */
  readonly encoded: Uint8Array[];
}

export function planBatches(encoder: WireEncoder, events: readonly WireEvent[], dpRank: number | null, maxMessageBytes: number): PlannedBatch[] {
  const budget = maxMessageBytes - encoder.batchOverheadBytes(dpRank);
  const batches: PlannedBatch[] = [];
  let current: PlannedBatch = { events: [], encoded: [] };
  let bytes = 0;
  const queue: WireEvent[] = events.slice().reverse();
  while (queue.length > 0) {
    const e = queue.pop() as WireEvent;
    const enc = encoder.encodeEvent(e);
    if (enc.length > budget) {
      const halves = splitEvent(e);
      if (halves === null) throw new SimLimitError(`one event needs ${enc.length} bytes, over max_message_bytes ${maxMessageBytes}`);
      queue.push(halves[1], halves[0]);
      continue;
    }
    if (bytes + enc.length > budget && current.events.length > 0) {
      batches.push(current);
      current = { events: [], encoded: [] };
      bytes = 0;
    }
    current.events.push(e);
    current.encoded.push(enc);
    bytes += enc.length;
  }
  if (current.events.length > 0) batches.push(current);
  return batches;
}

/** Cut a multi-block map event in two at its middle block; null when it cannot be cut. */
function splitEvent(e: WireEvent): [WireEvent, WireEvent] | null {
  if (Array.isArray(e)) return null;
  const m = e as Record<string, unknown>;
  if ((m.type !== 'BlockStored' && m.type !== 'BlockRemoved') || !Array.isArray(m.block_hashes)) return null;
  const hashes = m.block_hashes as readonly unknown[];
  if (hashes.length < 2) return null;
  const k = hashes.length >> 1;
  const tokens = m.type === 'BlockStored' && Array.isArray(m.token_ids) ? (m.token_ids as readonly number[]) : [];
  const first: Record<string, unknown> = { block_hashes: hashes.slice(0, k) };
  const second: Record<string, unknown> = { block_hashes: hashes.slice(k) };
  if (tokens.length > 0) {
    const per = tokens.length / hashes.length;
    first.token_ids = tokens.slice(0, k * per);
    second.token_ids = tokens.slice(k * per);
    second.parent_block_hash = hashes[k - 1];
  }
  // vLLM 0.19+: extra_keys holds one entry per block hash, so it is cut with them.
  if (Array.isArray(m.extra_keys) && m.extra_keys.length === hashes.length) {
    first.extra_keys = m.extra_keys.slice(0, k);
    second.extra_keys = m.extra_keys.slice(k);
  }
  return [withFields(m, first), withFields(m, second)];
}

function withFields(event: Record<string, unknown>, fields: Record<string, unknown>): WireEvent {
  return { ...event, ...fields } as unknown as WireEvent;
}
