/**
 * One router watching the view (architecture.md "The view stream"), with its own flow control:
 * it is sent log entries in version order; when its transport buffer is full (`write` returns
 * false) nothing more is written until the sink drains; when the entries it still needs have left
 * the bounded change log, its stream is ended with `lagging` so it re-watches and gets a snapshot.
 * A delta is never skipped and nothing per watcher grows without bound: the log is shared and
 * bounded, and a blocked watcher holds at most what its transport had accepted.
 */
import type { ChangeLog } from './change-log.js';

/** Why a watch ended from the directory side. */
export type ViewEndReason = 'lagging' | 'closing';

/** The transport of one watch (the gRPC edge adapts a server stream to it). */
export interface ViewSink {
  /** Queues one encoded `ViewUpdate`; false when the buffer is full (wait for `onDrain`). */
  write(bytes: Buffer): boolean;
  /** Calls `cb` once, when the buffer has room again. */
  onDrain(cb: () => void): void;
  /** Ends the stream with a status the router understands as "re-watch". */
  end(reason: ViewEndReason, detail: string): void;
}

export class ViewWatcher {
  /** Version of the next delta this watcher needs. */
  nextVersion: number;
  /** Waiting for the sink's drain. */
  blocked = false;
  closed = false;
  /** Last time anything was written (heartbeat scheduling). */
  lastWriteMs: number;
  bytesSent = 0;
  updatesSent = 0;

  constructor(
    readonly routerId: string,
    private readonly sink: ViewSink,
    nextVersion: number,
    nowMs: number,
    /** Called with each write's size (publisher-wide byte counter). */
    private readonly onSent: (bytes: number) => void,
  ) {
    this.nextVersion = nextVersion;
    this.lastWriteMs = nowMs;
  }

  /** Writes one update (snapshot or heartbeat or a log entry). */
  send(bytes: Buffer, nowMs: number): void {
    if (this.closed) return;
    this.bytesSent += bytes.length;
    this.updatesSent++;
    this.lastWriteMs = nowMs;
    this.onSent(bytes.length);
    if (!this.sink.write(bytes)) {
      this.blocked = true;
      this.sink.onDrain(() => {
        this.blocked = false;
        this.onDrained?.();
      });
    }
  }

  /** Set by the publisher: resumes pumping after a drain. */
  onDrained: (() => void) | null = null;

  /** Snapshot messages still to send, before any log entry (encoded as they are sent). */
  private snapshotParts: readonly (() => Buffer)[] = [];
  private nextPart = 0;

  /** Sends `parts` first, each once the transport has room; log entries wait behind them. */
  queueSnapshot(parts: readonly (() => Buffer)[]): void {
    this.snapshotParts = parts;
    this.nextPart = 0;
  }

  /**
   * Sends every log entry this watcher still needs, until its sink is full. Returns false when
   * it fell out of the log (the caller ends it as lagging).
   */
  pump(log: ChangeLog, nowMs: number): boolean {
    while (!this.blocked && !this.closed && this.nextPart < this.snapshotParts.length) this.send(this.snapshotParts[this.nextPart++]!(), nowMs);
    if (this.nextPart < this.snapshotParts.length) return true;
    this.snapshotParts = [];
    this.nextPart = 0;
    while (!this.blocked && !this.closed && this.nextVersion <= log.newestVersion) {
      const entry = log.get(this.nextVersion);
      if (entry === null) return false;
      this.nextVersion++;
      this.send(entry.bytes, nowMs);
    }
    return true;
  }

  /** True when it has been sent every published delta. */
  caughtUp(log: ChangeLog): boolean {
    return this.nextPart >= this.snapshotParts.length && this.nextVersion > log.newestVersion;
  }

  end(reason: ViewEndReason, detail: string): void {
    if (this.closed) return;
    this.closed = true;
    this.onDrained = null;
    this.sink.end(reason, detail);
  }
}
