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

const MAX_VALUE_BYTES = 128;

/**
 * §1.4 entry of a field that is present but invalid: `<field>=<value>`, the value as compact JSON
 * (strings quoted, bigints printed as JSON strings as in §1.3 output) cut to 128 UTF-8 bytes, so
 * the message names the offending value (KVCM parity): `instance_group="nope"`, `block_size=0`.
 */
export function invalidFieldEntry(field: string, value: unknown): string {
  const json = JSON.stringify(value, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v)) ?? 'null';
  return `${field}=${cutToBytes(json, MAX_VALUE_BYTES)}`;
}

/** The longest prefix of `s` of at most `max` UTF-8 bytes, never splitting a code point. */
function cutToBytes(s: string, max: number): string {
  if (s.length * 3 <= max) return s;
  let bytes = 0;
  let end = 0;
  for (const ch of s) {
    const cp = ch.codePointAt(0) as number;
    const n = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    if (bytes + n > max) break;
    bytes += n;
    end += ch.length;
  }
  return s.slice(0, end);
}

/**
 * §1.4 DUPLICATE_ENTITY: `instance "<id>" already registered with different <field>[, <field>...]`
 * (KVCM parity); `fields` come in §1.4 order from the identity comparison.
 */
export function duplicateInstance(instanceId: string, fields: readonly string[]): MetaError {
  return new MetaError('DUPLICATE_ENTITY', `instance ${JSON.stringify(instanceId)} already registered with different ${fields.join(', ')}`);
}

/** The INVALID_ARGUMENT MetaError for missing or invalid required fields (§1.4). */
export function missingFields(requestName: string, fields: readonly string[]): MetaError {
  return new MetaError('INVALID_ARGUMENT', missingFieldsMessage(requestName, fields));
}
