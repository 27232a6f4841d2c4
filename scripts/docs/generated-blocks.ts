/**
 * Generated blocks inside hand-written pages. A page marks where a generated reference goes:
 *
 *   <!-- BEGIN GENERATED flags/router-svc: npm run docs -->
 *   ...written by the generator, never by hand...
 *   <!-- END GENERATED flags/router-svc -->
 *
 * so prose stays beside the tables it explains, and the docs test can say exactly which block of
 * which page is stale. Markers inside fenced code blocks are text, not markers (a page may show
 * one). Pure: text in, text out.
 */

const BEGIN_RE = /^<!-- BEGIN GENERATED ([a-z0-9_./-]+): npm run docs -->$/;
const FENCE_RE = /^(```|~~~)/;
const END_RE = /^<!-- END GENERATED ([a-z0-9_./-]+) -->$/;

/** One block found in a page: its name and the text between the markers (without them). */
export interface GeneratedBlock {
  readonly name: string;
  readonly content: string;
  /** 1-based line of the BEGIN marker, for messages. */
  readonly line: number;
}

export function beginMarker(name: string): string {
  return `<!-- BEGIN GENERATED ${name}: npm run docs -->`;
}

export function endMarker(name: string): string {
  return `<!-- END GENERATED ${name} -->`;
}

/** Every block of `text`, in order; throws on an unclosed, unopened or nested marker. */
export function findBlocks(text: string, file: string): GeneratedBlock[] {
  const lines = text.split('\n');
  const out: GeneratedBlock[] = [];
  let open: { name: string; line: number; body: string[] } | null = null;
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (open === null && FENCE_RE.test(line)) fenced = !fenced;
    if (fenced) continue;
    const begin = BEGIN_RE.exec(line);
    const end = END_RE.exec(line);
    if (begin !== null) {
      if (open !== null) throw new Error(`${file}:${i + 1}: block ${begin[1]} opens inside block ${open.name} (line ${open.line})`);
      open = { name: begin[1]!, line: i + 1, body: [] };
    } else if (end !== null) {
      if (open === null || open.name !== end[1]) throw new Error(`${file}:${i + 1}: END of ${end[1]} without its BEGIN`);
      out.push({ name: open.name, content: open.body.join('\n'), line: open.line });
      open = null;
    } else if (open !== null) {
      open.body.push(line);
    } else if (line.includes('GENERATED') && line.startsWith('<!--')) {
      throw new Error(`${file}:${i + 1}: malformed generated-block marker: ${line}`);
    }
  }
  if (open !== null) throw new Error(`${file}:${open.line}: block ${open.name} is never closed`);
  return out;
}

/**
 * `text` with every block's content replaced by `contents.get(name)`. A block whose name has no
 * content is an error: a page must not carry a block nobody generates.
 */
export function fillBlocks(text: string, file: string, contents: ReadonlyMap<string, string>): string {
  const lines = text.split('\n');
  const out: string[] = [];
  let skipping = false;
  let fenced = false;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (!skipping && FENCE_RE.test(line)) fenced = !fenced;
    const begin = fenced ? null : BEGIN_RE.exec(line);
    if (begin !== null) {
      const content = contents.get(begin[1]!);
      if (content === undefined) throw new Error(`${file}:${i + 1}: no generator writes block ${begin[1]}`);
      out.push(line, ...(content === '' ? [] : content.split('\n')));
      skipping = true;
      continue;
    }
    if (!fenced && END_RE.test(line)) skipping = false;
    if (!skipping) out.push(line);
  }
  return out.join('\n');
}
