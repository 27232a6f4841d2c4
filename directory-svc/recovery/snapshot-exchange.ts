/**
 * One snapshot request/reply exchange (kv-events §6) on a FRESH DEALER: request
 * `["", start_seq u64be]`, then chunks `["", W, chunk]` until the terminator `["", ff×8, ""]`.
 * The whole exchange must finish within `replay_timeout_ms`, else `timeout`. On timeout or
 * cancel the DEALER is closed at once, so a late reply to an abandoned request is never read
 * (R7). zeromq errors are converted here; the caller only ever sees a SnapshotOutcome.
 */
import { Dealer } from 'zeromq';
import { decodeSnapshotMessage } from '../decoder/snapshot-decoder.js';
import { ParseError, TimeoutError, isStreamError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';
import type { SnapshotMessage } from '../decoder/snapshot-decoder.js';

export interface SnapshotRequest {
  readonly replayEndpoint: string;
  /** §6: last + 1, 0 when last = −1. The publisher must not use it to select content. */
  readonly startSeq: bigint;
  readonly dpRank: number;
  readonly blockSize: number;
  readonly maxMessageBytes: number;
  readonly timeoutMs: number;
}

/** Where decoded reply messages go (SnapshotBuilder): W at the terminator, else null; throws StreamErrors. */
export interface SnapshotSink {
  accept(msg: SnapshotMessage): bigint | null;
}

export type SnapshotOutcome =
  | { readonly kind: 'complete'; readonly watermark: bigint }
  | { readonly kind: 'failed'; readonly error: StreamError };

const EMPTY_FRAME = new Uint8Array(0);

export class SnapshotExchange {
  private readonly dealer: Dealer;
  private readonly timer: NodeJS.Timeout;
  private finished = false;

  private constructor(
    private readonly request: SnapshotRequest,
    private readonly sink: SnapshotSink,
    private readonly onEnd: (outcome: SnapshotOutcome) => void,
  ) {
    // linger 0: closing must drop any queued request or unread reply at once.
    this.dealer = new Dealer({ linger: 0 });
    this.timer = setTimeout(() => {
      this.end({
        kind: 'failed',
        error: new TimeoutError(`snapshot from ${request.replayEndpoint} not complete within ${request.timeoutMs} ms`),
      });
    }, request.timeoutMs);
  }

  /**
   * Starts the exchange. `onEnd` is called exactly once, synchronously from the reply handler
   * or the timer, unless `cancel()` came first; after cancel it is never called.
   */
  static start(request: SnapshotRequest, sink: SnapshotSink, onEnd: (outcome: SnapshotOutcome) => void): SnapshotExchange {
    const ex = new SnapshotExchange(request, sink, onEnd);
    void ex.run();
    return ex;
  }

  /** Abandons the exchange: the DEALER is closed and no outcome is reported. */
  cancel(): void {
    if (this.finished) return;
    this.finished = true;
    this.teardown();
  }

  get active(): boolean {
    return !this.finished;
  }

  private async run(): Promise<void> {
    // Yield once so `start` has returned (and the caller holds the exchange) before any outcome
    // can be reported, even when connect throws synchronously.
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
    const decodeOpts = {
      dpRank: this.request.dpRank,
      blockSize: this.request.blockSize,
      maxMessageBytes: this.request.maxMessageBytes,
    };
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.dealer.receive();
      } catch (e: unknown) {
        // Closed by timeout or cancel: expected. Anything else fails the exchange.
        if (!this.finished) this.end({ kind: 'failed', error: zmqFailure(this.request.replayEndpoint, e) });
        return;
      }
      // A reply that arrives after the deadline or a cancel is never read (§6, R7).
      if (this.finished) return;
      try {
        const watermark = this.sink.accept(decodeSnapshotMessage(frames, decodeOpts));
        if (watermark !== null) {
          this.end({ kind: 'complete', watermark });
          return;
        }
      } catch (e: unknown) {
        this.end({ kind: 'failed', error: asStreamError(e) });
        return;
      }
    }
  }

  private end(outcome: SnapshotOutcome): void {
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
      // Already closed: nothing left to release.
    }
  }
}

/** Decoder and index throw StreamErrors; anything else is a bug surfaced as `parse` (never a crash). */
function asStreamError(e: unknown): StreamError {
  if (isStreamError(e)) return e;
  return new ParseError(`unexpected snapshot failure: ${e instanceof Error ? e.message : String(e)}`);
}

/** A zeromq failure means the exchange cannot complete: reported as `timeout` (§10 has no socket class). */
function zmqFailure(endpoint: string, e: unknown): StreamError {
  const detail = e instanceof Error ? e.message : String(e);
  return new TimeoutError(`snapshot exchange with ${endpoint} failed: ${detail}`);
}
