/**
 * Query benchmark of the directory's tiered prefix index (kv-events §5, §8; routing.md query).
 *
 * What is measured (one JSON line per result on stdout):
 *  1. `bytes_per_block`: heap + ArrayBuffer growth (process.memoryUsage heapUsed + arrayBuffers,
 *     after global.gc) of ONE StreamIndex holding 1M indexed blocks (100k with --quick), next to
 *     its own typed-array estimate (approxBytes). Baseline in the same run: a naive
 *     Map<string, {key, tiers}> + Map<string, residency> index of the same blocks.
 *  2. `build`: blocks/s applying realistic BlockStored batches (keys hashed, records interned) while
 *     building 64 streams × 100k blocks (8 × 10k with --quick), block_size 128, hash_seed 1024.
 *  3. `prefix_match_latency`: p50/p99/mean of StreamQuery.query over all those streams for 1k, 8k
 *     and 32k-token prompts (synchronous call, warm-up dropped). Baseline in the same run:
 *     `key_chain_latency`, the time to compute the §4 key chain alone for the same prompts (the
 *     query computes it once, then walks every stream), so noisy machines compare by the ratio.
 *
 * Load shape: 24 shared system prompts (8–32 blocks) and a pool of 20k conversations (8–240 more
 * blocks each), drawn per stream with a Zipf-like popularity so streams share prefixes; ~20% of
 * blocks also get a Host replica (tokenless cpu events). Prompts are pool conversations cut or
 * padded with fresh tokens to the target length, so hits are realistic partial prefixes.
 * Fixed seed; all inputs are built before timing.
 *
 * Run: node --expose-gc --import tsx bench/query/query.bench.ts [--quick]
 * (without --expose-gc the memory lines are skipped). Full run ≈ 1–2 min on one core.
 */
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import type { BlockStoredEvent, EngineHash, KvEvent } from '../../directory-svc/decoder/kv-batch.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import type { SkipCounters } from '../../directory-svc/index/stream-index.js';
import { StreamQuery } from '../../directory-svc/index/stream-query.js';
import type { QueryableStream } from '../../directory-svc/index/stream-query.js';
import { emitResult, hasExposedGc, isQuickRun, percentile, retainedBytes } from '../lib/bench-kit.js';
import { mix32, seededRandom } from '../lib/seeded-random.js';

const QUICK = isQuickRun();
const BLOCK_SIZE = 128;
const STREAMS = QUICK ? 8 : 64;
const BLOCKS_PER_STREAM = QUICK ? 10_000 : 100_000;
const MEMORY_BLOCKS = QUICK ? 100_000 : 1_000_000;
const QUERIES = QUICK ? 40 : 300;
const WARMUP = QUICK ? 5 : 30;
const PROMPT_TOKENS = [1024, 8192, 32768];
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
const POOL = 20_000;
const conversations: Conversation[] = Array.from({ length: POOL }, (_, i) => ({
  systemPrompt: Math.floor(rand() ** 2 * SYSTEM_PROMPTS.length),
  docId: i,
  blocks: 8 + Math.floor(rand() * 233),
}));

/** Zipf-like draw: popular conversations land on many streams. */
function drawConversation(r: () => number): number {
  return Math.floor(r() ** 3 * POOL);
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
  return { kind: 'stored', blockHashes: hashes, parentBlockHash: parent as EngineHash | null, tokenIds: tokens, blockSize: BLOCK_SIZE, tier, outOfScope: false };
}

function replicaEvent(hashes: BigUint64Array): BlockStoredEvent {
  return { kind: 'stored', blockHashes: hashes, parentBlockHash: null, tokenIds: new Int32Array(0), blockSize: null, tier: 2, outOfScope: false };
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
function buildPrompt(r: () => number, tokens: number): Int32Array {
  const conv = conversations[drawConversation(r)];
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

// ---- 2 + 3. build and query latency -------------------------------------------------------------

async function measureQueries(hasher: ContentKeyHasher): Promise<void> {
  const streams: QueryableStream[] = [];
  let built = 0;
  const t0 = process.hrtime.bigint();
  for (let s = 0; s < STREAMS; s++) {
    const index = new StreamIndex({ blockSize: BLOCK_SIZE, hasher, maxEntries: 1 << 24 });
    const skipped = noSkips();
    built += feedStream(s, BLOCKS_PER_STREAM, (events) => index.applyEvents(events, skipped));
    streams.push({
      instanceName: `10.0.${s >> 3}.${s & 7}:8000`,
      dpRank: s & 1,
      blockSize: BLOCK_SIZE,
      hashSeed: 1024n,
      synchronized: true,
      sequence: BigInt(s),
      error: '',
      index,
    });
  }
  const buildNs = Number(process.hrtime.bigint() - t0);
  emit({ metric: 'build', streams: STREAMS, blocks: built, seconds: Math.round(buildNs / 1e7) / 100, blocks_per_sec: Math.round(built / (buildNs / 1e9)) });

  const query = new StreamQuery();
  const chainOut = new Uint8Array((32768 / BLOCK_SIZE) * 16);
  for (const tokens of PROMPT_TOKENS) {
    const r = seededRandom(SEED ^ tokens);
    const prompts = Array.from({ length: QUERIES + WARMUP }, () => buildPrompt(r, tokens));
    const querySamples: number[] = [];
    const chainSamples: number[] = [];
    let reusableBlocks = 0;
    let streamsHit = 0;
    for (let i = 0; i < prompts.length; i++) {
      const a = process.hrtime.bigint();
      const res = query.query(prompts[i], streams);
      const b = process.hrtime.bigint();
      hasher.chain(prompts[i], BLOCK_SIZE, chainOut);
      const c = process.hrtime.bigint();
      if (i < WARMUP) continue;
      querySamples.push(Number(b - a));
      chainSamples.push(Number(c - b));
      for (const m of res.matches) {
        reusableBlocks += m.reusable_prefix_tokens / BLOCK_SIZE;
        if (m.reusable_prefix_tokens > 0) streamsHit++;
      }
    }
    const q = latencyStats(querySamples);
    const k = latencyStats(chainSamples);
    emit({
      metric: 'prefix_match_latency',
      prompt_tokens: tokens,
      streams: STREAMS,
      blocks_per_stream: BLOCKS_PER_STREAM,
      ...q,
      mean_reusable_blocks_per_stream: Math.round((reusableBlocks / (QUERIES * STREAMS)) * 10) / 10,
      mean_streams_hit: Math.round((streamsHit / QUERIES) * 10) / 10,
    });
    emit({ metric: 'key_chain_latency', baseline: true, prompt_tokens: tokens, ...k, query_over_chain_p50: Math.round((q.p50_us / k.p50_us) * 100) / 100 });
  }
}

const hasher = await ContentKeyHasher.forSeed(1024);
await measureMemory(hasher);
await measureQueries(hasher);
