// The seed inputs the mutators start from: `test/fuzz/corpus/<kind>/` (written by make-corpus.ts).
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

export const CORPUS_ROOT = new URL('../corpus/', import.meta.url).pathname;

/** Every file of `test/fuzz/corpus/<kind>/` (sorted by name, so seeds index the same files). */
export function loadCorpus(kind: string): { name: string; bytes: Uint8Array }[] {
  const dir = join(CORPUS_ROOT, kind);
  const names = readdirSync(dir)
    .filter((n) => !n.startsWith('.') && n !== 'README.md' && statSync(join(dir, n)).isFile())
    .sort();
  if (names.length === 0) throw new Error(`empty fuzz corpus ${dir}`);
  return names.map((name) => ({ name, bytes: new Uint8Array(readFileSync(join(dir, name))) }));
}
