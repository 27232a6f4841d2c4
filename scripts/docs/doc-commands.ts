/**
 * The shell commands the docs show, and how each is kept honest. Every `sh` (or `bash`, `shell`,
 * `console`) code block carries, on the line right before it, one annotation:
 *
 *   <!-- docs-test: run -->                      the docs test runs each command in a checkout
 *   <!-- docs-test: stack -->                    run against the services the test starts
 *                                                 (live-services.ts; the docs' ports 8888, 50051,
 *                                                 8889 and 6382 mapped to theirs)
 *   <!-- docs-test: covered-by test/x.test.ts --> an existing test runs the same thing
 *   <!-- docs-test: skip needs a Kubernetes cluster -->   not runnable here, and why
 *
 * A block without one fails the docs test, so a new command must say how it is checked. Pure.
 */
import MarkdownIt from 'markdown-it';
import { code, markdownTable } from './markdown-table.js';

export type CommandCheck =
  | { readonly kind: 'run' }
  | { readonly kind: 'stack' }
  | { readonly kind: 'covered-by'; readonly paths: readonly string[] }
  | { readonly kind: 'skip'; readonly reason: string };

export interface DocCommand {
  readonly page: string;
  /** 1-based line of the command in the page. */
  readonly line: number;
  readonly command: string;
  readonly check: CommandCheck | null;
  /** Why the annotation could not be read, when `check` is null. */
  readonly problem: string;
}

const SHELL_LANGS = new Set(['sh', 'bash', 'shell', 'console']);
const ANNOTATION_RE = /^<!-- docs-test: (run|stack|covered-by|skip)(?: (.+?))? -->$/;

/** Every command of every shell block of one page. */
export function pageCommands(page: string, text: string): DocCommand[] {
  const md = new MarkdownIt({ html: true });
  const tokens = md.parse(text, {});
  const out: DocCommand[] = [];
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    if (t.type !== 'fence' || !SHELL_LANGS.has(t.info.trim().split(/\s+/)[0] ?? '')) continue;
    const prev = i > 0 ? tokens[i - 1]! : null;
    const blockLine = (t.map?.[0] ?? 0) + 1;
    const annotation = prev !== null && prev.type === 'html_block' && prev.map?.[1] === t.map?.[0] ? prev.content.trim() : '';
    const parsed = parseAnnotation(annotation);
    for (const c of splitCommands(t.content)) {
      out.push({ page, line: blockLine + 1 + c.offset, command: c.command, check: parsed.check, problem: parsed.problem });
    }
  }
  return out;
}

function parseAnnotation(text: string): { check: CommandCheck | null; problem: string } {
  if (text === '') return { check: null, problem: 'no <!-- docs-test: ... --> annotation on the line before the block' };
  const m = ANNOTATION_RE.exec(text);
  if (m === null) return { check: null, problem: `unreadable annotation ${text}` };
  const arg = (m[2] ?? '').trim();
  switch (m[1]) {
    case 'run':
      return { check: { kind: 'run' }, problem: '' };
    case 'stack':
      return { check: { kind: 'stack' }, problem: '' };
    case 'covered-by':
      if (arg === '') return { check: null, problem: 'covered-by names no test file' };
      return { check: { kind: 'covered-by', paths: arg.split(/\s+/) }, problem: '' };
    case 'skip':
      if (arg === '') return { check: null, problem: 'skip gives no reason' };
      return { check: { kind: 'skip', reason: arg }, problem: '' };
    default:
      return { check: null, problem: `unknown annotation ${text}` };
  }
}

/** The commands of a block: `\`-continued lines joined, blank and `#` comment lines dropped. */
export function splitCommands(body: string): { command: string; offset: number }[] {
  const lines = body.split('\n');
  const out: { command: string; offset: number }[] = [];
  let current: string[] = [];
  let start = 0;
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i]!;
    if (current.length === 0) {
      if (line.trim() === '' || line.trim().startsWith('#')) continue;
      start = i;
    }
    if (line.endsWith('\\')) {
      current.push(line.slice(0, -1));
      continue;
    }
    current.push(line);
    out.push({ command: current.join('\n').trim(), offset: start });
    current = [];
  }
  if (current.length > 0) out.push({ command: current.join('\n').trim(), offset: start });
  return out;
}

/** The generated list: every command, where it is, and how it is checked. */
export function commandsMarkdown(commands: readonly DocCommand[]): string {
  const rows = commands.map((c) => [`[${c.page}](${linkFromDocs(c.page)}) line ${c.line}`, code(shorten(c.command)), checkText(c.check, c.problem)]);
  return markdownTable(['where', 'command', 'how it is checked'], rows);
}

function checkText(check: CommandCheck | null, problem: string): string {
  if (check === null) return `**not checked: ${problem}**`;
  switch (check.kind) {
    case 'run':
      return 'run by `test/docs/docs.live.test.ts`';
    case 'stack':
      return 'run by `test/docs/docs.live.test.ts` against a local fleet';
    case 'covered-by':
      return `exercised by ${check.paths.map((p) => code(p)).join(', ')}`;
    case 'skip':
      return `not run: ${check.reason}`;
    default:
      return assertNever(check);
  }
}

/** The page's path as linked from docs/contributing.md. */
function linkFromDocs(page: string): string {
  return page.startsWith('docs/') ? page.slice('docs/'.length) : `../${page}`;
}

function shorten(command: string): string {
  const one = command.replace(/\s*\n\s*/g, ' ');
  return one.length > 110 ? `${one.slice(0, 107)}...` : one;
}

function assertNever(x: never): never {
  throw new Error(`impossible check ${JSON.stringify(x)}`);
}
