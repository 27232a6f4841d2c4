/**
 * One history replay exchange with a vLLM/SGLang engine (engines.md §3), with the socket
 * discipline of the xLLM snapshot exchange (replay-exchange.ts: fresh DEALER, request
 * `["", start_seq u64be]`, the whole exchange within `replay_timeout_ms`, DEALER closed on any
 * end). The reply is read message by message, in either layout, until the terminator.
 *
 * Each history batch goes to the sink as it arrives (no whole-reply buffer). Seqs must strictly
 * increase (`protocol`) and be contiguous from `start_seq`: the first one above `start_seq`, or a
 * later jump, ends the exchange at once as `lost` with the DEALER closed, so a busy engine's whole
 * buffer (10,000 batches) is never read just to be discarded (E14).
 */
import type { LiveBatch } from '../decoder/kv-batch.js';
import { decodeHistoryMessage } from '../decoder/history-decoder.js';
import type { HistoryDecoderOptions } from '../decoder/history-decoder.js';
import { ProtocolError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';
import { ReplayExchange } from './replay-exchange.js';

export interface HistoryRequest {
  readonly replayEndpoint: string;
  /** engines.md §3: 0 on first connect, `last + 1` for a gap or a reconciliation. */
  readonly startSeq: bigint;
  readonly decode: HistoryDecoderOptions;
  readonly timeoutMs: number;
}

/** Receives each history batch in seq order; throws a StreamError to fail the exchange. */
export interface HistorySink {
  accept(batch: LiveBatch): void;
}

export type HistoryOutcome =
  /** Terminator reached; `lastSeq` = seq of the last history batch, or startSeq − 1 when none. */
  | { readonly kind: 'complete'; readonly lastSeq: bigint; readonly batches: number }
  /** The reply skipped `expected` (first seq above start_seq, or a hole): history is gone. */
  | { readonly kind: 'lost'; readonly expected: bigint; readonly got: bigint }
  | { readonly kind: 'failed'; readonly error: StreamError };

export class HistoryExchange extends ReplayExchange<HistoryOutcome> {
  private expected: bigint;
  private batches = 0;

  private constructor(
    private readonly request: HistoryRequest,
    private readonly sink: HistorySink,
    onEnd: (outcome: HistoryOutcome) => void,
  ) {
    super(request, 'history', onEnd);
    this.expected = request.startSeq;
  }

  /** Starts the exchange; `onEnd` is called exactly once unless `cancel()` came first. */
  static start(request: HistoryRequest, sink: HistorySink, onEnd: (outcome: HistoryOutcome) => void): HistoryExchange {
    const ex = new HistoryExchange(request, sink, onEnd);
    void ex.run();
    return ex;
  }

  protected onMessage(frames: Buffer[]): HistoryOutcome | null {
    const msg = decodeHistoryMessage(frames, this.request.decode);
    const expected = this.expected;
    if (msg.kind === 'terminator') return { kind: 'complete', lastSeq: expected - 1n, batches: this.batches };
    const seq = msg.batch.seq;
    if (seq < expected) {
      throw new ProtocolError(
        this.batches === 0 ? `history seq ${seq} below start_seq ${expected}` : `history seqs do not strictly increase: ${seq} after ${expected - 1n}`,
      );
    }
    if (seq > expected) return { kind: 'lost', expected, got: seq };
    this.sink.accept(msg.batch);
    this.expected = seq + 1n;
    this.batches++;
    return null;
  }
}
