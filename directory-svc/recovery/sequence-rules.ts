/**
 * Sequence rules of kv-events §7.1 (live batches while SYNCHRONIZED). Pure. `last` is the seq of
 * the last batch reflected in the index, −1n when none.
 */
import { GapError, SeqResetError } from '../errors/stream-errors.js';

/** Constant strings, so the hot path compares interned literals and allocates nothing. */
export type SeqVerdict = 'next' | 'gap' | 'reset';

/** §7.1: `last + 1` applies, `> last + 1` is a gap, `≤ last` is a publisher restart. */
export function classifySeq(last: bigint, seq: bigint): SeqVerdict {
  const expected = last + 1n;
  if (seq === expected) return 'next';
  return seq > expected ? 'gap' : 'reset';
}

/** §7.1 / §7.2 wording: `gap: expected <n>, got <seq>`. */
export function gapError(expected: bigint, got: bigint): GapError {
  return new GapError(`expected ${expected}, got ${got}`);
}

/** §7.1 wording: `seq_reset: got <seq> after <last>`. */
export function seqResetError(got: bigint, last: bigint): SeqResetError {
  return new SeqResetError(`got ${got} after ${last}`);
}
