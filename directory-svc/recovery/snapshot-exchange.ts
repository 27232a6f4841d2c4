/**
 * One snapshot request/reply exchange (kv-events §6) on a FRESH DEALER: request
 * `["", start_seq u64be]`, then chunks `["", W, chunk]` until the terminator `["", ff×8, ""]`.
 * The whole exchange must finish within `replay_timeout_ms`, else `timeout`. On timeout or
 * cancel the DEALER is closed at once, so a late reply to an abandoned request is never read
 * (R7); that discipline is replay-exchange.ts. The caller only ever sees a SnapshotOutcome.
 */
import { decodeSnapshotMessage } from '../decoder/snapshot-decoder.js';
import type { SnapshotMessage } from '../decoder/snapshot-decoder.js';
import type { StreamError } from '../errors/stream-errors.js';
import { ReplayExchange } from './replay-exchange.js';

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

export class SnapshotExchange extends ReplayExchange<SnapshotOutcome> {
  private readonly decodeOpts: { dpRank: number; blockSize: number; maxMessageBytes: number };

  private constructor(
    request: SnapshotRequest,
    private readonly sink: SnapshotSink,
    onEnd: (outcome: SnapshotOutcome) => void,
  ) {
    super(request, 'snapshot', onEnd);
    this.decodeOpts = { dpRank: request.dpRank, blockSize: request.blockSize, maxMessageBytes: request.maxMessageBytes };
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

  protected onMessage(frames: Buffer[]): SnapshotOutcome | null {
    const watermark = this.sink.accept(decodeSnapshotMessage(frames, this.decodeOpts));
    return watermark === null ? null : { kind: 'complete', watermark };
  }
}
