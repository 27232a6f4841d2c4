/**
 * CSPRNG identifiers: 8-character location ids (kvcm-meta §4.5) and 32-character write
 * session ids (§6 step 5), both over [A-Za-z0-9]. Rejection sampling keeps the 62 symbols
 * uniform (bytes ≥ 248 are redrawn).
 */
import { randomBytes } from 'node:crypto';

const ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';
const LIMIT = 248; // 4 × 62: the largest multiple of 62 not above 256

export function randomAlnum(length: number): string {
  let out = '';
  while (out.length < length) {
    const bytes = randomBytes(length * 2);
    for (let i = 0; i < bytes.length && out.length < length; i++) {
      const b = bytes[i] as number;
      if (b < LIMIT) out += ALPHABET[b % 62];
    }
  }
  return out;
}

export function newLocationId(): string {
  return randomAlnum(8);
}

export function newWriteSessionId(): string {
  return randomAlnum(32);
}
