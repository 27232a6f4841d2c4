/**
 * One router watching the view (architecture.md "The view stream"), with its own flow control:
 * it is sent log entries in version order; when its transport buffer is full (`write` returns
 * false) nothing more is written until the sink drains; when the entries it still needs have left
 * the bounded change log, its stream is ended with `lagging` so it re-watches and gets a snapshot.
 * A delta is never skipped and nothing per watcher grows without bound: the log is shared and
 * bounded, and a blocked watcher holds at most what its transport had accepted.
 */
import type { ChangeLog } from './change-log.js';

/** A watcher as a snapshot build sees it: told when a part it waits for is ready. */
export interface SnapshotReader {
  partReady(): void;
}

/** The snapshot a watcher is sent before any log entry (snapshot-build.ts). */
export interface SnapshotFeed {
  /** The reader's next part, or null while it is being built (partReady follows). */
  take(reader: SnapshotReader): Buffer | null;
  /** True once the reader was sent every part. */
  doneFor(reader: SnapshotReader): boolean;
  /** The reader no longer wants it (done, ended, gone). */
  leave(reader: SnapshotReader): void;
}

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

export class ViewWatcher implements SnapshotReader {
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

  /** The snapshot still to send, before any log entry; null when none. */
  private snapshot: SnapshotFeed | null = null;

  /** Sends the snapshot's parts first, each once built and the transport has room; log entries wait behind them. */
  queueSnapshot(feed: SnapshotFeed): void {
    this.snapshot = feed;
  }

  /** A part this watcher waits for was built: pump, unless the transport is full (its drain pumps). */
  partReady(): void {
    if (!this.blocked && !this.closed) this.onDrained?.();
  }

  /**
   * Sends the snapshot's ready parts, then every log entry this watcher still needs, until its
   * sink is full. Returns false when it fell out of the log (the caller ends it as lagging).
   */
  pump(log: ChangeLog, nowMs: number): boolean {
    while (this.snapshot !== null && !this.blocked && !this.closed) {
      if (this.snapshot.doneFor(this)) {
        this.dropSnapshot();
        break;
      }
      const part = this.snapshot.take(this);
      if (part === null) return true;
      this.send(part, nowMs);
    }
    if (this.snapshot !== null) return true;
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
    return this.snapshot === null && this.nextVersion > log.newestVersion;
  }

  /** The watch is over on either side: nothing more is sent, the snapshot is let go. */
  close(): void {
    this.closed = true;
    this.onDrained = null;
    this.dropSnapshot();
  }

  end(reason: ViewEndReason, detail: string): void {
    if (this.closed) return;
    this.close();
    this.sink.end(reason, detail);
  }

  private dropSnapshot(): void {
    this.snapshot?.leave(this);
    this.snapshot = null;
  }
}
