// A small seeded mutation fuzzer for the project's parsers (no @jazzer.js: plain TypeScript, so a
// failure reproduces from `FUZZ_SEED` and an iteration number alone).
//
//   corpus seed ──pick──▶ mutate (1..4 stacked mutations) ──▶ target(input) ──▶ allowed error or ok
//        ▲                   byte level: flip, set, insert, delete, truncate, duplicate, splice
//        │                   msgpack:   container length, integer width, str/bin length, type byte
//        └── test/fuzz/corpus/<kind>/   JSON:      token delete/duplicate/swap/replace, splice, nesting
//
// Every iteration draws from its own generator, `Rng.forIteration(seed, i)`, so input i can be
// rebuilt without replaying inputs 0..i−1: a guard that kills a hung worker names the seed and the
// iteration, and `inputFor` regenerates the exact bytes for the report.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** sfc32: small, fast, good enough for mutation choices; state seeded through splitmix32. */
export class Rng {
  private a: number;
  private b: number;
  private c: number;
  private d: number;

  constructor(seed: number) {
    let s = seed >>> 0;
    const next = (): number => {
      s = (s + 0x9e3779b9) >>> 0;
      let z = s;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.a = next();
    this.b = next();
    this.c = next();
    this.d = next();
    for (let i = 0; i < 12; i++) this.u32();
  }

  /** The generator of iteration `i` of a run seeded with `seed` (independent of other iterations). */
  static forIteration(seed: number, i: number): Rng {
    return new Rng((Math.imul(seed >>> 0, 0x27d4eb2d) ^ Math.imul(i + 1, 0x165667b1)) >>> 0);
  }

  u32(): number {
    const t = (((this.a + this.b) >>> 0) + this.d) >>> 0;
    this.d = (this.d + 1) >>> 0;
    this.a = this.b ^ (this.b >>> 9);
    this.b = (this.c + (this.c << 3)) >>> 0;
    this.c = ((this.c << 21) | (this.c >>> 11)) >>> 0;
    this.c = (this.c + t) >>> 0;
    return t;
  }

  /** Uniform integer in [0, n); 0 when n ≤ 0. */
  int(n: number): number {
    return n <= 0 ? 0 : Math.floor((this.u32() / 0x1_0000_0000) * n);
  }

  /** True with probability p. */
  chance(p: number): boolean {
    return this.u32() / 0x1_0000_0000 < p;
  }

  pick<T>(xs: readonly T[]): T {
    if (xs.length === 0) throw new RangeError('pick from an empty list');
    return xs[this.int(xs.length)]!;
  }

  bytes(n: number): Uint8Array {
    const out = new Uint8Array(n);
    for (let i = 0; i < n; i++) out[i] = this.u32() & 0xff;
    return out;
  }
}

/** An integer from the environment (FUZZ_SEED, FUZZ_ITERATIONS, FC_RUNS…), else `fallback`. */
export function envInt(name: string, fallback: number): number {
  const raw = process.env[name];
  if (raw === undefined || raw === '') return fallback;
  const n = Number(raw);
  if (!Number.isSafeInteger(n)) throw new Error(`${name} must be an integer, got ${JSON.stringify(raw)}`);
  return n;
}

/** The run's seed: FUZZ_SEED when set, else a fresh one (always printed by the caller on failure). */
export function fuzzSeed(): number {
  return envInt('FUZZ_SEED', Math.floor(Math.random() * 0x7fff_ffff)) >>> 0;
}

/** Iterations per target: `shortForm` in `npm test`, FUZZ_ITERATIONS for long runs. */
export function fuzzIterations(shortForm: number): number {
  return envInt('FUZZ_ITERATIONS', shortForm);
}

// ---- corpus ----------------------------------------------------------------------------------

export const CORPUS_ROOT = new URL('../fuzz/corpus/', import.meta.url).pathname;

/** Every file of `test/fuzz/corpus/<kind>/` (sorted by name, so seeds index the same files). */
export function loadCorpus(kind: string): { name: string; bytes: Uint8Array }[] {
  const dir = join(CORPUS_ROOT, kind);
  const names = readdirSync(dir)
    .filter((n) => !n.startsWith('.') && n !== 'README.md' && statSync(join(dir, n)).isFile())
    .sort();
  if (names.length === 0) throw new Error(`empty fuzz corpus ${dir}`);
  return names.map((name) => ({ name, bytes: new Uint8Array(readFileSync(join(dir, name))) }));
}

// ---- byte-level mutations --------------------------------------------------------------------

/** Values that sit on type and length boundaries of MessagePack and of JSON text. */
const INTERESTING_BYTES = [
  0x00, 0x01, 0x7f, 0x80, 0xff, 0xc0, 0xc1, 0xc2, 0xc3, 0xc4, 0xc5, 0xc6, 0xca, 0xcb, 0xcc, 0xcd, 0xce, 0xcf, 0xd0,
  0xd3, 0xd9, 0xda, 0xdb, 0xdc, 0xdd, 0xde, 0xdf, 0x90, 0x9f, 0x80, 0x8f, 0xa0, 0xbf, 0xe0, 0x22, 0x5c, 0x7b, 0x5b,
];

function concat(...parts: Uint8Array[]): Uint8Array {
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

// ---- MessagePack-aware mutations -------------------------------------------------------------

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

// ---- JSON token-level mutations --------------------------------------------------------------

const JSON_TOKEN_RE = /"(?:[^"\\]|\\.)*"?|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?|true|false|null|[{}[\]:,]|\s+|./gsu;

/** Splits JSON text into tokens (strings, numbers, literals, punctuation, whitespace, other). */
export function jsonTokens(text: string): string[] {
  return text.match(JSON_TOKEN_RE) ?? [];
}

/** Tokens on the edges of what the project's JSON readers accept. */
const INTERESTING_JSON = [
  '0', '-0', '1', '-1', '1.5', '1e2', '1E+2', '1e999', '-1e999', '0.0000001', '2147483647', '2147483648', '-2147483649',
  '9007199254740993', '9223372036854775807', '9223372036854775808', '-9223372036854775809', '18446744073709551616',
  '"9223372036854775808"', '"-1"', '"1.0"', '" 1"', '""', '"\\u0000"', '"\\ud800"', '"\\udc00\\ud800"', '"\\uZZZZ"',
  '"__proto__"', '"constructor"', 'null', 'true', 'false', '[]', '{}', '[null]', '{"":null}', '"QT_PREFIX_MATCH"',
  '"gpu"', '"cpu"', 'NaN', 'Infinity', '01', '.5', '+1', '"\\"', '\u2028', '\ufeff',
];

const VALUE_TOKEN_RE = /^(?:"|-?\d|true$|false$|null$)/;

/** Values a structural mutation puts in place of another (types, bounds, nesting). */
function interestingValue(rng: Rng): unknown {
  const raw = rng.pick(INTERESTING_JSON);
  try {
    return JSON.parse(raw) as unknown;
  } catch {
    return raw; // as a string: the token itself was not valid JSON
  }
}

/** Object keys of the corpus in snake_case and lowerCamelCase, so both spellings meet (§1.3). */
function camel(s: string): string {
  return s.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

/**
 * One structural mutation of a parsed JSON value that keeps the text valid JSON: replace a value
 * (type, bound), drop or duplicate-in-camelCase a key, wrap a value in an array or an object,
 * empty or grow an array. Returns the serialized text.
 */
export function mutateJsonValue(rng: Rng, text: string): string | null {
  let root: unknown;
  try {
    root = JSON.parse(text) as unknown;
  } catch {
    return null;
  }
  // Every container and the key/index of each value in it.
  const slots: { parent: Record<string, unknown> | unknown[]; key: string | number }[] = [];
  const walk = (v: unknown, depth: number): void => {
    if (depth > 20 || v === null || typeof v !== 'object') return;
    if (Array.isArray(v)) {
      for (let i = 0; i < v.length && i < 64; i++) {
        slots.push({ parent: v, key: i });
        walk(v[i], depth + 1);
      }
    } else {
      for (const k of Object.keys(v)) {
        slots.push({ parent: v as Record<string, unknown>, key: k });
        walk((v as Record<string, unknown>)[k], depth + 1);
      }
    }
  };
  walk(root, 0);
  if (slots.length === 0) return JSON.stringify(interestingValue(rng));
  const n = 1 + rng.int(3);
  for (let k = 0; k < n; k++) {
    const { parent, key } = rng.pick(slots);
    const get = (): unknown => (parent as Record<string | number, unknown>)[key];
    const set = (v: unknown): void => {
      (parent as Record<string | number, unknown>)[key] = v;
    };
    switch (rng.int(6)) {
      case 0:
      case 1:
        set(interestingValue(rng));
        break;
      case 2:
        if (Array.isArray(parent)) parent.splice(key as number, 1);
        else delete parent[key as string];
        break;
      case 3:
        if (!Array.isArray(parent) && typeof key === 'string' && camel(key) !== key) parent[camel(key)] = get();
        else set([get()]);
        break;
      case 4:
        set(rng.chance(0.5) ? [get(), get()] : { value: get() });
        break;
      default: {
        const v = get();
        if (Array.isArray(v)) set(rng.chance(0.5) ? [] : Array.from({ length: rng.pick([2, 100, 5000]) }, () => v[0] ?? 0));
        else if (typeof v === 'number') set(rng.pick([v + 1, -v, v * 2 ** 31, v + 0.5, 2 ** 53 + 1]));
        else if (typeof v === 'string') set(rng.pick(['', v + v, v.toUpperCase(), v.slice(1), `${v}\u0000`, v.repeat(200)]));
        else set(interestingValue(rng));
      }
    }
  }
  return JSON.stringify(root);
}

/**
 * Half structural (valid JSON, bad values), half token-level (delete, duplicate, swap, replace,
 * splice, nest), sometimes a byte mutation on top.
 */
export function mutateJsonText(rng: Rng, text: string, donors: readonly string[] = []): string {
  if (rng.chance(0.5)) {
    const structural = mutateJsonValue(rng, text);
    if (structural !== null) return structural;
  }
  let toks = jsonTokens(text);
  const n = 1 + rng.int(3);
  for (let k = 0; k < n; k++) {
    if (toks.length === 0) toks = [rng.pick(INTERESTING_JSON)];
    const i = rng.int(toks.length);
    switch (rng.int(8)) {
      case 0:
        toks.splice(i, 1);
        break;
      case 1:
        toks.splice(i, 0, toks[i]!);
        break;
      case 2: {
        const j = rng.int(toks.length);
        [toks[i], toks[j]] = [toks[j]!, toks[i]!];
        break;
      }
      case 3:
      case 4: {
        // mostly a value for a value, so the text often stays JSON
        const values = toks.flatMap((t, at) => (VALUE_TOKEN_RE.test(t) ? [at] : []));
        toks[values.length > 0 && rng.chance(0.8) ? rng.pick(values) : i] = rng.pick(INTERESTING_JSON);
        break;
      }
      case 5: {
        const donor = donors.length > 0 ? jsonTokens(rng.pick(donors)) : toks;
        const from = rng.int(donor.length);
        toks.splice(i, rng.int(4), ...donor.slice(from, from + 1 + rng.int(12)));
        break;
      }
      case 6: {
        // wrap a token in deep nesting (depth limits, recursion)
        const depth = rng.pick([1, 2, 99, 100, 101, 1000, 5000]);
        const open = rng.chance(0.5) ? '[' : '{"a":';
        const close = open === '[' ? ']' : '}';
        toks[i] = open.repeat(depth) + toks[i]! + (rng.chance(0.9) ? close.repeat(depth) : '');
        break;
      }
      default: {
        // a mutation inside a string or number token, at the character level
        const t = toks[i]!;
        const at = rng.int(t.length + 1);
        const ch = rng.pick(['\\', '"', '\u0000', '\u001f', 'é', '\ud83d\ude00', '\ud800', 'e', '.', '-', '9']);
        toks[i] = t.slice(0, at) + ch + t.slice(at + (rng.chance(0.5) ? 1 : 0));
      }
    }
  }
  let out = toks.join('');
  if (rng.chance(0.1)) {
    const b = mutateBytes(rng, new TextEncoder().encode(out));
    out = new TextDecoder().decode(b);
  }
  return out;
}

// ---- reporting -------------------------------------------------------------------------------

export function hex(b: Uint8Array, max = 4096): string {
  const s = Buffer.from(b.buffer, b.byteOffset, Math.min(b.length, max)).toString('hex');
  return b.length > max ? `${s}… (${b.length} bytes)` : s;
}

/** `global.gc` when node runs with --expose-gc (then heap growth is asserted, else only reported). */
export function exposedGc(): (() => void) | null {
  const g = (globalThis as { gc?: () => void }).gc;
  return typeof g === 'function' ? g : null;
}

/** Heap used after a full collection when possible (bytes). */
export function settledHeapUsed(): number {
  const gc = exposedGc();
  if (gc !== null) {
    gc();
    gc();
  }
  return process.memoryUsage().heapUsed;
}

export const MIB = 1024 * 1024;

/** How much RSS and heap grew over the timed part of a fuzz load (bytes). */
export interface MemoryGrowth {
  readonly rssBytes: number;
  readonly heapBytes: number;
}

/**
 * The HTTP fuzz load: 20 warm-up requests (JIT, pages, sockets) before the memory baseline, then
 * requests 0..iterations `parallel` at a time with `health` every 100, and `health` once more at
 * the end. `send(i)` sends and checks request i; warm-up requests get i ≥ iterations.
 */
export async function runFuzzLoad(
  iterations: number,
  parallel: number,
  send: (i: number) => Promise<void>,
  health: () => Promise<void>,
): Promise<MemoryGrowth> {
  for (let i = 0; i < 20; i++) await send(iterations + i);
  exposedGc()?.();
  const rssBefore = process.memoryUsage().rss;
  const heapBefore = process.memoryUsage().heapUsed;
  for (let i = 0; i < iterations; i += parallel) {
    const batch: Promise<void>[] = [];
    for (let k = i; k < Math.min(iterations, i + parallel); k++) batch.push(send(k));
    await Promise.all(batch);
    if (i % 100 === 0) await health();
  }
  await health();
  exposedGc()?.();
  return { rssBytes: process.memoryUsage().rss - rssBefore, heapBytes: process.memoryUsage().heapUsed - heapBefore };
}

/** `RSS growth … MiB, heap growth … MiB`, noting when the heap figure is only reported. */
export function describeGrowth(g: MemoryGrowth): string {
  return `RSS growth ${(g.rssBytes / MIB).toFixed(1)} MiB, heap growth ${(g.heapBytes / MIB).toFixed(1)} MiB${exposedGc() ? '' : ' (no --expose-gc: heap reported only)'}`;
}
