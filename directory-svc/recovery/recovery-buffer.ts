/**
 * The recovery buffer of kv-events §7.2 (and the reconciliation copy of §7.5): decoded live
 * batches in arrival order, under the `max_buffered_bytes` budget. Pure.
 */
import type { LiveBatch } from '../decoder/kv-batch.js';
import { LimitError } from '../errors/stream-errors.js';
import { gapError, seqResetError } from './sequence-rules.js';

export class RecoveryBuffer {
  private items: LiveBatch[] = [];
  private costBytes = 0;

  constructor(readonly maxBufferedBytes: number) {}

  get length(): number {
    return this.items.length;
  }
  /** §7.2 step 1 cost: frame bytes + 64 per event + 8 per block hash + 4 per token id. */
  get bytes(): number {
    return this.costBytes;
  }
  get batches(): readonly LiveBatch[] {
    return this.items;
  }

  /**
   * §7.2 step 1. Throws SeqResetError when seqs do not strictly increase, LimitError when the
   * budget would be exceeded; the caller then aborts recovery and discards the buffer.
   */
  push(batch: LiveBatch): void {
    const n = this.items.length;
    if (n > 0) {
      const prev = this.items[n - 1].seq;
      if (batch.seq <= prev) throw seqResetError(batch.seq, prev);
    }
    if (this.costBytes + batch.bufferCost > this.maxBufferedBytes) {
      throw new LimitError(`max_buffered_bytes ${this.maxBufferedBytes} exceeded`);
    }
    this.items.push(batch);
    this.costBytes += batch.bufferCost;
  }

  /**
   * §7.2 step 3: drop batches with seq < W; the rest must be exactly W, W+1, … (else
   * `gap: expected <W+k>, got <seq>`). Returns them in order; the buffer itself is unchanged.
   */
  suffixFrom(watermark: bigint): LiveBatch[] {
    const out: LiveBatch[] = [];
    let expected = watermark;
    for (const b of this.items) {
      if (b.seq < watermark) continue;
      if (b.seq !== expected) throw gapError(expected, b.seq);
      out.push(b);
      expected++;
    }
    return out;
  }

  clear(): void {
    this.items = [];
    this.costBytes = 0;
  }
}
