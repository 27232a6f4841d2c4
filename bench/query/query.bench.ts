/**
 * Query benchmark of the tiered prefix index (kv-events §5, §8; routing.md query and CAR).
 *
 * What is measured (one JSON line per result on stdout):
 *  1. `bytes_per_block`: heap + ArrayBuffer growth (process.memoryUsage heapUsed + arrayBuffers,
 *     after global.gc) of ONE directory StreamIndex (the per-stream engine-hash records and key
 *     refs, plus, being alone, its own group's copy of every key) holding 1M indexed blocks (100k
 *     with --quick), next to its own typed-array estimate (approxBytes: the per-stream part only).
 *     Baseline in the same run: a naive Map-based index of the same blocks.
 *  2. `bytes_per_holder_block`, mix `shared_50_35_15`: the shared group ResidencyIndex
 *     (shared/index) of 128 streams where 50 / 35 / 15 % of the holder-blocks (a block held by k
 *     streams counts k) are in blocks held by 1 / 8 / 64 streams; 2M holder-blocks (16M full).
 *     Target ≤ 30 B.
 *  3. `prefix_match_scaling` for S = 8, 32 and 128 streams of 16,384 blocks each (262,144 full),
 *     block_size 128: one group index built from realistic sharing (below), 8k-token prompts,
 *     all S streams candidates. `match_p50_us` / `match_p99_us` time the walk over an already
 *     computed chain (matchChain: no hashing), `lazy_match_p50_us` the services' call (hashing
 *     lazily, only while a stream still matches), `hash_p50_us` the whole §4 chain alone; the
 *     best of 5 rounds by match p50 (a shared machine's slow rounds are its neighbours). Then
 *     `prefix_match_scaling_ratio` = match p50 at 128 over 8 streams. Targets: match_p99_us ≤ 20
 *     at 128 streams, ratio ≤ 1.5.
 *
 * Load shape: 24 shared system prompts (8–32 blocks) and a pool of conversations (8–240 more
 * blocks each), drawn per stream with a Zipf-like popularity so streams share prefixes; ~20% of
 * blocks also get a Host replica. Prompts are pool conversations cut or padded with fresh tokens
 * to the target length, so hits are realistic partial prefixes. Fixed seed; all inputs are built
 * before timing. The memory lines (1, 2) use a pool of 20k conversations.
 *
 * Scaling at equal load per engine (3): the pool grows with the fleet, 20k conversations per 8
 * streams (320k at 128), and each S draws its own prompts from its own pool. The ratio is meant
 * to show how the cost of a match grows with the number of engines. A walk costs about its
 * length in blocks times the cost per block, and it runs to the longest prefix that any stream
 * holds. With one fixed pool, 128 engines hold 16× as much of the same 20k conversations, so a
 * prompt is more often cached somewhere in full and the walk is longer (45.9 vs 30.6 blocks):
 * that measures a better hit rate, not a slower index. A fleet grows because its users do, so
 * the load per engine stays the same: with the pool growing with S, the fleet holds the same
 * share of the pool at every S, and the prompt's expected depth stays the same too. What still
 * grows with S is what the index must handle: 16× the distinct keys, more holder sets, more
 * streams to narrow and to drop. `mean_blocks_walked` is printed per S so the equal depth can be
 * checked. `--fixed-pool` brings back the old shape (one 20k pool, the same prompts for every S).
 *
 * Run: node --expose-gc --import tsx bench/query/query.bench.ts [--quick] [--fixed-pool]
 * (without --expose-gc the memory lines are skipped).
 */
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { PLAIN_IDENTITY } from '../../shared/keys/cache-identity.js';
import type { BlockStoredEvent, EngineHash, KvEvent } from '../../directory-svc/decoder/kv-batch.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import type { SkipCounters } from '../../directory-svc/index/stream-index.js';
import { ResidencyIndex } from '../../shared/index/residency-index.js';
import { emitResult, hasExposedGc, isQuickRun, percentile, retainedBytes } from '../lib/bench-kit.js';
import { mix32, seededRandom } from '../lib/seeded-random.js';

const QUICK = isQuickRun();
const BLOCK_SIZE = 128;
const SCALING_STREAMS = [8, 32, 128];
const BLOCKS_PER_STREAM = QUICK ? 16_384 : 262_144;
const MEMORY_BLOCKS = QUICK ? 100_000 : 1_000_000;
const HOLDER_BLOCKS = QUICK ? 2_000_000 : 16_000_000;
const QUERIES = QUICK ? 300 : 2000;
const ROUNDS = 5;
const WARMUP = QUICK ? 30 : 200;
const PROMPT_TOKENS = 8192;
const SEED = 0x5eed1234;

// ---- deterministic inputs -------------------------------------------------------------------

/** Tokens of block `blockNo` of document `docId` (system prompt or conversation), fixed by the seed. */
function fillBlockTokens(docId: number, blockNo: number, out: Int32Array, at: number): void {
  let x = mix32(docId, blockNo) | 1;
  for (let t = 0; t < BLOCK_SIZE; t++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[at + t] = (x >>> 0) % 151_643;
  }
}

interface Conversation {
  systemPrompt: number;
  docId: number;
  blocks: number;
}

const rand = seededRandom(SEED);
const SYSTEM_PROMPTS = Array.from({ length: 24 }, (_, i) => ({ docId: 1_000_000 + i, blocks: 8 + Math.floor(rand() * 25) }));
/** Conversations per 8 streams in the scaling runs, and in the memory runs. */
const POOL = 20_000;
const FIXED_POOL = process.argv.includes('--fixed-pool');
/** Conversations of the scaling run at `streams` streams: equal load per engine (see header). */
function poolFor(streams: number): number {
  return FIXED_POOL ? POOL : (POOL * streams) / 8;
}
// Drawn in one sequence, so the first POOL are the same whatever the largest pool.
const conversations: Conversation[] = Array.from({ length: poolFor(Math.max(...SCALING_STREAMS)) }, (_, i) => ({
  systemPrompt: Math.floor(rand() ** 2 * SYSTEM_PROMPTS.length),
  docId: i,
  blocks: 8 + Math.floor(rand() * 233),
}));

/** Zipf-like draw from the first `pool` conversations: popular ones land on many streams. */
function drawConversation(r: () => number, pool = POOL): number {
  return Math.floor(r() ** 3 * pool);
}

/** Engine hash of block `blockNo` of a document; a prefix + content identity, as §11.4 asks. */
function engineHash(docId: number, blockNo: number): bigint {
  return (BigInt(mix32(docId, blockNo ^ 0x55555555)) << 32n) | BigInt(mix32(blockNo, docId));
}

/** BlockStored for blocks [from, to) of a document, chained on `parent`. */
function storedEvent(docId: number, from: number, to: number, parent: bigint | null, tier: 1 | 2): BlockStoredEvent {
  const n = to - from;
  const hashes = new BigUint64Array(n);
  const tokens = new Int32Array(n * BLOCK_SIZE);
  for (let b = 0; b < n; b++) {
    hashes[b] = engineHash(docId, from + b);
    fillBlockTokens(docId, from + b, tokens, b * BLOCK_SIZE);
  }
  return { kind: 'stored', blockHashes: hashes, parentBlockHash: parent as EngineHash | null, tokenIds: tokens, blockSize: BLOCK_SIZE, tier, outOfScope: false, identity: PLAIN_IDENTITY, reproducibleBlocks: hashes.length, group: 0, reusableGroup: true };
}

function replicaEvent(hashes: BigUint64Array): BlockStoredEvent {
  return { kind: 'stored', blockHashes: hashes, parentBlockHash: null, tokenIds: new Int32Array(0), blockSize: null, tier: 2, outOfScope: false, identity: PLAIN_IDENTITY, reproducibleBlocks: hashes.length, group: 0, reusableGroup: true };
}

/**
 * Feeds one stream's batches to `apply` until it holds `blocks` records: per conversation, the
 * system prompt once per stream (parent nil), then the conversation's blocks chained on it.
 */
function feedStream(streamNo: number, blocks: number, apply: (events: KvEvent[]) => void): number {
  const r = seededRandom(SEED ^ mix32(streamNo, 77));
  const seenConversations = new Set<number>();
  const storedPrompts = new Set<number>();
  let total = 0;
  while (total < blocks) {
    const c = drawConversation(r);
    if (seenConversations.has(c)) continue;
    seenConversations.add(c);
    const conv = conversations[c];
    const sys = SYSTEM_PROMPTS[conv.systemPrompt];
    const events: KvEvent[] = [];
    if (!storedPrompts.has(conv.systemPrompt)) {
      storedPrompts.add(conv.systemPrompt);
      events.push(storedEvent(sys.docId, 0, sys.blocks, null, 1));
      total += sys.blocks;
    }
    const n = Math.min(conv.blocks, blocks - total);
    if (n <= 0) {
      if (events.length > 0) apply(events);
      break;
    }
    // The conversation's own blocks are a separate document chained on the prompt's last block.
    const ev = storedEvent(conv.docId, 0, n, engineHash(sys.docId, sys.blocks - 1), 1);
    events.push(ev);
    if (r() < 0.2) events.push(replicaEvent(ev.blockHashes));
    total += n;
    apply(events);
  }
  return total;
}

/** A prompt of exactly `tokens` ids: a pool conversation's tokens, cut or padded with fresh ones. */
function buildPrompt(r: () => number, tokens: number, pool: number): Int32Array {
  const conv = conversations[drawConversation(r, pool)];
  const sys = SYSTEM_PROMPTS[conv.systemPrompt];
  const out = new Int32Array(tokens);
  const full = new Int32Array(BLOCK_SIZE);
  for (let i = 0; i < tokens; i += BLOCK_SIZE) {
    const b = i / BLOCK_SIZE;
    if (b < sys.blocks) fillBlockTokens(sys.docId, b, full, 0);
    else if (b - sys.blocks < conv.blocks) fillBlockTokens(conv.docId, b - sys.blocks, full, 0);
    else fillBlockTokens(2_000_000 + Math.floor(r() * 1e6), b, full, 0);
    out.set(full.subarray(0, Math.min(BLOCK_SIZE, tokens - i)), i);
  }
  return out;
}

// ---- measurement helpers ----------------------------------------------------------------------

function emit(line: Record<string, unknown>): void {
  emitResult({ bench: 'query', quick: QUICK, ...line });
}

function latencyStats(samplesNs: number[]): { p50_us: number; p99_us: number; mean_us: number; n: number } {
  const s = Float64Array.from(samplesNs).sort();
  const mean = samplesNs.reduce((a, b) => a + b, 0) / samplesNs.length;
  const us = (ns: number): number => Math.round(ns / 10) / 100;
  return { p50_us: us(percentile(s, 0.5)), p99_us: us(percentile(s, 0.99)), mean_us: us(mean), n: samplesNs.length };
}

function noSkips(): SkipCounters {
  return { outOfScope: 0, descendant: 0, orphan: 0 };
}

// ---- 1. memory per block ------------------------------------------------------------------------

async function measureMemory(hasher: ContentKeyHasher): Promise<void> {
  if (!hasExposedGc()) {
    emit({ metric: 'bytes_per_block', skipped: 'run node with --expose-gc' });
    return;
  }
  const before = retainedBytes();
  const index = new StreamIndex({ blockSize: BLOCK_SIZE, hasher, maxEntries: 1 << 24 });
  const skipped = noSkips();
  const blocks = feedStream(9999, MEMORY_BLOCKS, (events) => index.applyEvents(events, skipped));
  const after = retainedBytes();
  emit({
    metric: 'bytes_per_block',
    impl: 'stream-index',
    blocks,
    records: index.recordCount,
    entries: index.entryCount,
    heap_plus_array_buffers_per_block: Math.round(((after - before) / blocks) * 10) / 10,
    approx_bytes_per_block: Math.round((index.approxBytes() / blocks) * 10) / 10,
  });

  // Baseline: the obvious Map-based index (engine hash string → record, key hex → residency).
  const naiveBefore = retainedBytes();
  const records = new Map<string, { key: string; tiers: number }>();
  const residency = new Map<string, number>();
  const keyBuf = new Uint8Array(16);
  let parentKey: Uint8Array | null = null;
  feedStream(9999, MEMORY_BLOCKS, (events) => {
    for (const e of events) {
      if (e.kind !== 'stored') continue;
      if (e.tokenIds.length === 0) {
        for (const h of e.blockHashes) {
          const rec = records.get(h.toString());
          if (rec) {
            rec.tiers |= e.tier;
            residency.set(rec.key, (residency.get(rec.key) ?? 0) | e.tier);
          }
        }
        continue;
      }
      parentKey = e.parentBlockHash === null ? null : Buffer.from(records.get(e.parentBlockHash.toString())?.key ?? '', 'hex');
      for (let b = 0; b < e.blockHashes.length; b++) {
        hasher.keyInto(parentKey, 0, e.tokenIds, b * BLOCK_SIZE, BLOCK_SIZE, keyBuf, 0);
        const key = Buffer.from(keyBuf).toString('hex');
        records.set(e.blockHashes[b].toString(), { key, tiers: e.tier });
        residency.set(key, (residency.get(key) ?? 0) | e.tier);
        parentKey = Uint8Array.from(keyBuf);
      }
    }
  });
  const naiveAfter = retainedBytes();
  emit({
    metric: 'bytes_per_block',
    impl: 'naive-map-baseline',
    blocks: records.size,
    heap_plus_array_buffers_per_block: Math.round(((naiveAfter - naiveBefore) / records.size) * 10) / 10,
  });
  // Keep both alive until measured.
  if (index.recordCount < 0 || residency.size < 0) throw new Error('unreachable');
}

// ---- 2. bytes per holder-block of the shared group index ----------------------------------------

/** Streams holding the blocks of one sharing class, and its share of the holder-blocks. */
const SHARING_MIX: readonly { holders: number; share: number }[] = [
  { holders: 1, share: 0.5 },
  { holders: 8, share: 0.35 },
  { holders: 64, share: 0.15 },
];
const MIX_STREAMS = 128;
/** Blocks per shared document: a prefix is held by the same streams block after block. */
const MIX_DOC_BLOCKS = 32;

function measureHolderBlocks(hasher: ContentKeyHasher): void {
  if (!hasExposedGc()) {
    emit({ metric: 'bytes_per_holder_block', mix: 'shared_50_35_15', skipped: 'run node with --expose-gc' });
    return;
  }
  const before = retainedBytes();
  const index = new ResidencyIndex(BLOCK_SIZE, hasher);
  for (let s = 0; s < MIX_STREAMS; s++) index.addStream();
  const key = new Uint32Array(4);
  let x = SEED | 1;
  const next = (): number => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return x >>> 0;
  };
  let holderBlocks = 0;
  let doc = 0;
  for (const cls of SHARING_MIX) {
    const target = HOLDER_BLOCKS * cls.share;
    let held = 0;
    for (; held < target; doc++) {
      // The document's holders: a run of consecutive slots (one holder set per document start).
      const first = mix32(doc, 99) % MIX_STREAMS;
      const hostReplica = mix32(doc, 7) % 5 === 0;
      for (let b = 0; b < MIX_DOC_BLOCKS; b++) {
        key[0] = next();
        key[1] = next();
        key[2] = next();
        key[3] = next();
        for (let h = 0; h < cls.holders; h++) index.setKeyTiers((first + h) % MIX_STREAMS, key, 0, hostReplica ? 3 : 1);
        held += cls.holders;
      }
    }
    holderBlocks += held;
  }
  const after = retainedBytes();
  emit({
    metric: 'bytes_per_holder_block',
    mix: 'shared_50_35_15',
    streams: MIX_STREAMS,
    holder_blocks: holderBlocks,
    distinct_keys: index.keyCount,
    holder_sets: index.holderSetCount,
    heap_plus_array_buffers_per_holder_block: Math.round(((after - before) / holderBlocks) * 10) / 10,
    approx_bytes_per_holder_block: Math.round((index.approxBytes() / holderBlocks) * 10) / 10,
    approx_bytes_per_key: Math.round((index.approxBytes() / index.keyCount) * 10) / 10,
    target_bytes: 30,
  });
}

// ---- 3. prefix match scaling with the number of streams ---------------------------------------

/** Key chain of a conversation (system prompt then its own blocks), computed once. */
const conversationKeys = new Map<number, Uint8Array>();
function keysOf(hasher: ContentKeyHasher, c: number): Uint8Array {
  let k = conversationKeys.get(c);
  if (k === undefined) {
    const conv = conversations[c];
    const sys = SYSTEM_PROMPTS[conv.systemPrompt];
    const blocks = sys.blocks + conv.blocks;
    const tokens = new Int32Array(blocks * BLOCK_SIZE);
    for (let b = 0; b < sys.blocks; b++) fillBlockTokens(sys.docId, b, tokens, b * BLOCK_SIZE);
    for (let b = 0; b < conv.blocks; b++) fillBlockTokens(conv.docId, b, tokens, (sys.blocks + b) * BLOCK_SIZE);
    k = hasher.chain(tokens, BLOCK_SIZE);
    conversationKeys.set(c, k);
  }
  return k;
}

/** One group index of `streams` streams, each holding ~BLOCKS_PER_STREAM blocks drawn as feedStream does, from poolFor(streams). */
function buildGroup(hasher: ContentKeyHasher, streams: number): { index: ResidencyIndex; holderBlocks: number } {
  const pool = poolFor(streams);
  const index = new ResidencyIndex(BLOCK_SIZE, hasher);
  let holderBlocks = 0;
  for (let s = 0; s < streams; s++) {
    const slot = index.addStream();
    const r = seededRandom(SEED ^ mix32(s, 77));
    const seen = new Set<number>();
    let held = 0;
    while (held < BLOCKS_PER_STREAM) {
      const c = drawConversation(r, pool);
      if (seen.has(c)) continue;
      seen.add(c);
      const keys = keysOf(hasher, c);
      const tiers = new Uint8Array(keys.length >>> 4).fill(r() < 0.2 ? 3 : 1);
      index.setTiers(slot, keys, tiers);
      held += tiers.length;
    }
    holderBlocks += index.deviceBlocks(slot);
  }
  return { index, holderBlocks };
}

function measureScaling(hasher: ContentKeyHasher): void {
  const blocks = PROMPT_TOKENS / BLOCK_SIZE;
  const scratch = new Uint8Array(blocks * 16);
  const p50ByStreams = new Map<number, number>();
  const walkedByStreams = new Map<number, number>();
  for (const streams of SCALING_STREAMS) {
    // The same seed at every S: with --fixed-pool, the same prompts.
    const r = seededRandom(SEED ^ PROMPT_TOKENS);
    const prompts = Array.from({ length: QUERIES + WARMUP }, () => buildPrompt(r, PROMPT_TOKENS, poolFor(streams)));
    const chains = prompts.map((p) => hasher.chain(p, BLOCK_SIZE));
    const t0 = process.hrtime.bigint();
    const { index, holderBlocks } = buildGroup(hasher, streams);
    const buildNs = Number(process.hrtime.bigint() - t0);
    index.clearCandidates();
    for (let s = 0; s < streams; s++) index.addCandidate(s);
    // Best of ROUNDS rounds (by match p50): on a shared machine the slowest rounds are neighbours.
    let best: { m: ReturnType<typeof latencyStats>; l: ReturnType<typeof latencyStats>; h: ReturnType<typeof latencyStats> } | null = null;
    let reusable = 0;
    let streamsHit = 0;
    let walked = 0;
    for (let round = 0; round < ROUNDS; round++) {
      const matchNs: number[] = [];
      const lazyNs: number[] = [];
      const hashNs: number[] = [];
      reusable = 0;
      streamsHit = 0;
      walked = 0;
      for (let i = 0; i < prompts.length; i++) {
        const a = process.hrtime.bigint();
        index.matchChain(chains[i]!, blocks);
        const b = process.hrtime.bigint();
        index.match(prompts[i]!);
        const c = process.hrtime.bigint();
        hasher.chain(prompts[i]!, BLOCK_SIZE, scratch);
        const d = process.hrtime.bigint();
        if (i < WARMUP) continue;
        matchNs.push(Number(b - a));
        lazyNs.push(Number(c - b));
        hashNs.push(Number(d - c));
        walked += index.lastHashedBlocks;
        for (let s = 0; s < streams; s++) {
          const hit = index.deviceHitBlocks(s) + index.hostOnlyHitBlocks(s);
          reusable += hit;
          if (hit > 0) streamsHit++;
        }
      }
      const r = { m: latencyStats(matchNs), l: latencyStats(lazyNs), h: latencyStats(hashNs) };
      if (best === null || r.m.p50_us < best.m.p50_us) best = r;
    }
    const { m, l, h } = best!;
    p50ByStreams.set(streams, m.p50_us);
    const meanWalked = Math.round((walked / QUERIES) * 10) / 10;
    walkedByStreams.set(streams, meanWalked);
    emit({
      metric: 'prefix_match_scaling',
      streams,
      pool_conversations: poolFor(streams),
      blocks_per_stream: BLOCKS_PER_STREAM,
      prompt_tokens: PROMPT_TOKENS,
      holder_blocks: holderBlocks,
      distinct_keys: index.keyCount,
      holder_sets: index.holderSetCount,
      build_seconds: Math.round(buildNs / 1e7) / 100,
      match_p50_us: m.p50_us,
      match_p99_us: m.p99_us,
      lazy_match_p50_us: l.p50_us,
      lazy_match_p99_us: l.p99_us,
      hash_p50_us: h.p50_us,
      // The walk ends one block after the longest prefix of any stream (equal at every S unless --fixed-pool).
      mean_blocks_walked: meanWalked,
      match_mean_ns_per_walked_block: Math.round((m.mean_us * 1000) / (walked / QUERIES)),
      mean_reusable_blocks_per_stream: Math.round((reusable / (QUERIES * streams)) * 10) / 10,
      mean_streams_hit: Math.round((streamsHit / QUERIES) * 10) / 10,
      queries_per_round: QUERIES,
      rounds: ROUNDS,
    });
  }
  measureResetCost(hasher);
  const p8 = p50ByStreams.get(8)!;
  const p128 = p50ByStreams.get(128)!;
  emit({
    metric: 'prefix_match_scaling_ratio',
    p50_128_over_8: Math.round((p128 / p8) * 100) / 100,
    target: 1.5,
    pool: FIXED_POOL ? 'fixed' : 'per_engine',
    mean_blocks_walked_8: walkedByStreams.get(8),
    mean_blocks_walked_128: walkedByStreams.get(128),
  });
}

/**
 * `stream_reset_cost`: clearStream (a stream reset or removal, router and directory alike) of
 * one full stream in the 128-stream group, for 16 streams in turn, then the orphan sweep it
 * leaves behind driven to the end: the clear visits holder sets, not the group's keys.
 */
function measureResetCost(hasher: ContentKeyHasher): void {
  const streams = SCALING_STREAMS[SCALING_STREAMS.length - 1]!;
  const { index } = buildGroup(hasher, streams);
  const keys = index.keyCount;
  const clearNs: number[] = [];
  let visited = 0;
  let streamKeys = 0;
  for (let s = 0; s < 16; s++) {
    streamKeys += index.deviceBlocks(s);
    const a = process.hrtime.bigint();
    index.clearStream(s);
    clearNs.push(Number(process.hrtime.bigint() - a));
    visited = Math.max(visited, index.lastClearWork);
  }
  const orphaned = index.unsweptKeys;
  const a = process.hrtime.bigint();
  index.sweepOrphans(Number.MAX_SAFE_INTEGER);
  const sweepNs = Number(process.hrtime.bigint() - a);
  const c = latencyStats(clearNs);
  emit({
    metric: 'stream_reset_cost',
    streams,
    blocks_per_stream: BLOCKS_PER_STREAM,
    group_keys: keys,
    mean_stream_keys: Math.round(streamKeys / 16),
    clear_p50_us: c.p50_us,
    clear_max_us: Math.round(Math.max(...clearNs) / 100) / 10,
    holder_set_ids_visited: visited,
    orphaned_keys: orphaned,
    // Done in steps of 4 slots per later key update in the services; here in one call.
    whole_sweep_ms: Math.round(sweepNs / 1e5) / 10,
  });
}

const hasher = await ContentKeyHasher.forSeed(1024);
await measureMemory(hasher);
measureHolderBlocks(hasher);
measureScaling(hasher);
