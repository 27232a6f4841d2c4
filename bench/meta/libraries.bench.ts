/**
 * The MetaService's hand-written parts against the maintained packages that could replace them
 * (issue 14), on the hot path, same run, alternating order so machine load hits both alike:
 *
 *  1. `json_parse`: request bodies through `meta-svc/wire/json-parse.ts` (current) and through
 *     `lossless-json` made to give the same `JsonValue` (numbers as `JsonNumber`, objects as
 *     `Map`s, as the typed reader needs): a 128-key and a 4096-key getCacheLocation body and a
 *     2000-event reportEvent ADD body.
 *  2. `block_cache`: the SQLite store's read-through cache (`meta-svc/store/block-cache.ts`,
 *     FIFO) and `lru-cache` in its place, probed the way `getBlocks` does: 128 keys per lookup
 *     drawn from 20,000 stored keys (hits and misses, misses remembered), with the default budget
 *     (131,072 entries: no eviction) and a small one (4,096: eviction on most lookups).
 *
 * Each line: median ns per operation of each side over the timed rounds, and `ratio` =
 * package / current (above 1: the package is slower); for JSON also `bare_ratio`, lossless-json
 * giving plain objects (what it costs before the Map pass the reader needs). Run: node --import tsx
 * bench/meta/libraries.bench.ts [--quick]
 */
import { LRUCache } from 'lru-cache';
import { parse as losslessParse } from 'lossless-json';
import { JsonNumber, parseJson, type JsonValue } from '../../meta-svc/wire/json-parse.js';
import { BlockCache } from '../../meta-svc/store/block-cache.js';
import type { StoredBlock } from '../../meta-svc/store/meta-store.js';
import { emitResult, isQuickRun, median } from '../lib/bench-kit.js';
import { seededRandom } from '../lib/seeded-random.js';

const QUICK = isQuickRun();
const ROUNDS = QUICK ? 5 : 15;
const WARMUP_ROUNDS = 2;
const SEED = 0x6c696273;

/** Runs `op` `n` times per round, both sides alternating first; median ns per op for each. */
function compare(n: number, current: () => void, candidate: () => void): { current_ns: number; package_ns: number; ratio: number } {
  const a: number[] = [];
  const b: number[] = [];
  const time = (op: () => void): number => {
    const t0 = process.hrtime.bigint();
    for (let i = 0; i < n; i++) op();
    return Number(process.hrtime.bigint() - t0) / n;
  };
  for (let r = 0; r < WARMUP_ROUNDS + ROUNDS; r++) {
    let x: number;
    let y: number;
    if (r % 2 === 0) {
      x = time(current);
      y = time(candidate);
    } else {
      y = time(candidate);
      x = time(current);
    }
    if (r < WARMUP_ROUNDS) continue;
    a.push(x);
    b.push(y);
  }
  const cur = median(a);
  const pkg = median(b);
  return { current_ns: Math.round(cur), package_ns: Math.round(pkg), ratio: Math.round((pkg / cur) * 100) / 100 };
}

// ---- 1. JSON -----------------------------------------------------------------------------------

/** lossless-json shaped like parseJson's output: every number a JsonNumber, every object a Map. */
function losslessJsonValue(text: string): JsonValue {
  return losslessParse(
    text,
    (_key, value) => (value !== null && typeof value === 'object' && !Array.isArray(value) && !(value instanceof JsonNumber) ? new Map(Object.entries(value)) : value),
    (raw) => new JsonNumber(raw),
  ) as JsonValue;
}

function jsonBodies(): { name: string; text: string }[] {
  const rnd = seededRandom(SEED);
  // int64 keys past 2^53 (the reason the parser is lossless), as numbers the way engines send them.
  const key = (): string => (9_007_199_254_740_993n + BigInt(Math.floor(rnd() * 1e12))).toString();
  const lookup = (n: number): string => `{"instance_id":"test_instance","query_type":"QT_PREFIX_MATCH","block_keys":[${Array.from({ length: n }, key).join(',')}]}`;
  const events = Array.from({ length: 2000 }, () => {
    const k = key();
    return `{"event_type":"EVENT_BLOCK_ADD","block_add":{"block_key":${k},"medium":"gpu","specs":[{"name":"tp0","uri":"event_report://h:9600/gpu/${k}?size=4096"}]}}`;
  });
  const report = `{"instance_id":"test_instance","host_ip_port":"10.0.0.7:1","storage_type":"ST_EVENT_REPORT_L2","events":[${events.join(',')}]}`;
  return [
    { name: 'get_cache_location_128', text: lookup(128) },
    { name: 'get_cache_location_4096', text: lookup(4096) },
    { name: 'report_event_add_2000', text: report },
  ];
}

function benchJson(): void {
  for (const body of jsonBodies()) {
    // Same answer first: a faster parser of something else would prove nothing.
    if (JSON.stringify(toPlain(parseJson(body.text))) !== JSON.stringify(toPlain(losslessJsonValue(body.text)))) throw new Error(`${body.name}: the two parsers disagree`);
    const n = Math.max(5, Math.round((QUICK ? 2e6 : 8e6) / body.text.length));
    let sink = 0;
    const r = compare(
      n,
      () => void (sink += parseJson(body.text) === null ? 1 : 0),
      () => void (sink += losslessJsonValue(body.text) === null ? 1 : 0),
    );
    // The package alone (plain objects, no Map pass): whether the loss is the adaptation or the parser.
    const bare = compare(
      n,
      () => void (sink += parseJson(body.text) === null ? 1 : 0),
      () => void (sink += losslessParse(body.text, null, (raw) => new JsonNumber(raw)) === null ? 1 : 0),
    );
    emitResult({ quick: QUICK, name: 'json_parse', body: body.name, body_bytes: body.text.length, parses_per_round: n, ...r, bare_package_ns: bare.package_ns, bare_ratio: bare.ratio, sink });
  }
}

function toPlain(v: JsonValue): unknown {
  if (v instanceof JsonNumber) return `#${v.raw}`;
  if (v instanceof Map) return Object.fromEntries([...v].map(([k, x]) => [k, toPlain(x)]));
  if (Array.isArray(v)) return v.map(toPlain);
  return v;
}

// ---- 2. block cache ----------------------------------------------------------------------------

const STORED_KEYS = 20_000;
const LOOKUP_KEYS = 128;
const INSTANCE = 'test_instance';
const ABSENT = Symbol('absent');

/** The probe loop of SqliteMetaStore.getBlocks over each cache, with the store read faked. */
interface CacheSide {
  lookup(keys: readonly bigint[]): number;
}

function fifoSide(capacity: number, stored: ReadonlyMap<bigint, StoredBlock>): CacheSide {
  const cache = new BlockCache(capacity);
  return {
    lookup(keys) {
      const entries = cache.entriesOf(INSTANCE);
      let found = 0;
      let misses: bigint[] | null = null;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as bigint;
        const cached = entries === undefined ? undefined : entries.get(key);
        if (cached === undefined) (misses ??= []).push(key);
        else if (cached !== null) found++;
      }
      if (misses === null) return found;
      const read = misses.map((k) => stored.get(k));
      for (const b of read) if (b !== undefined) found++;
      cache.remember(INSTANCE, misses, read);
      return found;
    },
  };
}

function lruSide(capacity: number, stored: ReadonlyMap<bigint, StoredBlock>): CacheSide {
  const caches = new Map<string, LRUCache<bigint, StoredBlock | typeof ABSENT>>();
  return {
    lookup(keys) {
      let cache = caches.get(INSTANCE);
      let found = 0;
      let misses: bigint[] | null = null;
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i] as bigint;
        const cached = cache === undefined ? undefined : cache.get(key);
        if (cached === undefined) (misses ??= []).push(key);
        else if (cached !== ABSENT) found++;
      }
      if (misses === null) return found;
      if (cache === undefined) {
        cache = new LRUCache({ max: capacity });
        caches.set(INSTANCE, cache);
      }
      for (const k of misses) {
        const b = stored.get(k);
        if (b !== undefined) found++;
        if (!cache.has(k)) cache.set(k, b ?? ABSENT);
      }
      return found;
    },
  };
}

function benchCache(): void {
  const rnd = seededRandom(SEED ^ 0x5a5a);
  const stored = new Map<bigint, StoredBlock>();
  const block: StoredBlock = { properties: {}, locations: [] } as unknown as StoredBlock; // shape irrelevant: only probed
  for (let i = 0; i < STORED_KEYS; i++) stored.set(BigInt(1_000_000 + i), block);
  // Lookups over 1.5x the stored key range: about a third of the keys were never stored (absent).
  const lookups = Array.from({ length: 512 }, () => Array.from({ length: LOOKUP_KEYS }, () => BigInt(1_000_000 + Math.floor(rnd() * STORED_KEYS * 1.5))));
  for (const capacity of [131_072, 4_096]) {
    const fifo = fifoSide(capacity, stored);
    const lru = lruSide(capacity, stored);
    let i = 0;
    let j = 0;
    let sink = 0;
    const r = compare(
      QUICK ? 2_000 : 10_000,
      () => void (sink += fifo.lookup(lookups[i++ % lookups.length]!)),
      () => void (sink += lru.lookup(lookups[j++ % lookups.length]!)),
    );
    emitResult({ quick: QUICK, name: 'block_cache', capacity, lookup_keys: LOOKUP_KEYS, stored_keys: STORED_KEYS, ...r, sink });
  }
}

benchJson();
benchCache();
