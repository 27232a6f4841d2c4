// The README and docs/ as a reader clicks through them: every relative link reaches a file of the
// checkout, and every #anchor a heading of its page, with GitHub's slug rules (github-slugger, the
// algorithm github.com uses). Pure: reads the pages, starts nothing.
import { expect } from 'chai';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import MarkdownIt from 'markdown-it';
import { docPages } from '../../scripts/docs/doc-pages.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const README_MAX_LINES = 200;

type Token = ReturnType<InstanceType<typeof MarkdownIt>['parse']>[number];

interface Link {
  readonly href: string;
  readonly line: number;
}

function parse(text: string): Token[] {
  return new MarkdownIt({ html: true }).parse(text, {});
}

/** Heading anchors of a page, as GitHub renders them (duplicates get -1, -2...). */
function anchorsOf(text: string): Set<string> {
  const tokens = parse(text);
  const slugger = new GithubSlugger();
  const out = new Set<string>();
  for (let i = 0; i < tokens.length; i++) {
    if (tokens[i]!.type !== 'heading_open') continue;
    const inline = tokens[i + 1]!;
    const words = (inline.children ?? []).filter((c) => c.type === 'text' || c.type === 'code_inline').map((c) => c.content);
    out.add(slugger.slug(words.join('')));
  }
  return out;
}

/** Every link and image target of a page, with the line of its block. */
function linksOf(text: string): Link[] {
  const out: Link[] = [];
  for (const t of parse(text)) {
    if (t.type !== 'inline') continue;
    const line = (t.map?.[0] ?? 0) + 1;
    for (const c of t.children ?? []) {
      const href = c.type === 'link_open' ? c.attrGet('href') : c.type === 'image' ? c.attrGet('src') : null;
      if (href !== null) out.push({ href: String(href), line });
    }
  }
  return out;
}

function isExternal(href: string): boolean {
  return /^[a-z][a-z0-9+.-]*:/i.test(href);
}

describe('docs: links and anchors (README.md and docs/)', () => {
  const pages = docPages(ROOT);
  const texts = new Map(pages.map((p) => [p, readFileSync(join(ROOT, p), 'utf8')]));
  const anchors = new Map<string, Set<string>>();
  const anchorsFor = (page: string): Set<string> => {
    let a = anchors.get(page);
    if (a === undefined) {
      a = anchorsOf(texts.get(page) ?? readFileSync(join(ROOT, page), 'utf8'));
      anchors.set(page, a);
    }
    return a;
  };

  it('the README is the front door: under 200 lines, and it links into docs/', () => {
    const readme = texts.get('README.md')!;
    expect(readme.split('\n').length, 'README.md lines').to.be.below(README_MAX_LINES);
    expect(linksOf(readme).some((l) => l.href.startsWith('docs/'))).to.equal(true);
  });

  it('every page under docs/ is reachable from the README or the docs index', () => {
    const linked = new Set<string>();
    for (const from of ['README.md', 'docs/README.md']) {
      for (const l of linksOf(texts.get(from)!)) {
        if (isExternal(l.href) || l.href.startsWith('#')) continue;
        linked.add(normalize(join(dirname(from), l.href.split('#')[0]!)));
      }
    }
    const orphans = pages.filter((p) => p.startsWith('docs/') && !p.startsWith('docs/incoming/') && p !== 'docs/README.md' && !linked.has(p));
    expect(orphans, 'pages nothing links to').to.deep.equal([]);
  });

  it('every relative link reaches a file, and every #anchor a heading of its page', () => {
    const broken: string[] = [];
    for (const page of pages) {
      for (const { href, line } of linksOf(texts.get(page)!)) {
        if (isExternal(href)) continue;
        const [path, anchor] = href.split('#') as [string, string | undefined];
        const target = path === '' ? page : normalize(join(dirname(page), decodeURIComponent(path)));
        if (relative(ROOT, join(ROOT, target)).startsWith('..')) {
          broken.push(`${page}:${line}: ${href} leaves the repository`);
          continue;
        }
        if (!existsSync(join(ROOT, target))) {
          broken.push(`${page}:${line}: ${href}: no such file ${target}`);
          continue;
        }
        if (anchor !== undefined && anchor !== '') {
          if (!target.endsWith('.md')) broken.push(`${page}:${line}: ${href}: an anchor into a file that is not a page`);
          else if (!anchorsFor(target).has(anchor)) broken.push(`${page}:${line}: ${href}: ${target} has no heading #${anchor}`);
        }
      }
    }
    expect(broken, broken.join('\n')).to.deep.equal([]);
  });
});
