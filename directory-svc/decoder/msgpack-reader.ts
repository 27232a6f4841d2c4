/**
 * A hand-rolled MessagePack cursor over one payload (kv-events §3). Hot path: every live batch
 * and snapshot chunk is read through it, so it never builds JS objects for wire values. Callers
 * read the structure they expect field by field and skip the rest.
 *
 * Guards against hostile input (§2: a payload is untrusted bytes from the network):
 * - every read checks the bytes left, so truncation at any offset is a ParseError;
 * - a container header may not claim more elements than bytes left (each element takes at
 *   least one byte), so `dd ff ff ff ff` in a 20-byte payload fails before anything is sized
 *   from it; typed arrays are therefore never larger than the payload;
 * - skipping is iterative (a pending-value counter, no recursion), so nesting depth cannot
 *   overflow the stack, and each loop turn consumes at least one byte, so it cannot hang.
 *
 * 64-bit integers are never passed through doubles where exactness matters: `readHash` yields
 * two uint32 halves (`hashHi`, `hashLo`) to be written into a BigUint64Array (§3.1, §3.3).
 */
import { ParseError } from '../errors/stream-errors.js';

/** True on little-endian hosts: decides which uint32 half of a uint64 sits first in memory. */
const HOST_LITTLE_ENDIAN = new Uint8Array(new Uint16Array([1]).buffer)[0] === 1;
/** Index of the low / high uint32 half of element i of a BigUint64Array viewed as Uint32Array. */
export const U64_LO = HOST_LITTLE_ENDIAN ? 0 : 1;
export const U64_HI = HOST_LITTLE_ENDIAN ? 1 : 0;

const NIL = 0xc0;
const TWO_32 = 4294967296;

/**
 * Wire strings compared byte-wise without decoding (map keys, event names). Ids are the index of
 * each name in the constructor list. Cost: one length lookup plus at most a few byte compares.
 */
export class KeyTable {
  private readonly byLength: Array<Array<{ bytes: Uint8Array; id: number }> | undefined> = [];

  constructor(names: readonly string[]) {
    const enc = new TextEncoder();
    names.forEach((name, id) => {
      const bytes = enc.encode(name);
      (this.byLength[bytes.length] ??= []).push({ bytes, id });
    });
  }

  /** Id of the name held in buf[start, start+len), or -1. */
  match(buf: Uint8Array, start: number, len: number): number {
    const candidates = this.byLength[len];
    if (candidates === undefined) return -1;
    outer: for (let c = 0; c < candidates.length; c++) {
      const bytes = candidates[c].bytes;
      for (let i = 0; i < len; i++) if (buf[start + i] !== bytes[i]) continue outer;
      return candidates[c].id;
    }
    return -1;
  }
}

/** Name of the MessagePack family a type byte starts, for error details only. */
export function wireTypeName(b: number): string {
  if (b <= 0x7f || b >= 0xe0) return 'int';
  if (b <= 0x8f) return 'map';
  if (b <= 0x9f) return 'array';
  if (b <= 0xbf) return 'str';
  switch (b) {
    case 0xc0:
      return 'nil';
    case 0xc1:
      return 'never-used byte 0xc1';
    case 0xc2:
    case 0xc3:
      return 'bool';
    case 0xc4:
    case 0xc5:
    case 0xc6:
      return 'bin';
    case 0xca:
    case 0xcb:
      return 'float';
    case 0xd9:
    case 0xda:
    case 0xdb:
      return 'str';
    case 0xdc:
    case 0xdd:
      return 'array';
    case 0xde:
    case 0xdf:
      return 'map';
    default:
      return b >= 0xcc && b <= 0xd3 ? 'int' : 'ext';
  }
}

export class MsgpackReader {
  /** Read position, relative to the start of the payload. */
  pos = 0;
  /** Set by readHash: the uint64 bit pattern of the last hash read (§3.3). */
  hashHi = 0;
  hashLo = 0;
  /** Set by readStrLength: offset of the string bytes just passed. */
  strStart = 0;

  private readonly buf: Uint8Array;
  private readonly view: DataView;
  private readonly end: number;

  constructor(payload: Uint8Array) {
    this.buf = payload;
    this.view = new DataView(payload.buffer, payload.byteOffset, payload.byteLength);
    this.end = payload.byteLength;
  }

  get bytes(): Uint8Array {
    return this.buf;
  }

  atEnd(): boolean {
    return this.pos >= this.end;
  }

  remaining(): number {
    return this.end - this.pos;
  }

  /** The type byte of the next value, not consumed. */
  peek(): number {
    if (this.pos >= this.end) throw this.truncated(1);
    return this.buf[this.pos];
  }

  /** Consumes a nil and returns true, or returns false and consumes nothing. */
  tryNil(): boolean {
    if (this.pos >= this.end) throw this.truncated(1);
    if (this.buf[this.pos] !== NIL) return false;
    this.pos++;
    return true;
  }

  /** Element count of an array header; `what` names the field for the error detail. */
  readArrayLength(what: string): number {
    const b = this.byte();
    let n: number;
    if (b >= 0x90 && b <= 0x9f) n = b & 0x0f;
    else if (b === 0xdc) n = this.u16();
    else if (b === 0xdd) n = this.u32();
    else throw this.wrongType(what, 'array', b);
    return this.checkCount(n, 1);
  }

  /** Entry count of a map header. */
  readMapLength(what: string): number {
    const b = this.byte();
    let n: number;
    if (b >= 0x80 && b <= 0x8f) n = b & 0x0f;
    else if (b === 0xde) n = this.u16();
    else if (b === 0xdf) n = this.u32();
    else throw this.wrongType(what, 'map', b);
    return this.checkCount(n, 2);
  }

  /** True when the next value is an array (not consumed). */
  nextIsArray(): boolean {
    const b = this.peek();
    return (b >= 0x90 && b <= 0x9f) || b === 0xdc || b === 0xdd;
  }

  /** True when the next value is a map (not consumed). */
  nextIsMap(): boolean {
    const b = this.peek();
    return (b >= 0x80 && b <= 0x8f) || b === 0xde || b === 0xdf;
  }

  /** True when the next value is a str (not consumed). */
  nextIsStr(): boolean {
    const b = this.peek();
    return (b >= 0xa0 && b <= 0xbf) || b === 0xd9 || b === 0xda || b === 0xdb;
  }

  /** Passes one str; returns its byte length and sets `strStart` to its first byte. */
  readStrLength(what: string): number {
    const b = this.byte();
    let n: number;
    if (b >= 0xa0 && b <= 0xbf) n = b & 0x1f;
    else if (b === 0xd9) n = this.u8();
    else if (b === 0xda) n = this.u16();
    else if (b === 0xdb) n = this.u32();
    else throw this.wrongType(what, 'str', b);
    this.need(n);
    this.strStart = this.pos;
    this.pos += n;
    return n;
  }

  /**
   * Reads a map key: the id of a known str key, or -1 for an unknown one. Non-str keys are
   * skipped and count as unknown (§3.2: unknown map keys are ignored).
   */
  readKey(keys: KeyTable): number {
    if (!this.nextIsStr()) {
      this.skipValue();
      return -1;
    }
    const len = this.readStrLength('key');
    return keys.match(this.buf, this.strStart, len);
  }

  /**
   * An engine hash (§3.3) into `hashHi`/`hashLo`: any integer modulo 2^64 (two's complement for
   * negatives), or a bin's last 8 bytes big-endian, left-padded. Anything else is `parse`.
   */
  readHash(what: string): void {
    const b = this.byte();
    if (b <= 0x7f) return this.intHash(b);
    if (b >= 0xe0) return this.intHash(b - 0x100);
    switch (b) {
      case 0xcc:
        return this.intHash(this.u8());
      case 0xcd:
        return this.intHash(this.u16());
      case 0xce:
        return this.intHash(this.u32());
      case 0xcf:
      case 0xd3:
        // uint64 and int64 share the bit pattern we keep.
        this.need(8);
        this.hashHi = this.view.getUint32(this.pos);
        this.hashLo = this.view.getUint32(this.pos + 4);
        this.pos += 8;
        return;
      case 0xd0:
        return this.intHash(this.i8());
      case 0xd1:
        return this.intHash(this.i16());
      case 0xd2:
        return this.intHash(this.i32());
      case 0xc4:
        return this.binHash(this.u8());
      case 0xc5:
        return this.binHash(this.u16());
      case 0xc6:
        return this.binHash(this.u32());
      default:
        throw this.wrongType(what, 'int or bin', b);
    }
  }

  /** An integer that MUST fit int32 (token ids, §3.2); out of range or not an int is `parse`. */
  readInt32(what: string): number {
    const b = this.byte();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    switch (b) {
      case 0xcc:
        return this.u8();
      case 0xcd:
        return this.u16();
      case 0xce: {
        const v = this.u32();
        if (v > 0x7fffffff) throw this.notInt32(what, String(v));
        return v;
      }
      case 0xcf: {
        this.need(8);
        const hi = this.view.getUint32(this.pos);
        const lo = this.view.getUint32(this.pos + 4);
        this.pos += 8;
        if (hi !== 0 || lo > 0x7fffffff) throw this.notInt32(what, ((BigInt(hi) << 32n) | BigInt(lo)).toString());
        return lo;
      }
      case 0xd0:
        return this.i8();
      case 0xd1:
        return this.i16();
      case 0xd2:
        return this.i32();
      case 0xd3: {
        this.need(8);
        const hi = this.view.getUint32(this.pos);
        const lo = this.view.getUint32(this.pos + 4);
        this.pos += 8;
        if (hi === 0 && lo <= 0x7fffffff) return lo;
        if (hi === 0xffffffff && lo >= 0x80000000) return lo | 0;
        throw this.notInt32(what, BigInt.asIntN(64, (BigInt(hi) << 32n) | BigInt(lo)).toString());
      }
      default:
        throw this.wrongType(what, 'int', b);
    }
  }

  /**
   * Reads `n` int32 values into out[0..n) (token ids, §3.2). Hot path: ~2k ids per 16-block
   * batch, so the common encodings (fixint, uint8/16/32) are read inline from local copies of
   * the cursor with one bounds check per id; anything else goes through readInt32.
   */
  readInt32Into(out: Int32Array, n: number, what: string): void {
    const buf = this.buf;
    // 5 bytes is the longest inline encoding (uint32): below that, fall back to checked reads.
    const fastEnd = this.end - 5;
    let pos = this.pos;
    for (let i = 0; i < n; i++) {
      if (pos > fastEnd) {
        this.pos = pos;
        out[i] = this.readInt32(what);
        pos = this.pos;
        continue;
      }
      const b = buf[pos];
      if (b <= 0x7f) {
        out[i] = b;
        pos++;
      } else if (b === 0xce) {
        const v = ((buf[pos + 1] << 24) | (buf[pos + 2] << 16) | (buf[pos + 3] << 8) | buf[pos + 4]) >>> 0;
        if (v > 0x7fffffff) {
          this.pos = pos + 5;
          throw this.notInt32(what, String(v));
        }
        out[i] = v;
        pos += 5;
      } else if (b === 0xcd) {
        out[i] = (buf[pos + 1] << 8) | buf[pos + 2];
        pos += 3;
      } else if (b === 0xcc) {
        out[i] = buf[pos + 1];
        pos += 2;
      } else {
        this.pos = pos;
        out[i] = this.readInt32(what);
        pos = this.pos;
      }
    }
    this.pos = pos;
  }

  /**
   * Any integer as a number: exact within ±2^53, approximate beyond. Only for small-valued
   * fields compared for equality (dp_rank, block_size), where an approximate huge value can
   * never equal a configured one.
   */
  readIntNumber(what: string): number {
    const b = this.byte();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    return this.intBody(what, b);
  }

  /** Any number (int or float) as a double: `ts` (§3.1 accepts any number). */
  readNumber(what: string): number {
    const b = this.byte();
    if (b <= 0x7f) return b;
    if (b >= 0xe0) return b - 0x100;
    if (b === 0xcb) {
      this.need(8);
      const v = this.view.getFloat64(this.pos);
      this.pos += 8;
      return v;
    }
    if (b === 0xca) {
      this.need(4);
      const v = this.view.getFloat32(this.pos);
      this.pos += 4;
      return v;
    }
    return this.intBody(what, b);
  }

  /**
   * Skips one value of any type. Iterative: `pending` counts values still to pass, so nesting
   * depth costs no stack; each turn consumes at least one byte, so it ends within the payload.
   */
  skipValue(): void {
    let pending = 1;
    while (pending > 0) {
      pending--;
      const b = this.byte();
      if (b <= 0x7f || b >= 0xe0) continue;
      if (b <= 0x8f) {
        pending += 2 * this.checkCount(b & 0x0f, 2);
        continue;
      }
      if (b <= 0x9f) {
        pending += this.checkCount(b & 0x0f, 1);
        continue;
      }
      if (b <= 0xbf) {
        this.advance(b & 0x1f);
        continue;
      }
      switch (b) {
        case 0xc0:
        case 0xc2:
        case 0xc3:
          break;
        case 0xc4:
        case 0xd9:
          this.advance(this.u8());
          break;
        case 0xc5:
        case 0xda:
          this.advance(this.u16());
          break;
        case 0xc6:
        case 0xdb:
          this.advance(this.u32());
          break;
        case 0xc7:
          this.advance(this.u8() + 1); // ext8: length, then type byte, then data
          break;
        case 0xc8:
          this.advance(this.u16() + 1);
          break;
        case 0xc9:
          this.advance(this.u32() + 1);
          break;
        case 0xca:
          this.advance(4);
          break;
        case 0xcb:
          this.advance(8);
          break;
        case 0xcc:
        case 0xd0:
          this.advance(1);
          break;
        case 0xcd:
        case 0xd1:
          this.advance(2);
          break;
        case 0xce:
        case 0xd2:
          this.advance(4);
          break;
        case 0xcf:
        case 0xd3:
          this.advance(8);
          break;
        case 0xd4:
          this.advance(2); // fixext 1: type byte + 1
          break;
        case 0xd5:
          this.advance(3);
          break;
        case 0xd6:
          this.advance(5);
          break;
        case 0xd7:
          this.advance(9);
          break;
        case 0xd8:
          this.advance(17);
          break;
        case 0xdc:
          pending += this.checkCount(this.u16(), 1);
          break;
        case 0xdd:
          pending += this.checkCount(this.u32(), 1);
          break;
        case 0xde:
          pending += 2 * this.checkCount(this.u16(), 2);
          break;
        case 0xdf:
          pending += 2 * this.checkCount(this.u32(), 2);
          break;
        default:
          // Only 0xc1 is left: never used by MessagePack.
          throw new ParseError(`invalid MessagePack type byte 0x${b.toString(16)} at offset ${this.pos - 1}`);
      }
    }
  }

  /** A ParseError naming the field, the expected and the found type, and the offset. */
  wrongType(what: string, expected: string, b: number): ParseError {
    return new ParseError(`${what}: expected ${expected}, got ${wireTypeName(b)} at offset ${this.pos - 1}`);
  }

  private intBody(what: string, b: number): number {
    switch (b) {
      case 0xcc:
        return this.u8();
      case 0xcd:
        return this.u16();
      case 0xce:
        return this.u32();
      case 0xcf: {
        this.need(8);
        const v = this.view.getUint32(this.pos) * TWO_32 + this.view.getUint32(this.pos + 4);
        this.pos += 8;
        return v;
      }
      case 0xd0:
        return this.i8();
      case 0xd1:
        return this.i16();
      case 0xd2:
        return this.i32();
      case 0xd3: {
        this.need(8);
        const v = this.view.getInt32(this.pos) * TWO_32 + this.view.getUint32(this.pos + 4);
        this.pos += 8;
        return v;
      }
      default:
        throw this.wrongType(what, 'int', b);
    }
  }

  /** A hash from an int that fits 32 bits, sign-extended to 64 (§3.3: two's complement for negatives). */
  private intHash(v: number): void {
    this.hashHi = v < 0 ? 0xffffffff : 0;
    this.hashLo = v >>> 0;
  }

  private binHash(n: number): void {
    this.need(n);
    // §3.3: only the last 8 bytes count, read big-endian; shorter values are left-padded.
    const take = n < 8 ? n : 8;
    let hi = 0;
    let lo = 0;
    for (let i = this.pos + n - take, stop = this.pos + n; i < stop; i++) {
      hi = ((hi << 8) | (lo >>> 24)) >>> 0;
      lo = ((lo << 8) | this.buf[i]) >>> 0;
    }
    this.pos += n;
    this.hashHi = hi;
    this.hashLo = lo;
  }

  private notInt32(what: string, value: string): ParseError {
    return new ParseError(`${what}: ${value} does not fit int32`);
  }

  /** A container may not claim more elements than bytes left (each takes at least one). */
  private checkCount(n: number, bytesPerElement: number): number {
    if (n * bytesPerElement > this.end - this.pos) {
      throw new ParseError(
        `truncated: container of ${n} elements at offset ${this.pos} with ${this.end - this.pos} bytes left`,
      );
    }
    return n;
  }

  private byte(): number {
    if (this.pos >= this.end) throw this.truncated(1);
    return this.buf[this.pos++];
  }

  private u8(): number {
    return this.byte();
  }

  private u16(): number {
    this.need(2);
    const v = this.view.getUint16(this.pos);
    this.pos += 2;
    return v;
  }

  private u32(): number {
    this.need(4);
    const v = this.view.getUint32(this.pos);
    this.pos += 4;
    return v;
  }

  private i8(): number {
    this.need(1);
    return this.view.getInt8(this.pos++);
  }

  private i16(): number {
    this.need(2);
    const v = this.view.getInt16(this.pos);
    this.pos += 2;
    return v;
  }

  private i32(): number {
    this.need(4);
    const v = this.view.getInt32(this.pos);
    this.pos += 4;
    return v;
  }

  private need(n: number): void {
    if (n > this.end - this.pos) throw this.truncated(n);
  }

  private advance(n: number): void {
    this.need(n);
    this.pos += n;
  }

  private truncated(n: number): ParseError {
    return new ParseError(`truncated: need ${n} bytes at offset ${this.pos}, ${this.end - this.pos} left`);
  }
}
