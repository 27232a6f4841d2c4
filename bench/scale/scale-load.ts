/**
 * The scale benchmark's load (kv-events §3, §6, §11), generated on demand from a fixed seed so a
 * publisher holds no per-block state: rank r's state after `b` batches is exactly its first `b`
 * batches, and block j of document d always has the same engine hash and token ids.
 *
 * Shape: each rank holds `blocksPerRank / blocksPerPrompt` prompts of `blocksPerPrompt` blocks
 * (256 × 128 tokens = 32k tokens), stored as batches of `blocksPerBatch` chained blocks (one
 * map-form BlockStored on Device; parent = the prompt's previous block, nil for its first).
 * Prompt p of rank r is document p + (r mod 4) · prompts/4, so every document is held by one to
 * four rank classes (32–128 streams at full scale) and queries hit many streams, as a popular
 * system prompt would. Documents are distinct within a rank, so a full rank holds exactly
 * `blocksPerRank` records, entries and content keys (§5.2).
 *
 * Encoding is by hand into byte buffers (the msgpack forms the simulator's WireEncoder emits:
 * uint64 hashes, map events, §6 block maps) because 33M blocks as JS objects would not fit; the
 * batch and chunk envelopes come from tools/engine-sim/wire-encoding.ts. Pure: no sockets.
 */
import { WireEncoder } from '../../tools/engine-sim/wire-encoding.js';
import { mix32 } from '../lib/seeded-random.js';

export interface ScaleShape {
  blockSize: number;
  blocksPerBatch: number;
  blocksPerPrompt: number;
  blocksPerRank: number;
}

/** §9 defaults the benchmark keeps: block_size 128, max_message_bytes 8 MiB. */
export const SCALE_BLOCK_SIZE = 128;
export const SCALE_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

/**
 * The shape for `blocksPerRank` blocks per rank (a multiple of 4 × 256): 64-block batches
 * (~43 KB payloads), 256-block (32k-token) prompts.
 */
export function scaleShape(blocksPerRank: number): ScaleShape {
  if (blocksPerRank % 1024 !== 0) throw new RangeError(`blocks per rank must be a multiple of 1024, got ${blocksPerRank}`);
  return { blockSize: SCALE_BLOCK_SIZE, blocksPerBatch: 64, blocksPerPrompt: 256, blocksPerRank };
}

/** Token ids are uniform in [0, VOCABULARY) (Qwen-sized: mostly uint32 on the wire). */
const VOCABULARY = 151_643;
/** Rank classes sharing documents (see header). */
const RANK_CLASSES = 4;

export function promptsPerRank(shape: ScaleShape): number {
  return shape.blocksPerRank / shape.blocksPerPrompt;
}

export function batchesPerRank(shape: ScaleShape): number {
  return shape.blocksPerRank / shape.blocksPerBatch;
}

/** Document held as prompt `prompt` by rank `rank`. */
export function documentOf(shape: ScaleShape, rank: number, prompt: number): number {
  return prompt + (rank % RANK_CLASSES) * (promptsPerRank(shape) / RANK_CLASSES);
}

/** Documents held by some rank: [0, documentCount). */
export function documentCount(shape: ScaleShape): number {
  return promptsPerRank(shape) * (1 + (RANK_CLASSES - 1) / RANK_CLASSES);
}

/** Engine hash halves of block `block` of document `doc` (§11.4: names content and prefix). */
export function hashLo(seed: number, doc: number, block: number): number {
  return mix32(doc ^ seed, block);
}
export function hashHi(seed: number, doc: number, block: number): number {
  return mix32(block ^ 0x5bd1e995, doc + seed);
}

/** Writes the `blockSize` token ids of block `block` of document `doc` into out[at..]. */
export function fillTokens(seed: number, doc: number, block: number, blockSize: number, out: Int32Array, at: number): void {
  let x = mix32(doc + 0x1234567 * seed, block) | 1;
  for (let t = 0; t < blockSize; t++) {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    out[at + t] = (x >>> 0) % VOCABULARY;
  }
}

// ---- hand-rolled msgpack writer (only the forms used here) --------------------------------------

const utf8 = new TextEncoder();

function str(s: string): Uint8Array {
  const b = utf8.encode(s);
  const out = new Uint8Array(1 + b.length);
  out[0] = 0xa0 | b.length;
  out.set(b, 1);
  return out;
}

const K_TYPE = str('type');
const V_BLOCK_STORED = str('BlockStored');
const K_BLOCK_HASHES = str('block_hashes');
const K_PARENT = str('parent_block_hash');
const K_TOKEN_IDS = str('token_ids');
const K_BLOCK_SIZE = str('block_size');
const K_LORA_ID = str('lora_id');
const K_MEDIUM = str('medium');
const V_GPU = str('gpu');
const K_LORA_NAME = str('lora_name');
const K_EXTRA_KEYS = str('extra_keys');
const K_BLOCK_HASH = str('block_hash');
const K_MEDIA = str('media');

/** A cursor over one output buffer. */
class Writer {
  pos = 0;
  constructor(readonly buf: Uint8Array) {}

  bytes(b: Uint8Array): void {
    this.buf.set(b, this.pos);
    this.pos += b.length;
  }

  byte(v: number): void {
    this.buf[this.pos++] = v;
  }

  uint(v: number): void {
    const b = this.buf;
    let p = this.pos;
    if (v < 0x80) b[p++] = v;
    else if (v < 0x100) {
      b[p++] = 0xcc;
      b[p++] = v;
    } else if (v < 0x10000) {
      b[p++] = 0xcd;
      b[p++] = v >>> 8;
      b[p++] = v & 0xff;
    } else {
      b[p++] = 0xce;
      b[p++] = v >>> 24;
      b[p++] = (v >>> 16) & 0xff;
      b[p++] = (v >>> 8) & 0xff;
      b[p++] = v & 0xff;
    }
    this.pos = p;
  }

  /** uint64 `cf` form (what the simulator sends for a hash ≥ 2^32), hi/lo uint32 halves. */
  hash(lo: number, hi: number): void {
    const b = this.buf;
    let p = this.pos;
    b[p++] = 0xcf;
    b[p++] = hi >>> 24;
    b[p++] = (hi >>> 16) & 0xff;
    b[p++] = (hi >>> 8) & 0xff;
    b[p++] = hi & 0xff;
    b[p++] = lo >>> 24;
    b[p++] = (lo >>> 16) & 0xff;
    b[p++] = (lo >>> 8) & 0xff;
    b[p++] = lo & 0xff;
    this.pos = p;
  }

  arrayHeader(n: number): void {
    if (n < 16) this.byte(0x90 | n);
    else if (n < 0x10000) {
      this.byte(0xdc);
      this.byte(n >>> 8);
      this.byte(n & 0xff);
    } else {
      this.byte(0xdd);
      this.byte(n >>> 24);
      this.byte((n >>> 16) & 0xff);
      this.byte((n >>> 8) & 0xff);
      this.byte(n & 0xff);
    }
  }
}

/** Upper bound of one §6 block map's bytes (every token as uint32). */
export function maxSnapshotBlockBytes(blockSize: number): number {
  return 1 + 1 + K_BLOCK_HASH.length + 9 + K_PARENT.length + 9 + K_TOKEN_IDS.length + 5 + 5 * blockSize + K_MEDIA.length + 1 + V_GPU.length;
}

/** One document's token ids, encoded once: block b's msgpack ints are bytes[offsets[b] .. offsets[b+1]). */
interface EncodedDocument {
  bytes: Uint8Array;
  offsets: Uint32Array;
}

/**
 * Encodes a rank's live batches and snapshot chunks. One per publisher process; its scratch
 * buffers are reused, every returned payload is a fresh copy (zeromq keeps it until sent).
 * Each document's token ids are encoded once and then copied (a few hundred MB per process at
 * full scale, publisher side only), so the publishers are never the bottleneck being measured.
 */
export class ScaleEncoder {
  private readonly wire = new WireEncoder();
  private readonly tokens: Int32Array;
  private readonly eventBuf: Uint8Array;
  private readonly blockBuf: Uint8Array;
  private readonly blocksPerChunk: number;
  private readonly documents = new Map<number, EncodedDocument>();

  constructor(
    private readonly shape: ScaleShape,
    private readonly seed: number,
    maxMessageBytes: number,
  ) {
    this.tokens = new Int32Array(shape.blockSize);
    this.eventBuf = new Uint8Array(256 + shape.blocksPerBatch * (9 + 5 * shape.blockSize));
    const perBlock = maxSnapshotBlockBytes(shape.blockSize);
    // The envelope and the array header take well under 64 bytes (chunkOverheadBytes).
    this.blocksPerChunk = Math.floor((maxMessageBytes - 64) / perBlock);
    this.blockBuf = new Uint8Array(this.blocksPerChunk * perBlock);
  }

  private document(doc: number): EncodedDocument {
    let d = this.documents.get(doc);
    if (d !== undefined) return d;
    const { blockSize, blocksPerPrompt } = this.shape;
    const w = new Writer(new Uint8Array(blocksPerPrompt * blockSize * 5));
    const offsets = new Uint32Array(blocksPerPrompt + 1);
    for (let b = 0; b < blocksPerPrompt; b++) {
      fillTokens(this.seed, doc, b, blockSize, this.tokens, 0);
      for (let k = 0; k < blockSize; k++) w.uint(this.tokens[k]);
      offsets[b + 1] = w.pos;
    }
    d = { bytes: w.buf.slice(0, w.pos), offsets };
    this.documents.set(doc, d);
    return d;
  }

  /** Where batch `batch` of rank `rank` sits: its document and first block. */
  private locate(rank: number, batch: number): { doc: number; first: number } {
    const batchesPerPrompt = this.shape.blocksPerPrompt / this.shape.blocksPerBatch;
    const prompt = Math.floor(batch / batchesPerPrompt);
    return { doc: documentOf(this.shape, rank, prompt), first: (batch % batchesPerPrompt) * this.shape.blocksPerBatch };
  }

  /** §3.1 array batch `[ts, [BlockStored], dpRank]` for batch `batch` of rank `rank`. */
  liveBatch(rank: number, dpRank: number, batch: number, ts: number): Uint8Array {
    const { blockSize, blocksPerBatch } = this.shape;
    const { doc, first } = this.locate(rank, batch);
    const encoded = this.document(doc);
    const w = new Writer(this.eventBuf);
    w.byte(0x89);
    w.bytes(K_TYPE);
    w.bytes(V_BLOCK_STORED);
    w.bytes(K_BLOCK_HASHES);
    w.arrayHeader(blocksPerBatch);
    for (let b = 0; b < blocksPerBatch; b++) w.hash(hashLo(this.seed, doc, first + b), hashHi(this.seed, doc, first + b));
    w.bytes(K_PARENT);
    if (first === 0) w.byte(0xc0);
    else w.hash(hashLo(this.seed, doc, first - 1), hashHi(this.seed, doc, first - 1));
    w.bytes(K_TOKEN_IDS);
    w.arrayHeader(blocksPerBatch * blockSize);
    // The batch's blocks are consecutive in the document, so their token ids are one copy.
    w.bytes(encoded.bytes.subarray(encoded.offsets[first], encoded.offsets[first + blocksPerBatch]));
    w.bytes(K_BLOCK_SIZE);
    w.uint(blockSize);
    w.bytes(K_LORA_ID);
    w.byte(0xc0);
    w.bytes(K_MEDIUM);
    w.bytes(V_GPU);
    w.bytes(K_LORA_NAME);
    w.byte(0xc0);
    w.bytes(K_EXTRA_KEYS);
    w.byte(0xc0);
    return this.wire.encodeBatch(ts, [this.eventBuf.subarray(0, w.pos)], dpRank);
  }

  /** Number of §6 chunks for a state of `blocks` blocks (at least one, even when empty). */
  chunkCount(blocks: number): number {
    return Math.max(1, Math.ceil(blocks / this.blocksPerChunk));
  }

  /**
   * §6 chunk `chunk` of rank `rank`'s state after its first `batches` batches: blocks in
   * parent-first order (the order they were stored), each within max_message_bytes.
   */
  snapshotChunk(rank: number, dpRank: number, batches: number, chunk: number): Uint8Array {
    const { blockSize, blocksPerBatch, blocksPerPrompt } = this.shape;
    const total = batches * blocksPerBatch;
    const from = chunk * this.blocksPerChunk;
    const to = Math.min(total, from + this.blocksPerChunk);
    const w = new Writer(this.blockBuf);
    const ends: number[] = [];
    for (let i = from; i < to; i++) {
      const prompt = Math.floor(i / blocksPerPrompt);
      const block = i % blocksPerPrompt;
      const doc = documentOf(this.shape, rank, prompt);
      const encoded = this.document(doc);
      w.byte(0x84);
      w.bytes(K_BLOCK_HASH);
      w.hash(hashLo(this.seed, doc, block), hashHi(this.seed, doc, block));
      w.bytes(K_PARENT);
      if (block === 0) w.byte(0xc0);
      else w.hash(hashLo(this.seed, doc, block - 1), hashHi(this.seed, doc, block - 1));
      w.bytes(K_TOKEN_IDS);
      w.arrayHeader(blockSize);
      w.bytes(encoded.bytes.subarray(encoded.offsets[block], encoded.offsets[block + 1]));
      w.bytes(K_MEDIA);
      w.byte(0x91);
      w.bytes(V_GPU);
      ends.push(w.pos);
    }
    const blocks: Uint8Array[] = new Array<Uint8Array>(ends.length);
    let start = 0;
    for (let i = 0; i < ends.length; i++) {
      blocks[i] = this.blockBuf.subarray(start, ends[i]);
      start = ends[i];
    }
    return this.wire.encodeChunk(dpRank, blockSize, blocks, 0, blocks.length);
  }
}

/**
 * A query prompt of exactly `tokens` ids: document `doc`'s first blocks for a `sharedFraction`
 * of the complete blocks, then fresh tokens (a partial prefix hit, as real traffic gives).
 */
export function buildPrompt(seed: number, shape: ScaleShape, doc: number, tokens: number, sharedFraction: number, freshDoc: number): Int32Array {
  const out = new Int32Array(tokens);
  const bs = shape.blockSize;
  const block = new Int32Array(bs);
  const shared = Math.floor((tokens / bs) * sharedFraction);
  for (let i = 0; i < tokens; i += bs) {
    const b = i / bs;
    if (b < shared && b < shape.blocksPerPrompt) fillTokens(seed, doc, b, bs, block, 0);
    else fillTokens(seed, freshDoc, b, bs, block, 0);
    out.set(block.subarray(0, Math.min(bs, tokens - i)), i);
  }
  return out;
}
