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

/** Default cache budget: ids (4 B each) plus keys (2 B per UTF-16 unit), about 64 MiB. */
export const DEFAULT_SEGMENT_CACHE_BYTES = 64 * 1024 * 1024;

export interface SegmentCacheStats {
  readonly entries: number;
  readonly bytes: number;
  readonly hits: number;
  readonly misses: number;
}

export class TokenEncoder {
  private readonly cache: LRUCache<string, Uint32Array>;
  private hits = 0;
  private misses = 0;

  private constructor(
    private readonly tokenizer: Tokenizer,
    private readonly segments: SegmentPlan | null,
    private readonly maxCacheBytes: number,
    /** Vocabulary size with added tokens. */
    readonly vocabSize: number,
  ) {
    // lru-cache needs a positive maxSize; a 0 budget never reaches the cache (encodeRendered encodes whole).
    this.cache = new LRUCache<string, Uint32Array>({ maxSize: Math.max(1, maxCacheBytes), sizeCalculation: (ids, piece) => entryBytes(piece, ids) });
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
    return { entries: this.cache.size, bytes: this.cache.calculatedSize, hits: this.hits, misses: this.misses };
  }

  /** `encode(text)` as HF does, special tokens added or not (completions prompts add them). */
  async encode(text: string, addSpecialTokens: boolean): Promise<number[]> {
    return (await this.tokenizer.encode(text, null, { addSpecialTokens })).getIds();
  }

  /** A rendered chat, without adding special tokens (the template holds them): cached pieces. */
  async encodeRendered(text: string): Promise<number[]> {
    if (this.segments === null || this.maxCacheBytes === 0) return this.encode(text, false);
    return idsToArray(await this.encodePieces(this.segments.split(text)));
  }

  /** `encodeRendered` as a typed array (chat threads transfer it without copying). */
  async encodeRenderedIds(text: string): Promise<Uint32Array> {
    if (this.segments === null || this.maxCacheBytes === 0) return Uint32Array.from(await this.encode(text, false));
    return this.encodePieces(this.segments.split(text));
  }

  private async encodePieces(pieces: readonly string[]): Promise<Uint32Array> {
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
    let total = 0;
    for (const ids of found) total += ids!.length;
    const out = new Uint32Array(total);
    let at = 0;
    for (const ids of found) {
      out.set(ids!, at);
      at += ids!.length;
    }
    return out;
  }

}

/** Token ids as the number[] routing requests carry. */
export function idsToArray(ids: Uint32Array): number[] {
  const out = new Array<number>(ids.length);
  for (let i = 0; i < ids.length; i++) out[i] = ids[i]!;
  return out;
}

function entryBytes(piece: string, ids: Uint32Array): number {
  return piece.length * 2 + ids.byteLength + 64;
}
