/**
 * Where a rendered chat may be cut so that encoding the pieces separately gives exactly the ids of
 * encoding it whole (the BPE subtlety: a prefix's ids are not in general a prefix of the whole
 * string's ids, since merges can cross any cut). Hugging Face tokenizers extract added tokens
 * before normalizing and pre-tokenizing, and encode the text between them independently, so a cut
 * right after a special token (`<|im_end|>`, `<|im_start|>`) is safe, given:
 *  - the special token is matched on raw text (`normalized: false`) and eats no neighbouring
 *    whitespace (`lstrip`, `rstrip`, `single_word` all false);
 *  - no other added token contains it or overlaps its start, so the leftmost-longest match at
 *    that spot is always this token;
 *  - no Metaspace pre-tokenizer prepends only to the first piece of the input
 *    (`prepend_scheme: "first"`), which would treat each cut as a new start.
 * When any condition fails `planSegments` returns null and callers encode the whole text.
 * Pure: the parsed tokenizer.json in, a splitter out.
 */

export interface SegmentPlan {
  /** The text cut after every special token; the pieces joined are the text. */
  split(text: string): string[];
}

interface AddedTokenSpec {
  readonly content: string;
  readonly special: boolean;
  readonly lstrip: boolean;
  readonly rstrip: boolean;
  readonly singleWord: boolean;
  readonly normalized: boolean;
}

export function planSegments(tokenizer: Readonly<Record<string, unknown>>): SegmentPlan | null {
  const added = addedTokens(tokenizer['added_tokens']);
  if (added === null || hasFirstOnlyPrepend(tokenizer['pre_tokenizer'])) return null;
  const cuts = added.filter((t) => t.special && t.content !== '');
  if (cuts.length === 0) return null;
  for (const s of cuts) {
    if (s.normalized || s.lstrip || s.rstrip || s.singleWord) return null;
    for (const a of added) if (a.content !== s.content && overlapsStart(a.content, s.content)) return null;
  }
  // Longest first: the alternation then prefers the longer of two tokens starting at one place.
  const alternation = cuts
    .map((t) => t.content)
    .sort((x, y) => y.length - x.length)
    .map(escapeRegExp)
    .join('|');
  const re = new RegExp(alternation, 'g');
  return {
    split(text: string): string[] {
      const pieces: string[] = [];
      let from = 0;
      re.lastIndex = 0;
      for (let m = re.exec(text); m !== null; m = re.exec(text)) {
        const end = m.index + m[0].length;
        pieces.push(text.slice(from, end));
        from = end;
      }
      if (from < text.length || pieces.length === 0) pieces.push(text.slice(from));
      return pieces;
    },
  };
}

/** `a` contains `s`, or a proper suffix of `a` is a proper prefix of `s` (a match of `a` would swallow the start of `s`). */
function overlapsStart(a: string, s: string): boolean {
  if (a.includes(s)) return true;
  for (let k = 1; k < s.length && k <= a.length; k++) if (a.endsWith(s.slice(0, k))) return true;
  return false;
}

function addedTokens(value: unknown): AddedTokenSpec[] | null {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value)) return null;
  const out: AddedTokenSpec[] = [];
  for (const v of value) {
    if (typeof v !== 'object' || v === null) return null;
    const o = v as Record<string, unknown>;
    if (typeof o['content'] !== 'string') return null;
    out.push({
      content: o['content'],
      special: o['special'] === true,
      lstrip: o['lstrip'] === true,
      rstrip: o['rstrip'] === true,
      singleWord: o['single_word'] === true,
      // tokenizers' default for special added tokens is normalized: false; absent means false there.
      normalized: o['normalized'] === true,
    });
  }
  return out;
}

function hasFirstOnlyPrepend(pre: unknown): boolean {
  if (typeof pre !== 'object' || pre === null) return false;
  const o = pre as Record<string, unknown>;
  if (o['type'] === 'Metaspace') return o['prepend_scheme'] === 'first';
  const list = o['pretokenizers'];
  return Array.isArray(list) && list.some(hasFirstOnlyPrepend);
}

function escapeRegExp(s: string): string {
  return s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
}
