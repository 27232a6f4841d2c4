// An independent, slow, literal reading of kv-events §3 for the differential fuzz target: the
// payload is decoded by @msgpack/msgpack (a separate MessagePack implementation) and the §3 rules
// are applied to the resulting JS value, one rule per line. The production decoder and this one
// must agree on every input: the same events, or both reject (parse before protocol, §3.1).
import { ExtData, decode } from '@msgpack/msgpack';

export type RefEvent =
  | { kind: 'stored'; hashes: bigint[]; parent: bigint | null; tokens: number[]; blockSize: number | null; tier: 1 | 2; outOfScope: boolean }
  | { kind: 'removed'; hashes: bigint[]; tier: 1 | 2 }
  | { kind: 'cleared'; tiers: 1 | 2 | 3 };

export type RefResult = { ok: true; events: RefEvent[] } | { ok: false; cls: 'parse' | 'protocol'; why: string };

class RefError extends Error {
  constructor(
    readonly cls: 'parse' | 'protocol',
    why: string,
  ) {
    super(why);
  }
}

const parse = (why: string): never => {
  throw new RefError('parse', why);
};

const isInt = (v: unknown): v is number | bigint => typeof v === 'bigint' || (typeof v === 'number' && Number.isInteger(v));
/** A decoded MessagePack map (@msgpack/msgpack gives plain objects). */
type WireMap = Record<string, unknown>;
const isMap = (v: unknown): v is WireMap =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Uint8Array) && !(v instanceof ExtData) && !(v instanceof Date);
/** Own keys only, so a `__proto__` or `constructor` key is plain data. */
const get = (m: WireMap, key: string): unknown => (Object.hasOwn(m, key) ? m[key] : undefined);
let foreignKeys = 0;
/** Non-string keys can never name a field: map them to keys no field has (they are skipped, §3.2). */
const keyOf = (key: unknown): string | number => (typeof key === 'string' ? key : `\u0000non-string key ${foreignKeys++}`);
const M64 = (1n << 64n) - 1n;

/** §3.3: any integer mod 2^64, or a bin's last 8 bytes big-endian. */
function hashOf(v: unknown): bigint {
  if (isInt(v)) return BigInt(v) & M64;
  if (v instanceof Uint8Array) {
    let h = 0n;
    for (const b of v.subarray(Math.max(0, v.length - 8))) h = (h << 8n) | BigInt(b);
    return h;
  }
  return parse('hash of a wrong type');
}

function hashes(v: unknown): bigint[] {
  if (!Array.isArray(v)) return parse('block_hashes not an array');
  return v.map(hashOf);
}

/** §3.4: nil → `nilMeans`; case-insensitive gpu / cpu; anything else parse. */
function medium(v: unknown, nilMeans: 1 | 2 | 3): 1 | 2 | 3 {
  if (v === null || v === undefined) return nilMeans;
  if (typeof v !== 'string') return parse('medium not a string');
  const m = v.toLowerCase();
  if (v.length === 3 && m === 'gpu') return 1;
  if (v.length === 3 && m === 'cpu') return 2;
  return parse('medium not gpu/cpu');
}

function stored(f: (i: number, key: string) => unknown): RefEvent {
  const hs = hashes(f(1, 'block_hashes') ?? parse('block_hashes nil'));
  const p = f(2, 'parent_block_hash');
  const parent = p === null || p === undefined ? null : hashOf(p);
  const t = f(3, 'token_ids');
  let tokens: number[] = [];
  if (t !== null && t !== undefined) {
    if (!Array.isArray(t)) parse('token_ids not an array');
    tokens = (t as unknown[]).map((x) => {
      if (!isInt(x) || BigInt(x) < -(2n ** 31n) || BigInt(x) >= 2n ** 31n) return parse('token id not int32');
      return Number(x);
    });
  }
  const bs = f(4, 'block_size');
  if (bs !== null && bs !== undefined && !isInt(bs)) parse('block_size not an integer');
  const loraId = f(5, 'lora_id');
  if (loraId !== null && loraId !== undefined && !isInt(loraId)) parse('lora_id not an integer');
  const tier = medium(f(6, 'medium'), 1) as 1 | 2;
  const loraName = f(7, 'lora_name');
  if (loraName !== null && loraName !== undefined && typeof loraName !== 'string') parse('lora_name not a string');
  const extra = f(8, 'extra_keys');
  if (extra !== null && extra !== undefined && !Array.isArray(extra)) parse('extra_keys not an array');
  const extraNonEmpty = Array.isArray(extra) && extra.some((x) => !(x === null || (Array.isArray(x) && x.length === 0)));
  const outOfScope = (loraId !== null && loraId !== undefined) || (loraName !== null && loraName !== undefined) || extraNonEmpty;
  return { kind: 'stored', hashes: hs, parent, tokens, blockSize: bs === null || bs === undefined ? null : Number(bs), tier, outOfScope };
}

function event(e: unknown): RefEvent {
  let name: unknown;
  let field: (i: number, key: string) => unknown;
  if (Array.isArray(e)) {
    name = e[0];
    field = (i) => e[i];
  } else if (isMap(e)) {
    if (!Object.hasOwn(e, 'type')) parse('event map without type');
    name = get(e, 'type');
    field = (_i, key) => get(e, key);
  } else {
    return parse('event neither array nor map');
  }
  if (typeof name !== 'string') return parse('event name not a string');
  switch (name) {
    case 'BlockStored':
      return stored(field);
    case 'BlockRemoved':
      return { kind: 'removed', hashes: hashes(field(1, 'block_hashes') ?? parse('block_hashes nil')), tier: medium(field(2, 'medium'), 1) as 1 | 2 };
    case 'AllBlocksCleared':
      // The positional form has no medium position: both tiers.
      return { kind: 'cleared', tiers: Array.isArray(e) ? 3 : medium(field(1, 'medium'), 3) };
    default:
      return parse(`unknown event ${name}`);
  }
}

/** Every ExtData or timestamp anywhere (the project decoder's choice for them is checked apart). */
export function containsExt(v: unknown, depth = 0): boolean {
  if (depth > 200) return false;
  if (v instanceof ExtData || v instanceof Date) return true;
  if (Array.isArray(v)) return v.some((x) => containsExt(x, depth + 1));
  if (isMap(v)) for (const k of Object.keys(v)) if (containsExt(v[k], depth + 1)) return true;
  return false;
}

/** §3.1–§3.4 over @msgpack/msgpack's reading of `payload`, for a stream with dp_rank `dpRank`. */
export function referenceBatch(payload: Uint8Array, dpRank: number): RefResult & { value?: unknown } {
  let value: unknown;
  try {
    value = decode(payload, { useBigInt64: true, mapKeyConverter: keyOf });
  } catch (e) {
    return { ok: false, cls: 'parse', why: `msgpack: ${e instanceof Error ? e.message : String(e)}` };
  }
  try {
    let ts: unknown;
    let events: unknown;
    let rank: unknown;
    if (Array.isArray(value)) {
      if (value.length < 2) parse('batch array shorter than 2');
      [ts, events, rank] = value;
    } else if (isMap(value)) {
      ts = get(value, 'ts');
      events = get(value, 'events');
      rank = get(value, 'data_parallel_rank');
    } else {
      parse('batch neither array nor map');
    }
    if (typeof ts !== 'number' && typeof ts !== 'bigint') parse('ts not a number');
    if (!Array.isArray(events)) parse('events not an array');
    const out = (events as unknown[]).map(event);
    // Parse errors first, then the dp_rank rule.
    if (rank !== null && rank !== undefined && !isInt(rank)) parse('dp_rank not an integer');
    if (rank === null || rank === undefined) throw new RefError('protocol', 'dp_rank nil');
    if (BigInt(rank as number | bigint) !== BigInt(dpRank)) throw new RefError('protocol', 'dp_rank differs');
    return { ok: true, events: out, value };
  } catch (e) {
    if (e instanceof RefError) return { ok: false, cls: e.cls, why: e.message, value };
    throw e;
  }
}

/**
 * True when some map in `b` repeats a key (compared as raw bytes). §3 leaves duplicate keys
 * undefined and the two decoders resolve them differently (the production one documents its
 * choice), so the differential skips such inputs. Recursive descent, bounded by the input.
 */
export function hasDuplicateMapKeys(b: Uint8Array): boolean {
  const dv = new DataView(b.buffer, b.byteOffset, b.byteLength);
  let pos = 0;
  let dup = false;
  const fail = (): never => {
    throw new RangeError('truncated');
  };
  const u = (n: number): number => {
    if (pos + n > b.length) fail();
    const v = n === 1 ? dv.getUint8(pos) : n === 2 ? dv.getUint16(pos) : dv.getUint32(pos);
    pos += n;
    return v;
  };
  const skip = (n: number): void => {
    if (pos + n > b.length) fail();
    pos += n;
  };
  const value = (depth: number): void => {
    if (depth > 500) fail();
    const t = u(1);
    if (t <= 0x7f || t >= 0xe0 || t === 0xc0 || t === 0xc2 || t === 0xc3) return;
    if ((t & 0xe0) === 0xa0) return skip(t & 0x1f);
    if ((t & 0xf0) === 0x90) return items(t & 0x0f, depth);
    if ((t & 0xf0) === 0x80) return pairs(t & 0x0f, depth);
    switch (t) {
      case 0xcc: case 0xd0: return skip(1);
      case 0xcd: case 0xd1: return skip(2);
      case 0xce: case 0xd2: case 0xca: return skip(4);
      case 0xcf: case 0xd3: case 0xcb: return skip(8);
      case 0xd9: case 0xc4: return skip(u(1));
      case 0xda: case 0xc5: return skip(u(2));
      case 0xdb: case 0xc6: return skip(u(4));
      case 0xdc: return items(u(2), depth);
      case 0xdd: return items(u(4), depth);
      case 0xde: return pairs(u(2), depth);
      case 0xdf: return pairs(u(4), depth);
      case 0xd4: return skip(2);
      case 0xd5: return skip(3);
      case 0xd6: return skip(5);
      case 0xd7: return skip(9);
      case 0xd8: return skip(17);
      case 0xc7: return skip(u(1) + 1);
      case 0xc8: return skip(u(2) + 1);
      case 0xc9: return skip(u(4) + 1);
      default: return fail();
    }
  };
  const items = (n: number, depth: number): void => {
    for (let i = 0; i < n; i++) value(depth + 1);
  };
  const pairs = (n: number, depth: number): void => {
    const seen = new Set<string>();
    for (let i = 0; i < n; i++) {
      const start = pos;
      value(depth + 1);
      const key = Buffer.from(b.buffer, b.byteOffset + start, pos - start).toString('hex');
      if (seen.has(key)) dup = true;
      seen.add(key);
      value(depth + 1);
    }
  };
  try {
    value(0);
  } catch {
    return dup;
  }
  return dup;
}

export interface RefSnapshotBlock {
  hash: bigint;
  parent: bigint | null;
  tokens: number[];
  tiers: number;
  outOfScope: boolean;
}

export type RefChunkResult = ({ ok: true; blocks: RefSnapshotBlock[] } | { ok: false; cls: 'parse' | 'protocol'; why: string }) & { value?: unknown };

/**
 * §6 chunk envelope over @msgpack/msgpack's reading, with the error classes of the table in
 * directory-svc/decoder/snapshot-decoder.ts (parse = malformed or wrong type, protocol = a rule
 * broken by well-formed data; parse wins anywhere in the chunk).
 */
export function referenceChunk(payload: Uint8Array, dpRank: number, blockSize: number): RefChunkResult {
  let value: unknown;
  try {
    value = decode(payload, { useBigInt64: true, mapKeyConverter: keyOf });
  } catch (e) {
    return { ok: false, cls: 'parse', why: `msgpack: ${e instanceof Error ? e.message : String(e)}` };
  }
  const violations: string[] = [];
  try {
    if (!isMap(value)) parse('envelope not a map');
    const env = value as WireMap;
    const rank = get(env, 'dp_rank');
    const size = get(env, 'block_size');
    const blocks = get(env, 'blocks');
    if (rank !== null && rank !== undefined && !isInt(rank)) parse('dp_rank not an int');
    if (size !== null && size !== undefined && !isInt(size)) parse('block_size not an int');
    if (!Array.isArray(blocks)) parse('blocks not an array');
    const out = (blocks as unknown[]).map((b, i): RefSnapshotBlock => {
      if (!isMap(b)) return parse(`block ${i} not a map`);
      const h = get(b, 'block_hash');
      if (h === null || h === undefined) parse('block_hash nil');
      const hash = hashOf(h);
      const p = get(b, 'parent_block_hash');
      const parent = p === null || p === undefined ? null : hashOf(p);
      const t = get(b, 'token_ids');
      let tokens: number[] = [];
      if (t !== null && t !== undefined) {
        if (!Array.isArray(t)) parse('token_ids not an array');
        tokens = (t as unknown[]).map((x) => (isInt(x) && BigInt(x) >= -(2n ** 31n) && BigInt(x) < 2n ** 31n ? Number(x) : parse('token id not int32')));
      }
      const media = get(b, 'media');
      if (!Array.isArray(media)) return parse('media nil or not an array');
      let tiers = 0;
      for (const m of media as unknown[]) {
        if (m === null || m === undefined) parse('media element nil');
        const tier = medium(m, 1);
        if ((tiers & tier) !== 0) violations.push('media repeated');
        tiers |= tier;
      }
      if (media.length === 0) violations.push('media empty');
      const loraId = get(b, 'lora_id');
      if (loraId !== null && loraId !== undefined && !isInt(loraId)) parse('lora_id not an int');
      const loraName = get(b, 'lora_name');
      if (loraName !== null && loraName !== undefined && typeof loraName !== 'string') parse('lora_name not a string');
      const extra = get(b, 'extra_keys');
      if (extra !== null && extra !== undefined && !Array.isArray(extra)) parse('extra_keys not an array');
      const extraNonEmpty = Array.isArray(extra) && extra.some((x) => !(x === null || (Array.isArray(x) && x.length === 0)));
      if (tokens.length !== blockSize) violations.push('token count');
      return { hash, parent, tokens, tiers: tiers || 1, outOfScope: (loraId !== null && loraId !== undefined) || (loraName !== null && loraName !== undefined) || extraNonEmpty };
    });
    if (rank === null || rank === undefined || BigInt(rank as number | bigint) !== BigInt(dpRank)) throw new RefError('protocol', 'dp_rank');
    if (size === null || size === undefined || BigInt(size as number | bigint) !== BigInt(blockSize)) throw new RefError('protocol', 'block_size');
    if (violations.length > 0) throw new RefError('protocol', violations[0]!);
    return { ok: true, blocks: out, value };
  } catch (e) {
    if (e instanceof RefError) return { ok: false, cls: e.cls, why: e.message, value };
    throw e;
  }
}
