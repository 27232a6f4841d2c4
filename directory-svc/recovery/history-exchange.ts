/**
 * One history replay exchange with a vLLM/SGLang engine (engines.md §3) on a FRESH DEALER, with
 * the socket discipline of the xLLM snapshot exchange (kv-events §6): request
 * `["", start_seq u64be]`, read the reply message by message (either layout) until the
 * terminator, all within `replay_timeout_ms` (else `timeout`); closing the DEALER on any end, so a
 * late reply to an abandoned request is never read.
 *
 * Each history batch goes to the sink as it arrives (no whole-reply buffer). Seqs must strictly
 * increase (`protocol`) and be contiguous from `start_seq`: the first one above `start_seq`, or a
 * later jump, ends the exchange at once as `lost` with the DEALER closed, so a busy engine's whole
 * buffer (10,000 batches) is never read just to be discarded (E14).
 */
import { Dealer } from 'zeromq';
import type { LiveBatch } from '../decoder/kv-batch.js';
import { decodeHistoryMessage } from '../decoder/history-decoder.js';
import type { HistoryDecoderOptions } from '../decoder/history-decoder.js';
import { ParseError, ProtocolError, TimeoutError, isStreamError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';

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

const EMPTY_FRAME = new Uint8Array(0);

export class HistoryExchange {
  private readonly dealer: Dealer;
  private readonly timer: NodeJS.Timeout;
  private finished = false;

  private constructor(
    private readonly request: HistoryRequest,
    private readonly sink: HistorySink,
    private readonly onEnd: (outcome: HistoryOutcome) => void,
  ) {
    // linger 0: closing drops any queued request or unread reply at once.
    this.dealer = new Dealer({ linger: 0 });
    this.timer = setTimeout(() => {
      this.end({
        kind: 'failed',
        error: new TimeoutError(`history from ${request.replayEndpoint} not complete within ${request.timeoutMs} ms`),
      });
    }, request.timeoutMs);
  }

  /** Starts the exchange; `onEnd` is called exactly once unless `cancel()` came first. */
  static start(request: HistoryRequest, sink: HistorySink, onEnd: (outcome: HistoryOutcome) => void): HistoryExchange {
    const ex = new HistoryExchange(request, sink, onEnd);
    void ex.run();
    return ex;
  }

  /** Abandons the exchange: the DEALER is closed and no outcome is reported. */
  cancel(): void {
    if (this.finished) return;
    this.finished = true;
    this.teardown();
  }

  private async run(): Promise<void> {
    // Yield once so `start` has returned before any outcome can be reported.
    await Promise.resolve();
    if (this.finished) return;
    const seqFrame = new Uint8Array(8);
    new DataView(seqFrame.buffer).setBigUint64(0, this.request.startSeq, false);
    try {
      this.dealer.connect(this.request.replayEndpoint);
      await this.dealer.send([EMPTY_FRAME, seqFrame]);
    } catch (e: unknown) {
      this.end({ kind: 'failed', error: zmqFailure(this.request.replayEndpoint, e) });
      return;
    }
    let expected = this.request.startSeq;
    let batches = 0;
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.dealer.receive();
      } catch (e: unknown) {
        if (!this.finished) this.end({ kind: 'failed', error: zmqFailure(this.request.replayEndpoint, e) });
        return;
      }
      if (this.finished) return;
      try {
        const msg = decodeHistoryMessage(frames, this.request.decode);
        if (msg.kind === 'terminator') {
          this.end({ kind: 'complete', lastSeq: expected - 1n, batches });
          return;
        }
        const seq = msg.batch.seq;
        if (seq < expected) {
          throw new ProtocolError(
            batches === 0 ? `history seq ${seq} below start_seq ${expected}` : `history seqs do not strictly increase: ${seq} after ${expected - 1n}`,
          );
        }
        if (seq > expected) {
          this.end({ kind: 'lost', expected, got: seq });
          return;
        }
        this.sink.accept(msg.batch);
        expected = seq + 1n;
        batches++;
      } catch (e: unknown) {
        this.end({ kind: 'failed', error: asStreamError(e) });
        return;
      }
    }
  }

  private end(outcome: HistoryOutcome): void {
    if (this.finished) return;
    this.finished = true;
    this.teardown();
    this.onEnd(outcome);
  }

  private teardown(): void {
    clearTimeout(this.timer);
    try {
      this.dealer.close();
    } catch {
      // Already closed.
    }
  }
}

function asStreamError(e: unknown): StreamError {
  if (isStreamError(e)) return e;
  return new ParseError(`unexpected history failure: ${e instanceof Error ? e.message : String(e)}`);
}

/** A zeromq failure means the exchange cannot complete: `timeout`, as for snapshots. */
function zmqFailure(endpoint: string, e: unknown): StreamError {
  return new TimeoutError(`history exchange with ${endpoint} failed: ${e instanceof Error ? e.message : String(e)}`);
}
