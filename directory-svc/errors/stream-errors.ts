/**
 * The closed set of stream failures of kv-events §10. Every message is `<class>: <detail>`;
 * tests and metrics (`sync_lost{class}`) match on `class`, never on the text. The subscriber
 * state machine maps each class to its next state in one place.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
export type StreamErrorClass =
  | 'connecting'
  | 'disconnected'
  | 'parse'
  | 'protocol'
  | 'inconsistent'
  | 'gap'
  | 'seq_reset'
  | 'timeout'
  | 'limit'
  | 'history_lost';

export abstract class StreamError extends DomainError {
  abstract override readonly class: StreamErrorClass;
}

export class ParseError extends StreamError {
  readonly class = 'parse' as const;
}
export class ProtocolError extends StreamError {
  readonly class = 'protocol' as const;
}
export class InconsistentError extends StreamError {
  readonly class = 'inconsistent' as const;
}
export class GapError extends StreamError {
  readonly class = 'gap' as const;
}
export class SeqResetError extends StreamError {
  readonly class = 'seq_reset' as const;
}
export class TimeoutError extends StreamError {
  readonly class = 'timeout' as const;
}
export class LimitError extends StreamError {
  readonly class = 'limit' as const;
}
/**
 * engines.md §3: a vllm/sglang engine's history no longer holds the batches needed to rebuild
 * the state; only a full-state batch (or a restart's seq 0) restores the stream.
 */
export class HistoryLostError extends StreamError {
  readonly class = 'history_lost' as const;
}
export class ConnectingError extends StreamError {
  readonly class = 'connecting' as const;
}
export class DisconnectedError extends StreamError {
  readonly class = 'disconnected' as const;
}

export function isStreamError(e: unknown): e is StreamError {
  return e instanceof StreamError;
}

/** `<class>: <detail>` (§10), the form a stream's `error` and its logs carry. */
export function errorText(err: StreamError): string {
  return `${err.class}: ${err.detail}`;
}

/** Index and decoder throw StreamErrors; anything else is a bug, surfaced as `parse`, never a crash. */
export function asStreamError(e: unknown): StreamError {
  if (isStreamError(e)) return e;
  return new ParseError(`unexpected failure: ${e instanceof Error ? e.message : String(e)}`);
}
