/**
 * Which Markdown files are the documentation: the README and every page under docs/, except the
 * feature notes other branches drop into docs/incoming/ for the lead to fold in (they are drafts,
 * not pages). Paths are relative to the root, sorted.
 */
import { readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';

const INCOMING = 'docs/incoming/';

export function docPages(root: string): string[] {
  const out = ['README.md'];
  const walk = (dir: string): void => {
    for (const entry of readdirSync(dir).sort()) {
      const p = join(dir, entry);
      if (statSync(p).isDirectory()) walk(p);
      else if (entry.endsWith('.md')) out.push(relative(root, p));
    }
  };
  walk(join(root, 'docs'));
  return out.filter((p) => !p.startsWith(INCOMING)).sort((a, b) => (a === 'README.md' ? -1 : b === 'README.md' ? 1 : a.localeCompare(b)));
}
