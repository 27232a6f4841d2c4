// The directory's per-stream layers import one way: subscription/ (the state machine and what it
// tells) builds on recovery/ (exchanges, buffers, admission, history policy), never the reverse,
// so either can be read without the other's internals in mind.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';

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
});
