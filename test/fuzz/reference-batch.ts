// An independent, slow, literal reading of kv-events §3 for the differential fuzz target: the
// payload is decoded by @msgpack/msgpack (a separate MessagePack implementation) and the §3 rules
// are applied to the resulting JS value, one rule per line. The production decoder and this one
// must agree on every input: the same events, or both reject (parse before protocol, §3.1).
// cache-identity §4 (identity, groups, locality) is read here from its rule text too.
import { ExtData, decode } from '@msgpack/msgpack';

/** A BlockStored's cache identity (cache-identity §4): LoRA name and block-0 salt, or none. */
export interface RefIdentity {
  lora: string | null;
  salt: string | null;
}

export type RefEvent =
  | {
      kind: 'stored';
      hashes: bigint[];
      parent: bigint | null;
      tokens: number[];
      blockSize: number | null;
      tier: 0 | 1 | 2;
      outOfScope: boolean;
      identity: RefIdentity;
      reproducibleBlocks: number;
      group: number;
      reusableGroup: boolean;
    }
  | { kind: 'removed'; hashes: bigint[]; tier: 0 | 1 | 2; group: number }
  | { kind: 'cleared'; tiers: 0 | 1 | 2 | 3 };

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

/** cache-identity §4 rule 4: the reusable-prefix kinds. */
const REUSABLE_KINDS = new Set(['full_attention', 'mla_attention', 'sink_full_attention']);

/** An optional string field (nil → null); another type is parse. */
function optStr(v: unknown, what: string): string | null {
  if (v === null || v === undefined) return null;
  if (typeof v !== 'string') return parse(`${what} not a string`);
  return v;
}

/** group_idx: int 0..2^31−1 or nil (= 0). */
function groupOf(v: unknown): number {
  if (v === null || v === undefined) return 0;
  if (!isInt(v)) return parse('group_idx not an integer');
  const g = BigInt(v);
  if (g < 0n || g > 0x7fffffffn) return parse('group_idx out of range');
  return Number(g);
}

/** locality: "REMOTE" (any case) is a tier we do not serve (§4 rule 5). */
function remoteOf(v: unknown): boolean {
  const s = optStr(v, 'locality');
  return s !== null && s.toLowerCase() === 'remote';
}

/**
 * §4 rule 2 over one block's entry: nil or the tuple; drop a leading lora_name; nothing left →
 * plain; exactly one string where a salt may be → that salt; anything else → out.
 */
function entryOf(entry: unknown, lora: string | null, saltAllowed: boolean): { kind: 'plain' } | { kind: 'salt'; salt: string } | { kind: 'out' } {
  if (entry === null || entry === undefined) return { kind: 'plain' };
  if (!Array.isArray(entry)) return { kind: 'out' };
  let rest: unknown[] = entry;
  if (lora !== null && rest.length > 0 && rest[0] === lora) rest = rest.slice(1);
  if (rest.length === 0) return { kind: 'plain' };
  if (rest.length === 1 && saltAllowed && typeof rest[0] === 'string') return { kind: 'salt', salt: rest[0] };
  return { kind: 'out' };
}

/** §4 rules 1 and 3 after rule 2: the event's identity, or out of scope. */
function identityOf(loraId: unknown, lora: string | null, entrySalt: string | null, eventSalt: string | null, parentless: boolean): RefIdentity | null {
  if ((loraId !== null && loraId !== undefined && lora === null) || lora === '') return null;
  let salt = entrySalt;
  if (eventSalt !== null && parentless) {
    if (salt !== null && salt !== eventSalt) return null;
    salt = eventSalt;
  }
  if (salt === '') return null;
  return { lora, salt };
}

function stored(f: (i: number, key: string) => unknown, eventSalt: string | null): RefEvent {
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
  const medium6 = medium(f(6, 'medium'), 1) as 1 | 2;
  const loraName = optStr(f(7, 'lora_name'), 'lora_name');
  const extra = f(8, 'extra_keys');
  if (extra !== null && extra !== undefined && !Array.isArray(extra)) parse('extra_keys not an array');
  const group = groupOf(f(9, 'group_idx'));
  const kind = optStr(f(10, 'kv_cache_spec_kind'), 'kv_cache_spec_kind');
  const window = f(11, 'kv_cache_spec_sliding_window');
  if (window !== null && window !== undefined && !isInt(window)) parse('kv_cache_spec_sliding_window not an integer');
  const remote = remoteOf(f(12, 'locality'));
  // Rule 2, block by block in hash order.
  let reproducibleBlocks = hs.length;
  let entrySalt: string | null = null;
  if (Array.isArray(extra)) {
    for (let i = 0; i < Math.min(extra.length, hs.length); i++) {
      const r = entryOf(extra[i], loraName, i === 0 && parent === null);
      if (r.kind === 'out') {
        reproducibleBlocks = i;
        break;
      }
      if (r.kind === 'salt') entrySalt = r.salt;
    }
  }
  const identity = identityOf(loraId, loraName, entrySalt, eventSalt, parent === null);
  return {
    kind: 'stored',
    hashes: hs,
    parent,
    tokens,
    blockSize: bs === null || bs === undefined ? null : Number(bs),
    tier: remote ? 0 : medium6,
    outOfScope: identity === null,
    identity: identity ?? { lora: null, salt: null },
    reproducibleBlocks: identity === null ? 0 : reproducibleBlocks,
    group,
    reusableGroup: kind === null || REUSABLE_KINDS.has(kind),
  };
}

/** SGLang's `metadata` map: its cache_salt (str or nil), `undefined` when it names none. */
function metadataSalt(m: unknown): string | null | undefined {
  if (m === null || m === undefined) return undefined;
  if (!isMap(m)) return parse('metadata not a map');
  if (!Object.hasOwn(m, 'cache_salt')) return undefined;
  return optStr(get(m, 'cache_salt'), 'metadata.cache_salt');
}

function event(e: unknown): RefEvent {
  let name: unknown;
  let field: (i: number, key: string) => unknown;
  let eventSalt: string | null = null;
  if (Array.isArray(e)) {
    name = e[0];
    const positional = e;
    // SGLang's BlockStoredWithMetadata: a map at position 7 or later of a BlockStored.
    const isMetadata = (i: number): boolean => name === 'BlockStored' && i >= 7 && isMap(positional[i]);
    field = (i) => (isMetadata(i) ? undefined : positional[i]);
    if (name === 'BlockStored') {
      let meta: string | null | undefined = undefined;
      for (let i = 7; i < positional.length; i++) {
        if (!isMetadata(i)) continue;
        const m = metadataSalt(positional[i]);
        if (m !== undefined) meta = m;
      }
      eventSalt = meta ?? null;
    }
  } else if (isMap(e)) {
    if (!Object.hasOwn(e, 'type')) parse('event map without type');
    name = get(e, 'type');
    field = (_i, key) => get(e, key);
    if (name === 'BlockStored') {
      const own = optStr(get(e, 'cache_salt'), 'cache_salt');
      const meta = metadataSalt(get(e, 'metadata'));
      eventSalt = own ?? meta ?? null;
    }
  } else {
    return parse('event neither array nor map');
  }
  if (typeof name !== 'string') return parse('event name not a string');
  switch (name) {
    case 'BlockStored':
      return stored(field, eventSalt);
    case 'BlockRemoved': {
      const hs = hashes(field(1, 'block_hashes') ?? parse('block_hashes nil'));
      const m = medium(field(2, 'medium'), 1) as 1 | 2;
      const group = groupOf(field(3, 'group_idx'));
      return { kind: 'removed', hashes: hs, tier: remoteOf(field(4, 'locality')) ? 0 : m, group };
    }
    case 'AllBlocksCleared': {
      // The positional form has no medium position: both tiers.
      if (Array.isArray(e)) return { kind: 'cleared', tiers: 3 };
      const m = medium(field(1, 'medium'), 3);
      return { kind: 'cleared', tiers: remoteOf(field(2, 'locality')) ? 0 : m };
    }
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
  multimodal: boolean;
  identity: RefIdentity;
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
      const loraName = optStr(get(b, 'lora_name'), 'lora_name');
      const extra = get(b, 'extra_keys');
      if (extra !== null && extra !== undefined && !Array.isArray(extra)) parse('extra_keys not an array');
      if (tokens.length !== blockSize) violations.push('token count');
      // The block's own entry, or a one-element per-hash list holding it (snapshot-decoder.ts).
      let entry: unknown = extra;
      if (Array.isArray(extra) && extra.length === 1 && (extra[0] === null || Array.isArray(extra[0]))) entry = extra[0];
      const r = entryOf(entry, loraName, parent === null);
      const base = { hash, parent, tokens, tiers: tiers || 1 };
      const outId = { outOfScope: true, multimodal: false, identity: { lora: null, salt: null } };
      if ((loraId !== null && loraId !== undefined && loraName === null) || loraName === '') return { ...base, ...outId };
      if (r.kind === 'out') return { ...base, outOfScope: false, multimodal: true, identity: { lora: null, salt: null } };
      const identity = identityOf(loraId, loraName, r.kind === 'salt' ? r.salt : null, null, parent === null);
      if (identity === null) return { ...base, ...outId };
      return { ...base, outOfScope: false, multimodal: false, identity };
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
