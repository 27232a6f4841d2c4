/**
 * Sends this router's decisions to the directory (routing.md "In-flight load"): the decisions made
 * since the previous send, per instance, go out as one `ReportInflight` message on a client stream
 * to the directory the view is watched from — right after the code that made the first of them
 * (a microtask), or `intervalMs` after the previous send under load (FlushTimer.throttled). The
 * other replicas must hear of a decision before the next requests of the same burst reach them:
 * a fixed 10 ms batch was half of the ~20 ms in which 4 replicas sent bursts to one instance.
 * Off the request path: decisions only land in InflightLoad's outbox, the timer does the I/O.
 *
 * Losing the directory loses nothing the router needs: its own decisions stay counted locally
 * (InflightLoad), batches that cannot be sent are dropped (other routers would see them expire
 * within 2 s anyway), and the stream is reopened at most every `retryMs`, following the view
 * client to whichever directory it fails over to.
 */
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { InflightReportCall } from '../viewcache/view-client.js';
import type { InflightLoad } from './inflight-load.js';
import { FlushTimer } from '../../shared/timing/flush-timer.js';

/** What the reporter needs of the view client. */
export interface InflightReportChannel {
  /** Address of the open view watch; null between attempts. */
  readonly currentAddress: string | null;
  openInflightReport(onEnd: (reason: string) => void): InflightReportCall | null;
}

export interface InflightReporterOptions {
  /** Least time between two sends (default 1 ms, as the directory's in-flight deltas). */
  readonly intervalMs?: number;
  /** Least time between two attempts to open the stream (default 500 ms). */
  readonly retryMs?: number;
  readonly logger?: Logger;
  readonly monotonicMs?: () => number;
}

export class InflightReporter {
  private readonly timer: FlushTimer;
  private readonly intervalMs: number;
  private readonly retryMs: number;
  private readonly log: Logger;
  private readonly clock: () => number;
  private call: InflightReportCall | null = null;
  private blocked = false;
  private lastOpenMs = Number.NEGATIVE_INFINITY;
  private closed = false;
  /** Batches sent and dropped (tests, diagnostics). */
  sent = 0;
  dropped = 0;

  constructor(
    private readonly load: InflightLoad,
    private readonly channel: InflightReportChannel,
    opts: InflightReporterOptions = {},
  ) {
    this.intervalMs = opts.intervalMs ?? 1;
    this.retryMs = opts.retryMs ?? 500;
    this.log = opts.logger ?? silentLogger;
    this.clock = opts.monotonicMs ?? (() => load.now());
    // A microtask: right after the decision's own code, not behind the rest of a busy turn.
    this.timer = new FlushTimer(() => this.flush(), this.clock, 'microtask');
    load.onOutbox = () => this.timer.throttled(this.intervalMs);
  }

  /** Sends what is pending now (the timer calls it; tests may too). */
  flush(): void {
    this.timer.ranNow();
    if (this.closed) return;
    const decisions = this.load.drainReport(this.clock());
    if (decisions === null) return;
    const call = this.ensureCall();
    if (call === null || this.blocked) {
      this.dropped++;
      return;
    }
    this.sent++;
    if (!call.stream.write({ router_id: this.load.routerId, decisions })) {
      this.blocked = true;
      call.stream.once('drain', () => {
        if (this.call === call) this.blocked = false;
      });
    }
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.timer.cancel();
    this.load.onOutbox = null;
    this.endCall();
  }

  private ensureCall(): InflightReportCall | null {
    const address = this.channel.currentAddress;
    if (this.call !== null && this.call.address !== address) this.endCall();
    if (this.call !== null || address === null) return this.call;
    const now = this.clock();
    if (now - this.lastOpenMs < this.retryMs) return null;
    this.lastOpenMs = now;
    let call: InflightReportCall | null = null;
    call = this.channel.openInflightReport((reason) => {
      if (this.call !== call) return;
      this.call = null;
      this.blocked = false;
      if (!this.closed) this.log.warn({ address, err: reason }, 'in-flight report stream ended; own decisions stay counted locally');
    });
    if (call !== null) {
      // The stream's own 'error' is also delivered to the callback above; keep it from being unhandled.
      call.stream.on('error', () => undefined);
      this.log.debug({ address: call.address }, 'in-flight report stream open');
    }
    this.call = call;
    this.blocked = false;
    return call;
  }

  private endCall(): void {
    const call = this.call;
    this.call = null;
    this.blocked = false;
    if (call !== null) call.stream.end();
  }
}
