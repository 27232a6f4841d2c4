/**
 * Which KV cache group a stream indexes (cache-identity §4 rule 4). Hybrid models publish one
 * group per attention kind (full attention beside sliding-window or Mamba layers) and the groups'
 * hashes can collide, so a stream indexes exactly one: the lowest `group_idx` seen on a store of a
 * reusable-prefix kind. Stores and removals of every other group are ignored (the index counts
 * them `skipped{reason=group}`) and never change the index or synchronization.
 *
 * One per stream, for the stream's lifetime, shared by every index the stream builds (live,
 * recovered, reconciliation candidates): what was learned from one index holds for the next.
 * Pure state: no I/O.
 *
 * Decision where the spec is silent: a reusable store of a group BELOW the indexed one (the stream
 * met group 1's stores first, e.g. it joined mid-stream or group 0 had no full block yet). The
 * selection moves down at once and for good, and the store throws `inconsistent`: the stream
 * discards its index and resynchronizes (snapshot or history replay), so recovery indexes the right
 * group from its first event instead of keeping blocks of the wrong one. It happens at most once
 * per group below the first one chosen.
 */
import { InconsistentError } from '../errors/stream-errors.js';

/** No reusable-prefix store seen yet: every removal applies (the index holds nothing to remove). */
const NONE = -1;

export class CacheGroupSelection {
  private indexed = NONE;

  /** The indexed group's `group_idx`, −1 before the first reusable-prefix store. */
  get group(): number {
    return this.indexed;
  }

  /**
   * True when a BlockStored of `group` (`reusable`: a reusable-prefix kind or none) goes into the
   * index. The first reusable store chooses the group. Throws InconsistentError when `group` is a
   * reusable group below the indexed one (after moving the selection to it).
   */
  admitsStore(group: number, reusable: boolean): boolean {
    if (!reusable) return false;
    const indexed = this.indexed;
    if (indexed === NONE) {
      this.indexed = group;
      return true;
    }
    if (group === indexed) return true;
    if (group > indexed) return false;
    this.indexed = group;
    throw new InconsistentError(`KV cache group ${group} (reusable prefix) appeared below the indexed group ${indexed}; resynchronizing to index group ${group}`);
  }

  /** True when a BlockRemoved of `group` applies (§4 rule 4: only group_idx decides). */
  admitsRemoval(group: number): boolean {
    return this.indexed === NONE || group === this.indexed;
  }
}
