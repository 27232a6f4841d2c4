/**
 * The subscriber states of kv-events §7 and the moves its table allows. Pure: the subscriber's
 * single `transition` function checks every move here before making it.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
export type StreamState = 'CONNECTING' | 'RECOVERING' | 'SYNCHRONIZED' | 'UNSYNCHRONIZED';

export const STREAM_STATES: readonly StreamState[] = ['CONNECTING', 'RECOVERING', 'SYNCHRONIZED', 'UNSYNCHRONIZED'];

/**
 * §7 table, "Leaves to" column, plus the two rules under it: any state goes to CONNECTING on
 * disconnect (§7.4), and a full-state batch restores SYNCHRONIZED from UNSYNCHRONIZED (§7.3).
 * CONNECTING → CONNECTING is not a move: a disconnect while connecting changes nothing.
 */
const ALLOWED: Readonly<Record<StreamState, readonly StreamState[]>> = {
  CONNECTING: ['RECOVERING'],
  RECOVERING: ['SYNCHRONIZED', 'UNSYNCHRONIZED', 'CONNECTING'],
  SYNCHRONIZED: ['RECOVERING', 'UNSYNCHRONIZED', 'CONNECTING'],
  UNSYNCHRONIZED: ['RECOVERING', 'SYNCHRONIZED', 'CONNECTING'],
};

export function isAllowedTransition(from: StreamState, to: StreamState): boolean {
  return ALLOWED[from].includes(to);
}

/** A move the §7 table forbids: a bug in the subscriber, never a stream failure. */
export class IllegalTransitionError extends DomainError {
  readonly class = 'illegal_transition' as const;
  constructor(readonly from: StreamState, readonly to: StreamState) {
    super(`${from} -> ${to} (allowed: ${ALLOWED[from].join(', ')})`);
  }
}
