/**
 * What the router's HTTP edge answers when a request cannot be served (routing.md "HTTP API").
 * Each failure has a stable `class`, the HTTP status and the one-line `reason` the client sees as
 * `{"error": reason}`; the message is `<class>: <reason>`. Stack traces never reach a response.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import type { Logger } from '../../shared/log/logger.js';

export type RouterHttpErrorClass =
  | 'bad_request'
  | 'unauthorized'
  | 'too_large'
  | 'not_found'
  | 'method_not_allowed'
  | 'no_candidate'
  | 'upstream';

export class RouterHttpError extends DomainError {
  readonly class: RouterHttpErrorClass;

  constructor(
    cls: RouterHttpErrorClass,
    readonly httpStatus: number,
    /** Shown to the client as `{"error": reason}`: names the field or the instance, never internals. */
    readonly reason: string,
  ) {
    super(reason);
    this.class = cls;
  }
}

/** 400: malformed JSON or a field of the wrong type; `reason` names the field. */
export function badRequest(reason: string): RouterHttpError {
  return new RouterHttpError('bad_request', 400, reason);
}

/** 413: the body is over the limit (routing.md: 8 MiB). */
export function tooLarge(maxBytes: number): RouterHttpError {
  return new RouterHttpError('too_large', 413, `request body over ${maxBytes} bytes`);
}

/** 401: internal endpoint without the right X-Internal-Token (the sent value is never echoed). */
export function unauthorized(): RouterHttpError {
  return new RouterHttpError('unauthorized', 401, 'invalid internal token');
}

/** 502: the chosen engine failed; routing.md says the answer names the instance. */
export function upstreamFailed(instance: string, detail: string): RouterHttpError {
  return new RouterHttpError('upstream', 502, `upstream ${instance} failed: ${detail}`);
}

/**
 * 502 after the proxy's one retry (openai-proxy.ts): both instances named, each with its failure,
 * so an operator sees the first engine vanished and where the request went next.
 */
export function upstreamFailedTwice(first: RouterHttpError, second: RouterHttpError): RouterHttpError {
  return new RouterHttpError('upstream', 502, `${first.reason}; retried on the next-best instance: ${second.reason}`);
}

export function isRouterHttpError(e: unknown): e is RouterHttpError {
  return e instanceof RouterHttpError;
}

/** A failed request's answer: `{"error": reason}` with its status; `close` after a 413. */
export interface FailureAnswer {
  readonly status: number;
  readonly body: { readonly error: string };
  /** The 413's body drain may have stopped early: the connection cannot be reused. */
  readonly close: boolean;
}

/**
 * A RouterHttpError as its status and reason (5xx logged as warnings); anything else is a bare
 * 500, logged, never a stack trace in the response.
 */
export function failureAnswer(e: unknown, path: string, log: Logger): FailureAnswer {
  if (isRouterHttpError(e)) {
    if (e.httpStatus >= 500) log.warn({ path, status: e.httpStatus, err: e.reason }, 'request failed');
    return { status: e.httpStatus, body: { error: e.reason }, close: e.httpStatus === 413 };
  }
  log.error({ path, err: e instanceof Error ? e.message : String(e) }, 'unexpected error');
  return { status: 500, body: { error: 'internal error' }, close: false };
}
