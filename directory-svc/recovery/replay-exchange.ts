/**
 * The socket discipline every replay exchange shares (kv-events §6, engines.md §3): a FRESH DEALER
 * per request, request `["", start_seq u64be]`, the whole exchange within `timeoutMs` (else
 * `timeout`), the DEALER closed at once on any end or cancel, so a late reply to an abandoned
 * request is never read (R7). Subclasses read the reply one message at a time: the xLLM snapshot
 * (snapshot-exchange.ts) and the vLLM/SGLang history (history-exchange.ts).
 */
import { Dealer } from 'zeromq';
import { ParseError, TimeoutError, isStreamError } from '../errors/stream-errors.js';
import type { StreamError } from '../errors/stream-errors.js';

export interface ReplayRequest {
  readonly replayEndpoint: string;
  readonly startSeq: bigint;
  readonly timeoutMs: number;
}

/** The failed outcome every exchange reports the same way. */
export interface FailedOutcome {
  readonly kind: 'failed';
  readonly error: StreamError;
}

const EMPTY_FRAME = new Uint8Array(0);

export abstract class ReplayExchange<O extends { readonly kind: string }> {
  private readonly dealer: Dealer;
  private readonly timer: NodeJS.Timeout;
  private finished = false;

  protected constructor(
    private readonly req: ReplayRequest,
    /** `snapshot` or `history`, for error details. */
    private readonly what: string,
    private readonly onEnd: (outcome: O | FailedOutcome) => void,
  ) {
    // linger 0: closing must drop any queued request or unread reply at once.
    // ipv6 (ZMQ_IPV6): replay endpoints of engines found through AAAA records (engines.md §6).
    this.dealer = new Dealer({ linger: 0, ipv6: true });
    this.timer = setTimeout(() => {
      this.end({ kind: 'failed', error: new TimeoutError(`${what} from ${req.replayEndpoint} not complete within ${req.timeoutMs} ms`) });
    }, req.timeoutMs);
  }

  /**
   * One reply message: an outcome ends the exchange, null reads the next message. Throws
   * StreamErrors (anything else is a bug, reported as `parse`).
   */
  protected abstract onMessage(frames: Buffer[]): O | null;

  /** Abandons the exchange: the DEALER is closed and no outcome is reported. */
  cancel(): void {
    if (this.finished) return;
    this.finished = true;
    this.teardown();
  }

  get active(): boolean {
    return !this.finished;
  }

  /** Call once from the subclass's `start`; `onEnd` then runs exactly once unless cancelled. */
  protected async run(): Promise<void> {
    // Yield once so `start` has returned (and the caller holds the exchange) before any outcome
    // can be reported, even when connect throws synchronously.
    await Promise.resolve();
    if (this.finished) return;
    const seqFrame = new Uint8Array(8);
    new DataView(seqFrame.buffer).setBigUint64(0, this.req.startSeq, false);
    try {
      this.dealer.connect(this.req.replayEndpoint);
      await this.dealer.send([EMPTY_FRAME, seqFrame]);
    } catch (e: unknown) {
      this.end({ kind: 'failed', error: this.zmqFailure(e) });
      return;
    }
    for (;;) {
      let frames: Buffer[];
      try {
        frames = await this.dealer.receive();
      } catch (e: unknown) {
        // Closed by timeout or cancel: expected. Anything else fails the exchange.
        if (!this.finished) this.end({ kind: 'failed', error: this.zmqFailure(e) });
        return;
      }
      // A reply that arrives after the deadline or a cancel is never read (§6, R7).
      if (this.finished) return;
      let outcome: O | null;
      try {
        outcome = this.onMessage(frames);
      } catch (e: unknown) {
        this.end({ kind: 'failed', error: this.asStreamError(e) });
        return;
      }
      if (outcome !== null) {
        this.end(outcome);
        return;
      }
    }
  }

  private end(outcome: O | FailedOutcome): void {
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

  /** Decoder and index throw StreamErrors; anything else is a bug surfaced as `parse` (never a crash). */
  private asStreamError(e: unknown): StreamError {
    if (isStreamError(e)) return e;
    return new ParseError(`unexpected ${this.what} failure: ${e instanceof Error ? e.message : String(e)}`);
  }

  /** A zeromq failure means the exchange cannot complete: reported as `timeout` (§10 has no socket class). */
  private zmqFailure(e: unknown): StreamError {
    const detail = e instanceof Error ? e.message : String(e);
    return new TimeoutError(`${this.what} exchange with ${this.req.replayEndpoint} failed: ${detail}`);
  }
}
