/**
 * The bounded change log of the view stream (architecture.md "The view stream"): the encoded
 * deltas of the last versions, so a router that reconnects with (epoch, version) gets only what it
 * missed. Bounded by entry count AND total bytes; the oldest entries go first. The newest entry is
 * always kept, even when it alone exceeds the byte bound, so a caught-up watcher can always be sent
 * the delta just published. Pure: no timers, no I/O.
 *
 * Storage is a ring over a fixed array of `maxEntries` slots: append and evict are O(1), lookup by
 * version is O(1) (versions are consecutive).
 */

/** One published delta: its version and its encoded `ViewUpdate`. */
export interface LogEntry {
  readonly version: number;
  readonly bytes: Buffer;
}

export interface ChangeLogLimits {
  /** At most this many deltas (≥ 1). */
  readonly maxEntries: number;
  /** At most this many encoded bytes in total (the newest entry excepted). */
  readonly maxBytes: number;
}

export class ChangeLog {
  private readonly slots: (LogEntry | undefined)[];
  private head = 0;
  private count = 0;
  private bytes = 0;
  /** Version of the newest entry ever appended; 0 before the first. */
  private newest = 0;

  constructor(private readonly limits: ChangeLogLimits) {
    if (!Number.isInteger(limits.maxEntries) || limits.maxEntries < 1) throw new RangeError(`maxEntries must be a positive integer, got ${limits.maxEntries}`);
    if (!(limits.maxBytes > 0)) throw new RangeError(`maxBytes must be positive, got ${limits.maxBytes}`);
    this.slots = new Array<LogEntry | undefined>(limits.maxEntries);
  }

  /** Entries held. */
  get size(): number {
    return this.count;
  }

  /** Encoded bytes held. */
  get byteSize(): number {
    return this.bytes;
  }

  /** Version of the oldest entry held; `newestVersion + 1` when empty. */
  get oldestVersion(): number {
    return this.count === 0 ? this.newest + 1 : this.newest - this.count + 1;
  }

  get newestVersion(): number {
    return this.newest;
  }

  /**
   * Appends the delta of `version` (must be newest + 1), then evicts the oldest entries until both
   * bounds hold. Returns how many entries were evicted.
   */
  append(version: number, bytes: Buffer): number {
    if (version !== this.newest + 1) throw new RangeError(`change log: version ${version} appended after ${this.newest}`);
    const cap = this.slots.length;
    if (this.count === cap) this.evictOldest();
    this.slots[(this.head + this.count) % cap] = { version, bytes };
    this.count++;
    this.bytes += bytes.length;
    this.newest = version;
    let evicted = 0;
    while (this.count > 1 && this.bytes > this.limits.maxBytes) {
      this.evictOldest();
      evicted++;
    }
    return evicted;
  }

  /** The entry of `version`, or null when it is not (or no longer) held. */
  get(version: number): LogEntry | null {
    const oldest = this.oldestVersion;
    if (version < oldest || version > this.newest) return null;
    return this.slots[(this.head + (version - oldest)) % this.slots.length] ?? null;
  }

  /**
   * Whether a router that applied `version` can be brought up to date from the log alone: every
   * version after it is still held (or there is none yet).
   */
  canResumeFrom(version: number): boolean {
    return version <= this.newest && version >= this.oldestVersion - 1;
  }

  private evictOldest(): void {
    const e = this.slots[this.head];
    this.slots[this.head] = undefined;
    this.head = (this.head + 1) % this.slots.length;
    this.count--;
    if (e !== undefined) this.bytes -= e.bytes.length;
  }
}
