// Writes the TypeScript shapes of proto/kvdirectory.proto into proto/generated/ with
// proto-loader-gen-types (ships with @grpc/proto-loader), under the same options the services load
// the .proto with (KVDIRECTORY_LOADER_OPTIONS: keepCase, longs and enums as String, defaults,
// oneofs). The output is committed; `--check` regenerates into a temp dir and exits 1 when the
// committed files differ (a .proto edit without `npm run proto:types`).
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const committed = join(root, 'proto', 'generated');
const check = process.argv.includes('--check');

function generate(outDir) {
  const bin = join(root, 'node_modules', '.bin', 'proto-loader-gen-types');
  const options = ['--keepCase', '--longs=String', '--enums=String', '--defaults', '--oneofs', '--grpcLib=@grpc/grpc-js', '--importFileExtension=.js'];
  execFileSync(bin, ['proto/kvdirectory.proto', ...options, `--outDir=${outDir}`], { cwd: root, stdio: ['ignore', 'ignore', 'pipe'] });
}

function files(dir) {
  const out = new Map();
  const walk = (d) => {
    for (const name of readdirSync(d).sort()) {
      const p = join(d, name);
      if (statSync(p).isDirectory()) walk(p);
      else out.set(relative(dir, p), readFileSync(p, 'utf8'));
    }
  };
  walk(dir);
  return out;
}

if (!check) {
  rmSync(committed, { recursive: true, force: true });
  generate(committed);
  console.log(`wrote ${files(committed).size} files to ${relative(root, committed)}`);
} else {
  const tmp = mkdtempSync(join(tmpdir(), 'proto-types-'));
  try {
    generate(tmp);
    const want = files(tmp);
    const have = files(committed);
    const differ = [...new Set([...want.keys(), ...have.keys()])].filter((f) => want.get(f) !== have.get(f));
    if (differ.length > 0) {
      console.error(`proto/generated is stale (run npm run proto:types): ${differ.join(', ')}`);
      process.exit(1);
    }
  } finally {
    rmSync(tmp, { recursive: true, force: true });
  }
}
