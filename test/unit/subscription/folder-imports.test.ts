// The directory's folders import one way: subscription/ (the state machine and what it tells)
// builds on recovery/ (exchanges, buffers, admission, history policy), discovery/ on engines/,
// grpc/ on view/, and no two folders import each other, so each can be read without the other's
// internals in mind.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { importCycles } from '../../helpers/import-cycles.js';

const SVC = join(dirname(fileURLToPath(import.meta.url)), '../../../directory-svc');

function importsOf(folder: string): { file: string; spec: string }[] {
  const out: { file: string; spec: string }[] = [];
  for (const f of readdirSync(join(SVC, folder))) {
    if (!f.endsWith('.ts')) continue;
    const text = readFileSync(join(SVC, folder, f), 'utf8');
    for (const m of text.matchAll(/from '([^']+)'/g)) out.push({ file: `${folder}/${f}`, spec: m[1]! });
  }
  return out;
}

describe('directory-svc layering', () => {
  it('recovery/ imports nothing from subscription/ (subscription/ builds on recovery/)', () => {
    const back = importsOf('recovery').filter((i) => i.spec.includes('/subscription/'));
    expect(back, 'imports back into subscription/').to.deep.equal([]);
    expect(importsOf('subscription').some((i) => i.spec.includes('/recovery/'))).to.equal(true);
  });

  it('directory-svc folders import without cycles (no folder reaches itself through others)', () => {
    const folders = readdirSync(SVC, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
    const uses = new Map<string, string[]>();
    for (const folder of folders) {
      const used = new Set<string>();
      for (const { spec } of importsOf(folder)) {
        const m = /^\.\.\/([\w-]+)\//.exec(spec);
        if (m !== null && folders.includes(m[1]!)) used.add(m[1]!);
      }
      uses.set(folder, [...used]);
    }
    // Depth-first search for a path that comes back to a folder on it (any length, not only pairs).
    const cycles = importCycles(uses);
    expect(cycles).to.deep.equal([]);
  });
});
