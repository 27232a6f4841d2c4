/**
 * Mooncake's request traces (FAST'25, github.com/kvcache-ai/Mooncake FAST25-release/traces; also
 * what Dynamo's and AIPerf's replay tools read): JSON Lines, one request per line,
 *
 *   {"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [46, 47, …, 2354]}
 *
 * - timestamp: arrival in ms from the trace start (equal values: arrived together);
 * - input_length, output_length: tokens;
 * - hash_ids: one id per 512-token block of the prompt, the last one covering the partial block
 *   (ceil(input_length / 512) ids); equal ids stand for equal content, so requests share a prefix
 *   exactly as long as their leading ids are equal.
 *
 * parseMooncakeTrace checks every line strictly (each error names the file, the line number, the
 * field and what was expected) and keeps unknown fields out of the way (later tools add some).
 * Lines need not be in time order (they are sorted, stably). A prompt whose hash_ids do not cover
 * exactly ceil(input_length / 512) blocks is not an error — tools that write the format disagree
 * on it — but is counted (TraceStats.idsMismatched): its tokens follow its ids up to input_length,
 * and any tokens beyond them are its own.
 *
 * traceTokenIds turns a record into the prompt a replay sends: each hash id stands for 512
 * deterministic tokens (seeded: the same id always gives the same tokens), concatenated and cut
 * at input_length. Pure apart from readMooncakeTrace's one file read.
 */
import { readFileSync } from 'node:fs';
import { mix32 } from '../lib/seeded-random.js';

/** Tokens per hash id (Mooncake's paper and every replay tool). */
export const MOONCAKE_BLOCK_TOKENS = 512;
/** Bounds that keep a bad line from exhausting memory: far above any real request. */
export const TRACE_LIMITS = Object.freeze({ inputTokens: 2_000_000, outputTokens: 2_000_000, timestampMs: 1e15 });
/**
 * Token ids a replay uses: [1, TOKEN_ID_RANGE]. A real vocabulary's size (Qwen's is 151,646), and
 * short in JSON; collisions between two 16-token blocks of different ids are ~2⁻²⁶⁵.
 */
export const TOKEN_ID_RANGE = 100_000;

/** One request of a trace. */
export interface TraceRecord {
  /** 1-based line of the file it came from (0 for generated records). */
  readonly line: number;
  readonly timestampMs: number;
  readonly inputLength: number;
  readonly outputLength: number;
  readonly hashIds: readonly number[];
}

/** A line that is not a Mooncake request, with where it is. */
export class TraceFormatError extends Error {
  readonly class = 'trace_format' as const;
  constructor(
    readonly source: string,
    readonly line: number,
    readonly detail: string,
  ) {
    super(`trace_format: ${source}:${line}: ${detail}`);
    this.name = 'TraceFormatError';
  }
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}…` : v);
  if (Array.isArray(v)) return `an array of ${v.length}`;
  if (v === null) return 'null';
  return typeof v === 'object' ? 'an object' : String(v);
}

function integerIn(o: Record<string, unknown>, field: string, min: number, max: number, fail: (detail: string) => never): number {
  const v = o[field];
  if (typeof v !== 'number' || !Number.isInteger(v) || v < min || v > max) fail(`${field}: expected an integer in [${min}, ${max}], got ${describe(v)}`);
  return v;
}

/** One line's record; throws TraceFormatError naming the field. */
function parseLine(text: string, source: string, line: number): TraceRecord {
  const fail = (detail: string): never => {
    throw new TraceFormatError(source, line, detail);
  };
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch (e) {
    fail(`not JSON (${e instanceof Error ? e.message : String(e)})`);
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return fail(`expected a JSON object, got ${describe(v)}`);
  const o = v as Record<string, unknown>;
  const ts = o['timestamp'];
  if (typeof ts !== 'number' || !Number.isFinite(ts) || ts < 0 || ts > TRACE_LIMITS.timestampMs) fail(`timestamp: expected ms ≥ 0 (a number), got ${describe(ts)}`);
  const inputLength = integerIn(o, 'input_length', 1, TRACE_LIMITS.inputTokens, fail);
  const outputLength = integerIn(o, 'output_length', 0, TRACE_LIMITS.outputTokens, fail);
  const ids = o['hash_ids'];
  const maxIds = Math.ceil(TRACE_LIMITS.inputTokens / MOONCAKE_BLOCK_TOKENS);
  if (!Array.isArray(ids) || ids.length > maxIds) fail(`hash_ids: expected an array of at most ${maxIds} ids, got ${describe(ids)}`);
  const hashIds = ids as unknown[];
  for (let i = 0; i < hashIds.length; i++) {
    const id = hashIds[i];
    if (typeof id !== 'number' || !Number.isSafeInteger(id) || id < 0) fail(`hash_ids[${i}]: expected an integer ≥ 0, got ${describe(id)}`);
  }
  return { line, timestampMs: ts as number, inputLength, outputLength, hashIds: hashIds as number[] };
}

export interface ParseOptions {
  /** Keep only the first this many requests in time order (every line is still checked); default all. */
  readonly maxRequests?: number;
}

/**
 * Every request of `text` (JSON Lines; blank lines, a UTF-8 BOM and CRLF endings are accepted),
 * sorted by timestamp (stable). Throws TraceFormatError for the first bad line, or for a trace
 * with no request at all.
 */
export function parseMooncakeTrace(text: string, source: string, opts: ParseOptions = {}): TraceRecord[] {
  const lines = text.replace(/^\uFEFF/, '').split('\n');
  const out: TraceRecord[] = [];
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!.trim();
    if (l === '') continue;
    out.push(parseLine(l, source, i + 1));
  }
  if (out.length === 0) throw new TraceFormatError(source, 0, 'no request in the trace (expected one JSON object per line)');
  // Stable: requests that arrived together keep their order.
  out.sort((a, b) => a.timestampMs - b.timestampMs);
  return opts.maxRequests === undefined ? out : out.slice(0, opts.maxRequests);
}

/** parseMooncakeTrace of a file. */
export function readMooncakeTrace(path: string, opts: ParseOptions = {}): TraceRecord[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    throw new TraceFormatError(path, 0, `cannot read it (${e instanceof Error ? e.message : String(e)})`);
  }
  return parseMooncakeTrace(text, path, opts);
}

/** mix32 of a seed and a hash id of up to 53 bits (both halves count). */
function mixId(seed: number, id: number): number {
  return mix32(mix32(seed, id >>> 0), Math.floor(id / 4294967296));
}

/** Blocks a record's prompt spans: ceil(input_length / 512). */
export function promptBlocks(r: TraceRecord): number {
  return Math.ceil(r.inputLength / MOONCAKE_BLOCK_TOKENS);
}

/**
 * The prompt a replay sends for `r`: 512 tokens per hash id, id `h`'s token `j` a fixed function
 * of (seed, h, j), cut at input_length; tokens beyond the ids' coverage are the request's own
 * (drawn from its line and position, so they match no other request's).
 */
export function traceTokenIds(r: TraceRecord, seed: number, index: number): number[] {
  const out = new Array<number>(r.inputLength);
  const blockSeed = mix32(seed, 0x6d6f6f6e);
  const own = mix32(mix32(seed, 0x6f776e21), index);
  for (let b = 0, t = 0; t < r.inputLength; b++) {
    const base = b < r.hashIds.length ? mixId(blockSeed, r.hashIds[b]!) : own;
    for (let j = 0; j < MOONCAKE_BLOCK_TOKENS && t < r.inputLength; j++, t++) out[t] = 1 + (mix32(base, b < r.hashIds.length ? j : t) % TOKEN_ID_RANGE);
  }
  return out;
}

export interface TraceStats {
  readonly requests: number;
  /** First to last timestamp. */
  readonly spanMs: number;
  readonly inputTokens: { readonly mean: number; readonly p50: number; readonly p90: number; readonly p99: number; readonly max: number };
  readonly meanOutputTokens: number;
  /**
   * Of the prompts' 512-token blocks, the share a request finds already sent by an earlier
   * request (its leading ids equal to an earlier request's): what an infinite cache would hit.
   */
  readonly prefixReuse: number;
  /** Records whose hash_ids do not cover exactly ceil(input_length / 512) blocks. */
  readonly idsMismatched: number;
}

/** What a trace looks like (the bench prints it beside its results). */
export function traceStats(records: readonly TraceRecord[]): TraceStats {
  const lengths = records.map((r) => r.inputLength).sort((a, b) => a - b);
  const q = (p: number): number => lengths[Math.min(lengths.length - 1, Math.max(0, Math.ceil(p * lengths.length) - 1))]!;
  let input = 0;
  let output = 0;
  let blocks = 0;
  let reused = 0;
  let mismatched = 0;
  // Prefixes seen so far, each named by two chained 32-bit hashes of its ids.
  const seen = new Set<string>();
  for (const r of records) {
    input += r.inputLength;
    output += r.outputLength;
    if (r.hashIds.length !== promptBlocks(r)) mismatched++;
    let h1 = 0x811c9dc5;
    let h2 = 0x2545f491;
    let hit = true;
    const n = Math.min(r.hashIds.length, promptBlocks(r));
    for (let i = 0; i < n; i++) {
      const id = r.hashIds[i]!;
      h1 = mixId(h1, id);
      h2 = mixId(h2 ^ 0x5bd1e995, id);
      const key = `${h1}:${h2}`;
      if (hit && seen.has(key)) reused++;
      else {
        hit = false;
        seen.add(key);
      }
    }
    blocks += promptBlocks(r);
  }
  return {
    requests: records.length,
    spanMs: records.length === 0 ? 0 : records[records.length - 1]!.timestampMs - records[0]!.timestampMs,
    inputTokens: { mean: Math.round(input / records.length), p50: q(0.5), p90: q(0.9), p99: q(0.99), max: lengths[lengths.length - 1]! },
    meanOutputTokens: Math.round(output / records.length),
    prefixReuse: blocks === 0 ? 0 : reused / blocks,
    idsMismatched: mismatched,
  };
}

/** Records as Mooncake JSON Lines (what the generator's output looks like on disk). */
export function toJsonl(records: readonly TraceRecord[]): string {
  return records.map((r) => JSON.stringify({ timestamp: r.timestampMs, input_length: r.inputLength, output_length: r.outputLength, hash_ids: r.hashIds })).join('\n') + '\n';
}
