/**
 * Failures of the engine simulator itself (not stream errors of kv-events §10, which belong to
 * the subscriber). Each has a stable `class` so tests match on it, never on the message; the
 * message is `<class>: <detail>` like the spec's stream errors.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
export type SimErrorClass = 'limit' | 'invalid_value' | 'closed' | 'bind';

export abstract class SimError extends DomainError {
  abstract override readonly class: SimErrorClass;
}

/** A payload or chunk that cannot be kept within `max_message_bytes` (§2, §6, §11.3). */
export class SimLimitError extends SimError {
  readonly class = 'limit' as const;
}
/** A value the wire cannot carry exactly, e.g. a hash outside the 64-bit range (§3.3). */
export class InvalidWireValueError extends SimError {
  readonly class = 'invalid_value' as const;
}
/** Use of a publisher or simulator after close(). */
export class SimClosedError extends SimError {
  readonly class = 'closed' as const;
}
/** A port that could not be (re)bound. */
export class SimBindError extends SimError {
  readonly class = 'bind' as const;
}
