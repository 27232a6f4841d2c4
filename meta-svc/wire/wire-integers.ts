/**
 * Exact integer conversion of JSON number text and decimal strings (kvcm-meta §1.3). Pure; every
 * function returns null when the text is not an integer in range, and the caller names the field.
 */

export const INT32_MIN = -(2n ** 31n);
export const INT32_MAX = 2n ** 31n - 1n;
export const INT64_MIN = -(2n ** 63n);
export const INT64_MAX = 2n ** 63n - 1n;
export const UINT64_MAX = 2n ** 64n - 1n;

const DECIMAL_STRING = /^-?[0-9]+$/;
/** RFC 8259 number, captured: sign, integer digits, fraction digits, exponent. */
const JSON_NUMBER = /^(-?)([0-9]+)(?:\.([0-9]+))?(?:[eE]([+-]?[0-9]+))?$/;

/**
 * The exact integer value of a JSON number's text, or null when it has a non-zero fraction.
 * `1.0` and `1e3` are integers (protobuf-JSON accepts integral numbers in any notation); results
 * beyond ±10^40 are reported as out of range (null) without building huge bigints.
 */
export function integerOfJsonNumber(raw: string): bigint | null {
  // Fast path (every block key of a lookup): short plain `-?[0-9]+` text is exact as it stands.
  const plainDigits = plainIntegerDigits(raw);
  if (plainDigits > 0 && plainDigits <= 40) return BigInt(raw);
  const m = JSON_NUMBER.exec(raw);
  if (!m) return null;
  const negative = m[1] === '-';
  const frac = m[3] ?? '';
  let digits = (m[2] as string) + frac;
  let exp = (m[4] === undefined ? 0 : Number(m[4])) - frac.length;
  digits = digits.replace(/^0+/, '');
  if (digits === '') return 0n;
  // Trailing zeros of the mantissa can pay for a negative exponent.
  while (exp < 0 && digits.endsWith('0')) {
    digits = digits.slice(0, -1);
    exp++;
  }
  if (exp < 0) return null;
  if (digits.length + exp > 40) return null;
  const v = BigInt(digits) * 10n ** BigInt(exp);
  return negative ? -v : v;
}

/** Digit count of `-?[0-9]+` text, or 0 when it has anything else (fraction, exponent, no digits). */
function plainIntegerDigits(raw: string): number {
  const start = raw.charCodeAt(0) === 0x2d ? 1 : 0;
  if (raw.length === start) return 0;
  for (let i = start; i < raw.length; i++) {
    const c = raw.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return 0;
  }
  return raw.length - start;
}

/** Value of a decimal string (`-?[0-9]+`, leading zeros allowed), or null. */
export function integerOfDecimalString(s: string): bigint | null {
  if (s.length === 0 || s.length > 40 || !DECIMAL_STRING.test(s)) return null;
  return BigInt(s);
}

export function inRange(v: bigint, min: bigint, max: bigint): boolean {
  return v >= min && v <= max;
}
