/**
 * The MetaService's two failure kinds (kvcm-meta §1.2, §1.4):
 * - MetaError: a business outcome. HTTP 200; its code goes to `header.status.code`.
 * - BadRequestError: the request is not a valid message (§1.3). HTTP 400 with body exactly `{}`;
 *   the reason only reaches the WARN log.
 * Callers match on `class` / `code`, never on the message text.
 */
import type { ErrorCodeName } from './meta-enums.js';

export class MetaError extends Error {
  readonly class = 'meta' as const;
  /**
   * @param code the §2 ErrorCode name reported in `header.status.code`
   * @param fields optional response fields to print with the error (merged over the RPC's defaults)
   */
  constructor(
    readonly code: ErrorCodeName,
    message: string,
    readonly fields?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class BadRequestError extends Error {
  readonly class = 'bad_request' as const;
  constructor(readonly reason: string) {
    super(`bad_request: ${reason}`);
  }
}

export function isMetaError(e: unknown): e is MetaError {
  return e instanceof MetaError;
}

export function isBadRequestError(e: unknown): e is BadRequestError {
  return e instanceof BadRequestError;
}

/**
 * §1.4: `missing or invalid fields: {RegisterInstance: {instance_group}}`; several fields are
 * joined by `, `. `requestName` is the protobuf message name (e.g. `RegisterInstance`).
 */
export function missingFieldsMessage(requestName: string, fields: readonly string[]): string {
  return `missing or invalid fields: {${requestName}: {${fields.join(', ')}}}`;
}

/** The INVALID_ARGUMENT MetaError for missing or invalid required fields (§1.4). */
export function missingFields(requestName: string, fields: readonly string[]): MetaError {
  return new MetaError('INVALID_ARGUMENT', missingFieldsMessage(requestName, fields));
}
