// router-svc/policy/ imports in one direction (its README): types at the bottom, the shared parts
// above them, the policies above those and the factory on top. A cycle there once made every
// policy depend on the factory that builds it; this keeps it from coming back.
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { expect } from 'chai';
import { importCycles } from '../../helpers/import-cycles.js';

const POLICY = join(dirname(fileURLToPath(import.meta.url)), '../../../router-svc/policy');

/** Each file of the folder and the folder's files it imports (type-only imports included). */
function importGraph(): Map<string, string[]> {
  const files = readdirSync(POLICY).filter((f) => f.endsWith('.ts') && !f.endsWith('.bench.ts'));
  const graph = new Map<string, string[]>();
  for (const f of files) {
    const text = readFileSync(join(POLICY, f), 'utf8');
    const local: string[] = [];
    for (const m of text.matchAll(/from '\.\/([\w-]+)\.js'/g)) local.push(`${m[1]!}.ts`);
    graph.set(f, local);
  }
  return graph;
}

describe('router-svc/policy layering', () => {
  it('the policy files import without cycles (no file reaches itself through others)', () => {
    expect(importCycles(importGraph())).to.deep.equal([]);
  });

  it('only create-policy.ts imports the policies; policy-types.ts imports nothing of the folder', () => {
    const graph = importGraph();
    const policies = [...graph.keys()].filter((f) => f.endsWith('-policy.ts') && f !== 'create-policy.ts');
    expect(policies).to.include.members(['car-policy.ts', 'round-robin-policy.ts', 'slo-aware-policy.ts']);
    for (const [file, imports] of graph) {
      if (file === 'create-policy.ts') continue;
      expect(imports.filter((i) => policies.includes(i) || i === 'create-policy.ts'), `${file} imports`).to.deep.equal([]);
    }
    expect(graph.get('policy-types.ts')).to.deep.equal([]);
    expect(graph.get('create-policy.ts')).to.include.members(policies);
  });
});
