/**
 * What the router's HTTP edge answers when a request cannot be served (routing.md "HTTP API").
 * Each failure has a stable `class` (what tests and metrics match on), the HTTP status, the
 * one-line `reason` the client reads and, when one request field is at fault, that field (`param`);
 * the message is `<class>: <reason>`. Stack traces never reach a response.
 *
 * On the wire every failure is OpenAI's error object, as vLLM's OpenAI server writes it
 * (vllm/entrypoints/openai/engine/protocol.py ErrorResponse/ErrorInfo, serve/utils/error_response.py
 * create_error_response), so the official clients raise their typed errors (404 NotFoundError,
 * 400 BadRequestError, ...) with the message:
 *
 *   {"error": {"message": "...", "type": "NotFoundError", "param": "model", "code": 404}}
 *
 * Every endpoint of the port answers this way, not only the OpenAI ones (`/v1/route` and the
 * query endpoint too): one shape for a client to read (docs/incoming/router-identity.md).
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import type { Logger } from '../../shared/log/logger.js';

export type RouterHttpErrorClass =
  | 'bad_request'
  | 'unauthorized'
  | 'too_large'
  | 'not_found'
  | 'unknown_model'
  | 'method_not_allowed'
  | 'no_candidate'
  | 'upstream';

export class RouterHttpError extends DomainError {
  readonly class: RouterHttpErrorClass;

  constructor(
    cls: RouterHttpErrorClass,
    readonly httpStatus: number,
    /** The `message` the client reads: names the field or the instance, never internals. */
    readonly reason: string,
    /** The request field at fault (the error object's `param`); null when none is. */
    readonly param: string | null = null,
  ) {
    super(reason);
    this.class = cls;
  }
}

/** 400: malformed JSON or a field of the wrong type; `reason` names the field, `param` is it. */
export function badRequest(reason: string, param: string | null = null): RouterHttpError {
  return new RouterHttpError('bad_request', 400, reason, param);
}

/** 404 for a model no instance serves (cache-identity §2): vLLM's message, word for word. */
export function unknownModel(model: string): RouterHttpError {
  return new RouterHttpError('unknown_model', 404, `The model \`${model}\` does not exist.`, 'model');
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

/** OpenAI's error object (vLLM's ErrorResponse). */
export interface OpenAiErrorBody {
  readonly error: {
    readonly message: string;
    /** The error class name OpenAI's clients use for the status (openai-node's error classes where one exists). */
    readonly type: string;
    readonly param: string | null;
    /** The HTTP status, as vLLM writes it. */
    readonly code: number;
  };
}

/**
 * `type` by status: vLLM's names for the statuses it answers (BadRequestError, NotFoundError,
 * InternalServerError), openai-node's class names for the others a client may meet here.
 */
const ERROR_TYPES: Readonly<Record<number, string>> = {
  400: 'BadRequestError',
  401: 'AuthenticationError',
  404: 'NotFoundError',
  405: 'MethodNotAllowedError',
  408: 'RequestTimeoutError',
  413: 'RequestTooLargeError',
  431: 'RequestHeaderFieldsTooLargeError',
  500: 'InternalServerError',
  502: 'BadGatewayError',
  503: 'ServiceUnavailableError',
};

/** The error object of a failure with `status`, `message` and the field at fault. */
export function openAiError(status: number, message: string, param: string | null = null): OpenAiErrorBody {
  const type = ERROR_TYPES[status] ?? (status >= 500 ? 'InternalServerError' : 'BadRequestError');
  return { error: { message, type, param, code: status } };
}

/** A failed request's answer: the error object with its status; `close` after a 413. */
export interface FailureAnswer {
  readonly status: number;
  readonly body: OpenAiErrorBody;
  /** The 413's body drain may have stopped early: the connection cannot be reused. */
  readonly close: boolean;
}

/**
 * A RouterHttpError as its status and error object (5xx logged as warnings); anything else is a
 * bare 500, logged, never a stack trace in the response.
 */
export function failureAnswer(e: unknown, path: string, log: Logger): FailureAnswer {
  if (isRouterHttpError(e)) {
    if (e.httpStatus >= 500) log.warn({ path, status: e.httpStatus, err: e.reason }, 'request failed');
    return { status: e.httpStatus, body: openAiError(e.httpStatus, e.reason, e.param), close: e.httpStatus === 413 };
  }
  log.error({ path, err: e instanceof Error ? e.message : String(e) }, 'unexpected error');
  return { status: 500, body: openAiError(500, 'internal error'), close: false };
}
