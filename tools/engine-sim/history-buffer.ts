/**
 * The replay side of a vLLM/SGLang publisher (engines.md §3, §5): a ring of the last N live
 * batches `(seq, payload)`, as vLLM's `ZmqEventPublisher` keeps them (`deque(maxlen=buffer_steps)`),
 * and the reply it sends for a request `["", start_seq]`: every buffered batch with
 * `seq ≥ start_seq` in order, then the terminator. Pure; the rank publisher owns the socket.
 *
 *   layout 2 (SGLang, older vLLM)  ["", seq u64be, payload] …  ["", ff×8, ""]
 *   layout 3 (newer vLLM)          ["", topic, seq u64be, payload] …  ["", "", ff×8, ""]
 */
import { EMPTY_FRAME, TERMINATOR_WATERMARK, u64be } from './wire-encoding.js';

/** `--replay_layout`: frames after the delimiter of a history message, or no replay endpoint. */
export type ReplayLayout = 2 | 3 | 'none';

/** vLLM's `buffer_steps` default. */
export const DEFAULT_REPLAY_BUFFER_STEPS = 10_000;

interface HistoryEntry {
  readonly seq: bigint;
  readonly payload: Uint8Array;
}

export class HistoryBuffer {
  private readonly ring: (HistoryEntry | undefined)[];
  /** Index of the oldest entry. */
  private head = 0;
  private count = 0;

  constructor(readonly capacity: number) {
    if (!Number.isSafeInteger(capacity) || capacity < 1) throw new RangeError(`history capacity must be a positive integer, got ${capacity}`);
    this.ring = new Array<HistoryEntry | undefined>(capacity);
  }

  get length(): number {
    return this.count;
  }

  /** Seq of the oldest buffered batch, null when empty (tests use it to know what rotated out). */
  get oldestSeq(): bigint | null {
    return this.count === 0 ? null : (this.ring[this.head] as HistoryEntry).seq;
  }

  /** Appends one batch, dropping the oldest when full. */
  push(seq: bigint, payload: Uint8Array): void {
    const entry = { seq, payload };
    if (this.count < this.capacity) {
      this.ring[(this.head + this.count) % this.capacity] = entry;
      this.count++;
      return;
    }
    this.ring[this.head] = entry;
    this.head = (this.head + 1) % this.capacity;
  }

  clear(): void {
    this.ring.fill(undefined);
    this.head = 0;
    this.count = 0;
  }

  /** The reply messages (frames after the ROUTER identity) for `startSeq`, terminator last. */
  reply(startSeq: bigint, layout: 2 | 3, topic: Uint8Array): Uint8Array[][] {
    const out: Uint8Array[][] = [];
    for (let i = 0; i < this.count; i++) {
      const e = this.ring[(this.head + i) % this.capacity] as HistoryEntry;
      if (e.seq < startSeq) continue;
      out.push(layout === 2 ? [EMPTY_FRAME, u64be(e.seq), e.payload] : [EMPTY_FRAME, topic, u64be(e.seq), e.payload]);
    }
    out.push(historyTerminator(layout));
    return out;
  }
}

/** The end-of-reply message of each layout (vLLM's `END_SEQ` = ff×8). */
export function historyTerminator(layout: 2 | 3): Uint8Array[] {
  return layout === 2 ? [EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME] : [EMPTY_FRAME, EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME];
}
