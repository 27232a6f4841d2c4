// MessagePack-aware mutations: container length, integer width, str/bin length, type byte, and a
// value boundary spliced from another seed; byte-level ones mixed in.
import { concat, INTERESTING_BYTES, mutateBytes } from './byte-mutations.js';
import type { Rng } from './rng.js';

/** One MessagePack header found by `scanMsgpack`. */
export interface MsgpackHeader {
  /** Offset of the type byte. */
  readonly offset: number;
  /** Bytes of type byte + length/value field. */
  readonly headerBytes: number;
  readonly kind: 'array' | 'map' | 'str' | 'bin' | 'int' | 'other';
}

/**
 * Walks a MessagePack value and lists the headers it passes. Lenient: stops quietly at the first
 * byte it cannot follow (the mutated inputs are often invalid), bounded by the input length.
 */
export function scanMsgpack(b: Uint8Array): MsgpackHeader[] {
  const out: MsgpackHeader[] = [];
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let pos = 0;
  // Values still to read; containers add their element counts (bounded by the bytes left).
  let pending = 1;
  while (pending > 0 && pos < b.length && out.length < 4096) {
    pending--;
    const t = b[pos]!;
    const at = pos;
    const need = (n: number): boolean => pos + n <= b.length;
    let skip = 0;
    if (t <= 0x7f || t >= 0xe0) {
      out.push({ offset: at, headerBytes: 1, kind: 'int' });
      pos += 1;
      continue;
    }
    if ((t & 0xf0) === 0x90 || (t & 0xf0) === 0x80) {
      const n = t & 0x0f;
      const isMap = (t & 0xf0) === 0x80;
      out.push({ offset: at, headerBytes: 1, kind: isMap ? 'map' : 'array' });
      pos += 1;
      pending += isMap ? 2 * n : n;
      continue;
    }
    if ((t & 0xe0) === 0xa0) {
      out.push({ offset: at, headerBytes: 1, kind: 'str' });
      pos += 1 + (t & 0x1f);
      continue;
    }
    switch (t) {
      case 0xcc:
      case 0xd0:
        skip = 1;
        break;
      case 0xcd:
      case 0xd1:
        skip = 2;
        break;
      case 0xce:
      case 0xd2:
        skip = 4;
        break;
      case 0xcf:
      case 0xd3:
        skip = 8;
        break;
      case 0xc0:
      case 0xc2:
      case 0xc3:
        out.push({ offset: at, headerBytes: 1, kind: 'other' });
        pos += 1;
        continue;
      case 0xca:
        out.push({ offset: at, headerBytes: 5, kind: 'other' });
        pos += 5;
        continue;
      case 0xcb:
        out.push({ offset: at, headerBytes: 9, kind: 'other' });
        pos += 9;
        continue;
      case 0xd9:
      case 0xc4: {
        if (!need(2)) return out;
        out.push({ offset: at, headerBytes: 2, kind: t === 0xd9 ? 'str' : 'bin' });
        pos += 2 + b[at + 1]!;
        continue;
      }
      case 0xda:
      case 0xc5: {
        if (!need(3)) return out;
        out.push({ offset: at, headerBytes: 3, kind: t === 0xda ? 'str' : 'bin' });
        pos += 3 + dv.getUint16(at + 1);
        continue;
      }
      case 0xdc:
      case 0xde: {
        if (!need(3)) return out;
        const n = dv.getUint16(at + 1);
        out.push({ offset: at, headerBytes: 3, kind: t === 0xdc ? 'array' : 'map' });
        pos += 3;
        pending += Math.min(t === 0xdc ? n : 2 * n, b.length);
        continue;
      }
      case 0xdd:
      case 0xdf: {
        if (!need(5)) return out;
        const n = dv.getUint32(at + 1);
        out.push({ offset: at, headerBytes: 5, kind: t === 0xdd ? 'array' : 'map' });
        pos += 5;
        pending += Math.min(t === 0xdd ? n : 2 * n, b.length);
        continue;
      }
      default:
        return out; // ext types and 0xc1 are not followed
    }
    out.push({ offset: at, headerBytes: 1 + skip, kind: 'int' });
    pos += 1 + skip;
  }
  return out;
}

/** A length field rewritten: boundary counts that make decoders read past the end or stop early. */
function lengthHeader(rng: Rng, kind: 'array' | 'map' | 'str' | 'bin'): Uint8Array {
  const counts = [0, 1, 2, 15, 16, 31, 32, 255, 256, 65535, 65536, 0x7fffffff, 0xffffffff];
  const n = rng.pick(counts);
  const wide = rng.int(3); // 0 shortest legal form, 1 16-bit form, 2 32-bit form
  const u16 = (tag: number): Uint8Array => Uint8Array.of(tag, (n >>> 8) & 0xff, n & 0xff);
  const u32 = (tag: number): Uint8Array => Uint8Array.of(tag, (n >>> 24) & 0xff, (n >>> 16) & 0xff, (n >>> 8) & 0xff, n & 0xff);
  switch (kind) {
    case 'array':
      if (wide === 0 && n < 16) return Uint8Array.of(0x90 | n);
      return wide === 1 && n <= 0xffff ? u16(0xdc) : u32(0xdd);
    case 'map':
      if (wide === 0 && n < 16) return Uint8Array.of(0x80 | n);
      return wide === 1 && n <= 0xffff ? u16(0xde) : u32(0xdf);
    case 'str':
      if (wide === 0 && n < 32) return Uint8Array.of(0xa0 | n);
      if (wide === 0 && n <= 0xff) return Uint8Array.of(0xd9, n);
      return wide === 1 && n <= 0xffff ? u16(0xda) : u32(0xdb);
    case 'bin':
      if (n <= 0xff && wide === 0) return Uint8Array.of(0xc4, n);
      return wide === 1 && n <= 0xffff ? u16(0xc5) : u32(0xc6);
  }
}

/** An integer re-encoded in another width or signedness, or replaced by a boundary value. */
function integerEncoding(rng: Rng): Uint8Array {
  const forms: (() => Uint8Array)[] = [
    () => Uint8Array.of(rng.int(128)),
    () => Uint8Array.of(0xe0 | rng.int(32)),
    () => Uint8Array.of(0xcc, rng.pick([0, 1, 0x7f, 0x80, 0xff])),
    () => Uint8Array.of(0xcd, 0xff, 0xff),
    () => Uint8Array.of(0xce, 0x80, 0x00, 0x00, 0x00),
    () => Uint8Array.of(0xcf, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff),
    () => Uint8Array.of(0xcf, 0x00, 0x20, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01), // 2^53 + 1
    () => Uint8Array.of(0xd3, 0x80, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00),
    () => Uint8Array.of(0xd0, 0x80),
    () => Uint8Array.of(0xd2, 0x80, 0x00, 0x00, 0x00),
    () => Uint8Array.of(0xce, 0x7f, 0xff, 0xff, 0xff),
    () => Uint8Array.of(0xcb, 0x7f, 0xf0, 0, 0, 0, 0, 0, 0), // +Infinity
    () => Uint8Array.of(0xcb, 0x7f, 0xf8, 0, 0, 0, 0, 0, 0), // NaN
    () => Uint8Array.of(0xca, 0x3f, 0x80, 0x00, 0x00), // 1.0 as float32
    () => Uint8Array.of(0xc0),
    () => Uint8Array.of(0xc4, 0x08, ...rng.bytes(8)),
  ];
  return rng.pick(forms)();
}

/** One structure-aware mutation of a MessagePack input (falls back to a byte mutation). */
export function mutateMsgpack(rng: Rng, input: Uint8Array, donors: readonly Uint8Array[] = []): Uint8Array {
  const headers = scanMsgpack(input);
  if (headers.length === 0) return mutateBytes(rng, input, donors);
  const h = rng.pick(headers);
  const head = input.subarray(0, h.offset);
  const tail = input.subarray(h.offset + h.headerBytes);
  switch (rng.int(4)) {
    case 0: {
      // swap a container/string length (possibly changing its width)
      const containers = headers.filter((x) => x.kind !== 'int' && x.kind !== 'other');
      if (containers.length === 0) break;
      const c = rng.pick(containers);
      return concat(input.subarray(0, c.offset), lengthHeader(rng, c.kind as 'array' | 'map' | 'str' | 'bin'), input.subarray(c.offset + c.headerBytes));
    }
    case 1: {
      // re-encode an integer (width, sign, float, nil, bin)
      const ints = headers.filter((x) => x.kind === 'int');
      if (ints.length === 0) break;
      const c = rng.pick(ints);
      return concat(input.subarray(0, c.offset), integerEncoding(rng), input.subarray(c.offset + c.headerBytes));
    }
    case 2:
      // replace the type byte alone (a str becomes a bin, an array a map, …)
      return concat(head, Uint8Array.of(rng.pick(INTERESTING_BYTES)), input.subarray(h.offset + 1));
    default: {
      // splice a value boundary of another seed into this one
      const donor = donors.length > 0 ? rng.pick(donors) : input;
      const dh = scanMsgpack(donor);
      if (dh.length === 0) break;
      return concat(head, donor.subarray(rng.pick(dh).offset), rng.chance(0.5) ? tail : new Uint8Array(0));
    }
  }
  return mutateBytes(rng, input, donors);
}

/** 1..3 mutations mixing MessagePack-aware and byte-level ones. */
export function mutateMsgpackInput(rng: Rng, input: Uint8Array, donors: readonly Uint8Array[] = []): Uint8Array {
  let b = input;
  const n = 1 + rng.int(3);
  for (let i = 0; i < n; i++) b = rng.chance(0.6) ? mutateMsgpack(rng, b, donors) : mutateBytes(rng, b, donors);
  return b;
}
