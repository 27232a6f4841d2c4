/**
 * The order of a snapshot sent in several messages (proto ViewSnapshotChunk; architecture.md:
 * ≤ 4 MiB per message): parts must come in order (index 0, 1, …) with the first part's epoch and
 * version. The cache applies each part, as it arrives, to the view state this assembly carries,
 * built beside its live one, and swaps that state in on the last part: no part is kept, and no
 * step applies more than one message. Pure.
 */
import type { DecodedSnapshotChunk } from './view-update.js';
import { ViewProtocolError } from './view-errors.js';

export class SnapshotAssembly<State> {
  readonly epoch: string;
  readonly version: bigint;
  private nextIndex = 1;

  /** Starts from part 0, into `state` (empty). */
  constructor(
    first: DecodedSnapshotChunk,
    /** The view being built from the parts. */
    readonly state: State,
  ) {
    if (first.index !== 0) throw new ViewProtocolError(`snapshot part ${first.index} of ${first.epoch}/${first.version} without part 0`);
    this.epoch = first.epoch;
    this.version = first.version;
  }

  /** Checks that `c` is the next part. Throws ViewProtocolError when out of order. */
  next(c: DecodedSnapshotChunk): void {
    if (c.epoch !== this.epoch || c.version !== this.version || c.index !== this.nextIndex) {
      throw new ViewProtocolError(`snapshot part ${c.index} of ${c.epoch}/${c.version} where part ${this.nextIndex} of ${this.epoch}/${this.version} was due`);
    }
    this.nextIndex++;
  }
}
