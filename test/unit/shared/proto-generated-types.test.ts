// The committed TypeScript shapes of proto/kvdirectory.proto (proto/generated/, written by
// proto-loader-gen-types under the services' loader options) match the .proto: a .proto edit
// without `npm run proto:types` fails here, not as a silent type drift.
import { expect } from 'chai';
import { spawnSync } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../../..', import.meta.url));

describe('proto/generated is what proto-loader-gen-types writes for proto/kvdirectory.proto', function () {
  this.timeout(60_000);

  it('regenerating gives the committed files', () => {
    const r = spawnSync(process.execPath, ['scripts/gen-proto-types.mjs', '--check'], { cwd: ROOT, encoding: 'utf8' });
    expect(r.status, r.stderr).to.equal(0);
  });
});
