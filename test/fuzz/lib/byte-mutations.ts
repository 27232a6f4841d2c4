// Byte-level mutations of any input: flip, set to a boundary value, insert, delete, truncate,
// duplicate, splice from another seed; `mutateBytes` stacks 1..4 of them.
import type { Rng } from './rng.js';

/** Values that sit on type and length boundaries of MessagePack and of JSON text. */
export const INTERESTING_BYTES = [
  0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0,
  0xd3, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xe0, 0x22, 0x5c, 0x7b, 0x5b,
];

export function concat(...parts: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const p of parts) n += p.length;
  const out = new Uint8Array(n);
  let o = 0;
  for (const p of parts) {
    out.set(p, o);
    o += p.length;
  }
  return out;
}

type ByteMutation = (rng: Rng, b: Uint8Array, donors: readonly Uint8Array[]) => Uint8Array;

const BYTE_MUTATIONS: readonly ByteMutation[] = [
  // bit flip
  (rng, b) => {
    if (b.length === 0) return rng.bytes(1);
    const out = b.slice();
    out[rng.int(out.length)]! ^= 1 << rng.int(8);
    return out;
  },
  // set a byte to a boundary value
  (rng, b) => {
    if (b.length === 0) return Uint8Array.of(rng.pick(INTERESTING_BYTES));
    const out = b.slice();
    out[rng.int(out.length)] = rng.pick(INTERESTING_BYTES);
    return out;
  },
  // insert random bytes
  (rng, b) => {
    const at = rng.int(b.length + 1);
    return concat(b.subarray(0, at), rng.bytes(1 + rng.int(8)), b.subarray(at));
  },
  // delete a range
  (rng, b) => {
    if (b.length === 0) return b;
    const at = rng.int(b.length);
    const n = 1 + rng.int(Math.min(16, b.length - at));
    return concat(b.subarray(0, at), b.subarray(at + n));
  },
  // truncate
  (rng, b) => b.slice(0, rng.int(b.length + 1)),
  // duplicate a range in place
  (rng, b) => {
    if (b.length === 0) return b;
    const at = rng.int(b.length);
    const n = 1 + rng.int(Math.min(32, b.length - at));
    return concat(b.subarray(0, at + n), b.subarray(at, at + n), b.subarray(at + n));
  },
  // splice: head of this input, tail of another seed
  (rng, b, donors) => {
    const other = donors.length > 0 ? rng.pick(donors) : b;
    return concat(b.subarray(0, rng.int(b.length + 1)), other.subarray(rng.int(other.length + 1)));
  },
];

/** 1..4 stacked byte-level mutations. */
export function mutateBytes(rng: Rng, input: Uint8Array, donors: readonly Uint8Array[] = []): Uint8Array {
  let b = input;
  const n = 1 + rng.int(4);
  for (let i = 0; i < n; i++) b = rng.pick(BYTE_MUTATIONS)(rng, b, donors);
  return b;
}
