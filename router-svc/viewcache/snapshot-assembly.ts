/**
 * The order of a snapshot sent in several messages (proto ViewSnapshotChunk; architecture.md:
 * ≤ 4 MiB per message): parts must come in order (index 0, 1, …) with the first part's epoch and
 * version. The cache applies each part, as it arrives, to the view state this assembly carries,
 * built beside its live one, and swaps that state in on the last part: no part is kept. A part
 * may be applied in several steps (ViewCache.applyStep); `part`, `stream` and `key` say where
 * the next step resumes. Pure.
 */
import type { DecodedSnapshotChunk } from './view-update.js';
import { ViewProtocolError } from './view-errors.js';

export class SnapshotAssembly<State> {
  readonly epoch: string;
  readonly version: bigint;
  private nextIndex = 1;
  /** The part being applied (null between parts), and the next stream and key of it to apply. */
  part: DecodedSnapshotChunk | null;
  stream = 0;
  key = 0;

  /** Starts from part 0, into `state` (empty). */
  constructor(
    first: DecodedSnapshotChunk,
    /** The view being built from the parts. */
    readonly state: State,
  ) {
    if (first.index !== 0) throw new ViewProtocolError(`snapshot part ${first.index} of ${first.epoch}/${first.version} without part 0`);
    this.epoch = first.epoch;
    this.version = first.version;
    this.part = first;
  }

  /** Checks that `c` is the next part. Throws ViewProtocolError when out of order. */
  next(c: DecodedSnapshotChunk): void {
    if (c.epoch !== this.epoch || c.version !== this.version || c.index !== this.nextIndex) {
      throw new ViewProtocolError(`snapshot part ${c.index} of ${c.epoch}/${c.version} where part ${this.nextIndex} of ${this.epoch}/${this.version} was due`);
    }
    this.nextIndex++;
    this.part = c;
    this.stream = 0;
    this.key = 0;
  }
}
