/**
 * A lossless JSON parser for request bodies (kvcm-meta §1.3: "plain JSON.parse is
 * insufficient"). Numbers stay raw text (`JsonNumber`) so int64 values such as
 * 9007199254740993 survive exactly; the typed reader converts them per field. Objects become
 * `Map`s so a key such as `__proto__` is plain data. Strict RFC 8259 grammar, every escape and
 * surrogate pair decoded, lone surrogates rejected, duplicate keys rejected (a field given twice
 * is as ambiguous as §1.3's two spellings), nesting and size bounded. Every failure is a
 * `JsonParseError` with the character offset; nothing else is thrown. Kept over `lossless-json`:
 * that package, shaped to this output, parses request bodies 1.6–4.4x slower
 * (bench/meta/libraries.bench.ts, README "MetaService libraries").
 */

/** A JSON number kept as its exact source text (RFC 8259 number grammar). */
export class JsonNumber {
  constructor(readonly raw: string) {}
}

export type JsonObject = Map<string, JsonValue>;
export type JsonValue = null | boolean | string | JsonNumber | JsonValue[] | JsonObject;

export class JsonParseError extends Error {
  readonly class = 'json_parse' as const;
  constructor(readonly reason: string, readonly offset: number) {
    super(`json_parse: ${reason} at offset ${offset}`);
  }
}

export interface JsonParseLimits {
  /** Deepest allowed nesting of arrays/objects (protobuf's default recursion limit is 100). */
  readonly maxDepth: number;
  /** Longest accepted text in UTF-16 code units. */
  readonly maxChars: number;
}

export const DEFAULT_JSON_LIMITS: JsonParseLimits = { maxDepth: 100, maxChars: 64 * 1024 * 1024 };

const enum Ch {
  Tab = 0x09,
  Lf = 0x0a,
  Cr = 0x0d,
  Space = 0x20,
  Quote = 0x22,
  Plus = 0x2b,
  Comma = 0x2c,
  Minus = 0x2d,
  Dot = 0x2e,
  Slash = 0x2f,
  D0 = 0x30,
  D1 = 0x31,
  D9 = 0x39,
  Colon = 0x3a,
  UpperE = 0x45,
  LBracket = 0x5b,
  Backslash = 0x5c,
  RBracket = 0x5d,
  LowerE = 0x65,
  LBrace = 0x7b,
  RBrace = 0x7d,
}

/** Parse one JSON text; surrounding whitespace is allowed, anything else after it is not. */
export function parseJson(text: string, limits: JsonParseLimits = DEFAULT_JSON_LIMITS): JsonValue {
  if (text.length > limits.maxChars) throw new JsonParseError(`text longer than ${limits.maxChars} characters`, 0);
  const p = new Parser(text, limits.maxDepth);
  p.skipWs();
  if (p.pos >= text.length) throw new JsonParseError('empty input', 0);
  const v = p.value(0);
  p.skipWs();
  if (p.pos < text.length) throw new JsonParseError('trailing characters after the JSON value', p.pos);
  return v;
}

/**
 * Longest string interned by the parser (keys and short medium/name values). V8 copies a
 * substring shorter than 13 characters but makes a longer one a view of its parent, and a
 * table entry that is a view would keep a whole request body alive.
 */
const INTERN_MAX_CHARS = 12;
const INTERN_SLOTS = 1024;
/**
 * Recently parsed short strings, by a hash of their length and a few characters. A request
 * repeats the same keys and short values (`block_add`, `medium`, `gpu`, `tp0`) thousands of times;
 * reusing one string instead of slicing a copy each time takes ~40% off the parse tree. Strings
 * are immutable values, so sharing them is invisible to callers; a slot holds whatever was
 * parsed last there, so memory stays bounded.
 */
const internTable: (string | undefined)[] = new Array<string | undefined>(INTERN_SLOTS);

class Parser {
  pos = 0;
  /** Scratch for array elements (see `array`). */
  private readonly stack: JsonValue[] = [];
  constructor(private readonly s: string, private readonly maxDepth: number) {}

  /** s[start, end) as a string, shared with an earlier equal short string when one is at hand. */
  private slice(start: number, end: number): string {
    const s = this.s;
    const len = end - start;
    if (len > INTERN_MAX_CHARS || len === 0) return s.slice(start, end);
    const h = (len * 31 + s.charCodeAt(start) * 7 + s.charCodeAt(end - 1) * 13 + s.charCodeAt(start + (len >> 1))) & (INTERN_SLOTS - 1);
    const cached = internTable[h];
    if (cached !== undefined && cached.length === len && s.startsWith(cached, start)) return cached;
    const v = s.slice(start, end);
    internTable[h] = v;
    return v;
  }

  skipWs(): void {
    const s = this.s;
    let i = this.pos;
    while (i < s.length) {
      const c = s.charCodeAt(i);
      if (c !== Ch.Space && c !== Ch.Lf && c !== Ch.Cr && c !== Ch.Tab) break;
      i++;
    }
    this.pos = i;
  }

  private fail(reason: string, at = this.pos): never {
    throw new JsonParseError(reason, at);
  }

  value(depth: number): JsonValue {
    const c = this.s.charCodeAt(this.pos);
    switch (c) {
      case Ch.LBrace:
        return this.object(depth + 1);
      case Ch.LBracket:
        return this.array(depth + 1);
      case Ch.Quote:
        return this.string();
      case 0x74: // t
        return this.literal('true', true);
      case 0x66: // f
        return this.literal('false', false);
      case 0x6e: // n
        return this.literal('null', null);
      default:
        if (c === Ch.Minus || (c >= Ch.D0 && c <= Ch.D9)) return this.number();
        if (Number.isNaN(c)) this.fail('unexpected end of input');
        return this.fail(`unexpected character ${JSON.stringify(this.s[this.pos])}`);
    }
  }

  private literal<T>(word: string, v: T): T {
    if (!this.s.startsWith(word, this.pos)) this.fail('invalid literal');
    this.pos += word.length;
    return v;
  }

  private object(depth: number): JsonObject {
    if (depth > this.maxDepth) this.fail(`nesting deeper than ${this.maxDepth}`);
    const out: JsonObject = new Map();
    this.pos++; // {
    this.skipWs();
    if (this.s.charCodeAt(this.pos) === Ch.RBrace) {
      this.pos++;
      return out;
    }
    for (;;) {
      if (this.s.charCodeAt(this.pos) !== Ch.Quote) this.fail('expected a string key');
      const keyAt = this.pos;
      const key = this.string();
      this.skipWs();
      if (this.s.charCodeAt(this.pos) !== Ch.Colon) this.fail("expected ':'");
      this.pos++;
      this.skipWs();
      const v = this.value(depth);
      if (out.has(key)) this.fail(`duplicate key ${JSON.stringify(key)}`, keyAt);
      out.set(key, v);
      this.skipWs();
      const c = this.s.charCodeAt(this.pos);
      if (c === Ch.Comma) {
        this.pos++;
        this.skipWs();
        continue;
      }
      if (c === Ch.RBrace) {
        this.pos++;
        return out;
      }
      this.fail(Number.isNaN(c) ? 'unexpected end of input' : "expected ',' or '}'");
    }
  }

  private array(depth: number): JsonValue[] {
    if (depth > this.maxDepth) this.fail(`nesting deeper than ${this.maxDepth}`);
    this.pos++; // [
    this.skipWs();
    if (this.s.charCodeAt(this.pos) === Ch.RBracket) {
      this.pos++;
      return [];
    }
    // Elements go on the shared stack and leave it as one exact-size array: a pushed array
    // would reserve 17 slots for the one spec of a reportEvent item.
    const stack = this.stack;
    const base = stack.length;
    for (;;) {
      stack.push(this.value(depth));
      this.skipWs();
      const c = this.s.charCodeAt(this.pos);
      if (c === Ch.Comma) {
        this.pos++;
        this.skipWs();
        continue;
      }
      if (c === Ch.RBracket) {
        this.pos++;
        const out = stack.slice(base);
        stack.length = base;
        return out;
      }
      this.fail(Number.isNaN(c) ? 'unexpected end of input' : "expected ',' or ']'");
    }
  }

  private number(): JsonNumber {
    const s = this.s;
    const start = this.pos;
    let i = start;
    if (s.charCodeAt(i) === Ch.Minus) i++;
    const first = s.charCodeAt(i);
    if (first === Ch.D0) i++;
    else if (first >= Ch.D1 && first <= Ch.D9) {
      while (isDigit(s.charCodeAt(i))) i++;
    } else this.fail('invalid number', i);
    if (s.charCodeAt(i) === Ch.Dot) {
      i++;
      if (!isDigit(s.charCodeAt(i))) this.fail('invalid number: digit expected after the decimal point', i);
      while (isDigit(s.charCodeAt(i))) i++;
    }
    const e = s.charCodeAt(i);
    if (e === Ch.LowerE || e === Ch.UpperE) {
      i++;
      const sign = s.charCodeAt(i);
      if (sign === Ch.Plus || sign === Ch.Minus) i++;
      if (!isDigit(s.charCodeAt(i))) this.fail('invalid number: digit expected in the exponent', i);
      while (isDigit(s.charCodeAt(i))) i++;
    }
    this.pos = i;
    return new JsonNumber(s.slice(start, i));
  }

  string(): string {
    const s = this.s;
    let i = this.pos + 1; // after the opening quote
    let chunkStart = i;
    let out = '';
    for (;;) {
      const c = s.charCodeAt(i);
      // Fast path, one test for almost every character: not `"`, `\`, a control character, a
      // surrogate or past the end (NaN fails every comparison).
      if (c > Ch.Quote && c < 0xd800 && c !== Ch.Backslash) {
        i++;
        continue;
      }
      if (c === Ch.Quote) {
        this.pos = i + 1;
        // No escape seen: the text is the value (the common case).
        return out === '' ? this.slice(chunkStart, i) : out + s.slice(chunkStart, i);
      }
      if (Number.isNaN(c)) this.fail('unterminated string', i);
      if (c < 0x20) this.fail('unescaped control character in string', i);
      if (c >= 0xd800 && c <= 0xdfff) {
        // Raw surrogates only arrive from a malformed UTF-16 source; the body decoder already
        // rejects invalid UTF-8, so a pair here is well-formed unless it is lone.
        const hi = c <= 0xdbff;
        const next = s.charCodeAt(i + 1);
        if (!hi || !(next >= 0xdc00 && next <= 0xdfff)) this.fail('lone surrogate in string', i);
        i += 2;
        continue;
      }
      if (c !== Ch.Backslash) {
        i++;
        continue;
      }
      out += s.slice(chunkStart, i);
      const esc = s.charCodeAt(i + 1);
      const simple = esc < SIMPLE_ESCAPES.length ? SIMPLE_ESCAPES[esc] : undefined;
      if (simple !== undefined) {
        out += simple;
        i += 2;
        chunkStart = i;
        continue;
      }
      if (esc !== 0x75) this.fail('invalid escape in string', i);
      // u: a BMP unit, or a high surrogate that must be followed by \u low surrogate.
      const unit = hex4(s, i + 2);
      if (unit < 0) this.fail('invalid \\u escape', i);
      if (unit >= 0xd800 && unit <= 0xdbff) {
        const low = s.charCodeAt(i + 6) === Ch.Backslash && s.charCodeAt(i + 7) === 0x75 ? hex4(s, i + 8) : -1;
        if (!(low >= 0xdc00 && low <= 0xdfff)) this.fail('unpaired high surrogate escape', i);
        out += String.fromCharCode(unit, low);
        i += 12;
      } else if (unit >= 0xdc00 && unit <= 0xdfff) {
        this.fail('unpaired low surrogate escape', i);
      } else {
        out += String.fromCharCode(unit);
        i += 6;
      }
      chunkStart = i;
    }
  }
}

/** The one-character escapes of JSON (RFC 8259 §7) by the code of the letter after the backslash. */
const SIMPLE_ESCAPES: readonly (string | undefined)[] = (() => {
  const table: (string | undefined)[] = new Array<string | undefined>(0x75).fill(undefined);
  for (const [letter, value] of [['"', '"'], ['\\', '\\'], ['/', '/'], ['b', '\b'], ['f', '\f'], ['n', '\n'], ['r', '\r'], ['t', '\t']] as const) {
    table[letter.charCodeAt(0)] = value;
  }
  return table;
})();

function isDigit(c: number): boolean {
  return c >= Ch.D0 && c <= Ch.D9;
}

/** Value of 4 hex digits at s[at..at+4), or -1. */
function hex4(s: string, at: number): number {
  let v = 0;
  for (let k = 0; k < 4; k++) {
    const c = s.charCodeAt(at + k);
    let d: number;
    if (c >= 0x30 && c <= 0x39) d = c - 0x30;
    else if (c >= 0x41 && c <= 0x46) d = c - 0x37;
    else if (c >= 0x61 && c <= 0x66) d = c - 0x57;
    else return -1;
    v = (v << 4) | d;
  }
  return v;
}

/** True when `v` is a parsed JSON object. */
export function isJsonObject(v: JsonValue | undefined): v is JsonObject {
  return v instanceof Map;
}

/** Short description of a value's JSON type for error reasons (never echoes long content). */
export function jsonTypeOf(v: JsonValue): string {
  if (v === null) return 'null';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'string') return 'string';
  if (v instanceof JsonNumber) return 'number';
  if (Array.isArray(v)) return 'array';
  return 'object';
}
