/**
 * The model's tokenizer (tokenization.md §3): Hugging Face's native `tokenizers` bindings, chosen
 * by bench/tokenize/tokenizer-libs.bench.ts (README "Tokenization"): as fast as the pure-JS ports
 * on this machine and it encodes on libuv's thread pool, so an 8k-token chat never holds the
 * event loop that serves every other request.
 *
 * Rendered chats go through `encodeRendered`: the text is cut after each special token (safe cuts,
 * special-token-segments.ts) and each piece's ids come from a bounded LRU (`lru-cache`, by bytes) or one
 * batch encode of the misses. Multi-turn chats resend the whole history, so turn n+1 encodes only what
 * turn n did not have; the ids are exactly those of encoding the whole text (unit-tested).
 */
import { Tokenizer } from 'tokenizers';
import { LRUCache } from 'lru-cache';
import { ConfigError } from '../config/config-error.js';
import { planSegments, type SegmentPlan } from './special-token-segments.js';
import { commonPrefixLength } from './common-prefix.js';

/** Default cache budget: ids (4 B each) plus keys (2 B per UTF-16 unit), about 64 MiB. */
export const DEFAULT_SEGMENT_CACHE_BYTES = 64 * 1024 * 1024;

export interface SegmentCacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
  /** Pieces taken from the conversation's previous turn, without a cache lookup. */
  readonly reused: number;
}

/** Several caches' counters together (chat threads and the event loop each keep one). */
export function sumCacheStats(all: readonly SegmentCacheStats[]): SegmentCacheStats {
  let entries = 0;
  let bytes = 0;
  let hits = 0;
  let misses = 0;
  let reused = 0;
  for (const c of all) {
    entries += c.entries;
    bytes += c.bytes;
    hits += c.hits;
    misses += c.misses;
    reused += c.reused;
  }
  return { entries, bytes, hits, misses, reused };
}

export class TokenEncoder {
  private readonly cache: LRUCache<string, Uint32Array>;
  /** Per conversation key, its last rendered turn (half the byte budget). */
  private readonly turns: LRUCache<number, RenderedTurn>;
  private hits = 0;
  private misses = 0;
  private reused = 0;

  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly segments: SegmentPlan | null,
    private readonly maxCacheBytes: number,
    /** Vocabulary size with added tokens. */
    readonly vocabSize: number,
  ) {
    // lru-cache needs a positive maxSize; a 0 budget never reaches the cache (encodeRendered encodes whole).
    const turnBytes = Math.floor(maxCacheBytes / 2);
    this.cache = new LRUCache<string, Uint32Array>({ maxSize: Math.max(1, maxCacheBytes - turnBytes), sizeCalculation: (ids, piece) => entryBytes(piece, ids) });
    this.turns = new LRUCache<number, RenderedTurn>({ maxSize: Math.max(1, turnBytes), sizeCalculation: turnBytesOf });
  }

  /** Parses `tokenizer.json`; a file the library rejects is a ConfigError naming it. */
  static fromJson(json: string, path: string, maxCacheBytes = DEFAULT_SEGMENT_CACHE_BYTES): TokenEncoder {
    let tokenizer: Tokenizer;
    try {
      tokenizer = Tokenizer.fromString(json);
    } catch (e) {
      const reason = `not a loadable tokenizer (${e instanceof Error ? e.message.split('\n', 1)[0] : 'error'})`;
      throw new ConfigError('--tokenizer', reason, `invalid --tokenizer: ${path}: ${reason}`);
    }
    const segments = planSegments(JSON.parse(json) as Record<string, unknown>);
    return new TokenEncoder(tokenizer, segments, maxCacheBytes, tokenizer.getVocabSize(true));
  }

  /** True when rendered chats are encoded piecewise through the cache. */
  get segmented(): boolean {
    return this.segments !== null;
  }

  get cacheStats(): SegmentCacheStats {
    return { entries: this.cache.size, bytes: this.cache.calculatedSize + this.turns.calculatedSize, hits: this.hits, misses: this.misses, reused: this.reused };
  }

  /** `encode(text)` as HF does, special tokens added or not (completions prompts add them). */
  async encode(text: string, addSpecialTokens: boolean): Promise<number[]> {
    return (await this.tokenizer.encode(text, null, { addSpecialTokens })).getIds();
  }

  /** A rendered chat, without adding special tokens (the template holds them): cached pieces. */
  async encodeRendered(text: string): Promise<number[]> {
    if (this.segments === null || this.maxCacheBytes === 0) return this.encode(text, false);
    return idsToArray(await this.encodeRenderedIds(text));
  }

  /**
   * `encodeRendered` as a typed array (chat threads transfer it without copying). With the key of
   * its conversation (ChatRequest `conversation`), the pieces it shares with that
   * conversation's previous turn are taken from that turn's ids, without cutting, hashing or
   * looking them up again: a multi-turn chat resends its whole history, and that lookup was most
   * of a cached encode.
   */
  async encodeRenderedIds(text: string, conversation = -1): Promise<Uint32Array> {
    if (this.segments === null || this.maxCacheBytes === 0) return Uint32Array.from(await this.encode(text, false));
    const prev = conversation >= 0 ? this.turns.get(conversation) : undefined;
    const reused = prev === undefined ? 0 : reusablePieces(prev, text);
    const from = reused === 0 ? 0 : prev!.charEnds[reused - 1]!;
    const pieces = this.segments.split(from === 0 ? text : text.slice(from));
    const found = await this.piecesIds(pieces);
    this.reused += reused;
    const prefixIds = reused === 0 ? 0 : prev!.idEnds[reused - 1]!;
    let total = prefixIds;
    for (const ids of found) total += ids.length;
    const out = new Uint32Array(total);
    if (prefixIds > 0) out.set(prev!.ids.subarray(0, prefixIds));
    const charEnds = new Int32Array(reused + pieces.length);
    const idEnds = new Int32Array(reused + pieces.length);
    if (reused > 0) {
      charEnds.set(prev!.charEnds.subarray(0, reused));
      idEnds.set(prev!.idEnds.subarray(0, reused));
    }
    let at = prefixIds;
    let charAt = from;
    for (let k = 0; k < pieces.length; k++) {
      const ids = found[k]!;
      out.set(ids, at);
      at += ids.length;
      charAt += pieces[k]!.length;
      charEnds[reused + k] = charAt;
      idEnds[reused + k] = at;
    }
    // A copy: `out` goes to the caller, and a chat thread transfers (detaches) it.
    if (conversation >= 0) this.turns.set(conversation, { text, ids: out.slice(), charEnds, idEnds });
    return out;
  }

  /** Each piece's ids: from the segment cache, or one batch encode of the misses (then cached). */
  private async piecesIds(pieces: readonly string[]): Promise<Uint32Array[]> {
    const found: (Uint32Array | undefined)[] = new Array<Uint32Array | undefined>(pieces.length);
    const missing: number[] = [];
    for (let i = 0; i < pieces.length; i++) {
      const entry = this.cache.get(pieces[i]!);
      if (entry === undefined) {
        missing.push(i);
        continue;
      }
      found[i] = entry;
      this.hits++;
    }
    if (missing.length > 0) {
      this.misses += missing.length;
      const encodings = await this.tokenizer.encodeBatch(
        missing.map((i) => pieces[i]!),
        { addSpecialTokens: false },
      );
      for (let k = 0; k < missing.length; k++) {
        const i = missing[k]!;
        const ids = Uint32Array.from(encodings[k]!.getIds());
        found[i] = ids;
        // lru-cache refuses a piece above the whole budget by itself (its maxEntrySize is maxSize).
        this.cache.set(pieces[i]!, ids);
      }
    }
    return found as Uint32Array[];
  }
}

/** A conversation's last rendered turn: its text, ids, and where each piece ends in both. */
interface RenderedTurn {
  readonly text: string;
  readonly ids: Uint32Array;
  readonly charEnds: Int32Array;
  readonly idEnds: Int32Array;
}

/**
 * How many of `prev`'s pieces start `text` too and stay cut where they are: those ending inside
 * the common prefix, except `prev`'s last piece, which ends at its text's end rather than right
 * after a special token. A cut after a special token inside the common prefix is a cut of `text`
 * as well: no added token overlaps another (special-token-segments.ts), so no match can start
 * before it and run past it.
 */
function reusablePieces(prev: RenderedTurn, text: string): number {
  const common = commonPrefixLength(prev.text, text);
  let lo = 0;
  let hi = prev.charEnds.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >>> 1;
    if (prev.charEnds[mid - 1]! <= common) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

/** Token ids as the number[] routing requests carry. */
export function idsToArray(ids: Uint32Array): number[] {
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i]!;
  return out;
}

function turnBytesOf(t: RenderedTurn): number {
  return t.text.length * 2 + t.ids.byteLength + t.charEnds.byteLength + t.idEnds.byteLength + 64;
}

function entryBytes(piece: string, ids: Uint32Array): number {
  return piece.length * 2 + ids.byteLength + 64;
}
