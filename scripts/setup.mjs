#!/usr/bin/env node
// Self-setup for a fresh clone, run as the `pre` hook of test, bench and start: npm runs
// it even before node_modules exists, so it may only use Node's built-ins.
// Installs dependencies when missing, builds dist/, and with --etcd / --redis / --dnsmasq /
// --promtool makes sure an `etcd` / `redis-server` / `dnsmasq` / `promtool` binary is available
// (the Debian package when running as root). --packages-only does the last part alone (the stack
// installs dnsmasq on demand with it).
import { execSync, spawnSync } from 'node:child_process';
import { existsSync, statSync, readdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = join(dirname(fileURLToPath(import.meta.url)), '..');
const run = (cmd) => execSync(cmd, { cwd: root, stdio: 'inherit' });

function newestMtime(dir, ...suffixes) {
  const wanted = suffixes.length > 0 ? suffixes : ['.ts', '.proto'];
  let newest = 0;
  if (!existsSync(dir)) return newest;
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name === 'node_modules' || entry.name === 'dist') continue;
    const p = join(dir, entry.name);
    if (entry.isDirectory()) newest = Math.max(newest, newestMtime(p, ...wanted));
    else if (wanted.some((s) => entry.name.endsWith(s))) newest = Math.max(newest, statSync(p).mtimeMs);
  }
  return newest;
}

const packagesOnly = process.argv.includes('--packages-only');

if (!packagesOnly && !existsSync(join(root, 'node_modules', '.package-lock.json'))) {
  console.error('[setup] node_modules missing: npm ci');
  run(existsSync(join(root, 'package-lock.json')) ? 'npm ci --no-audit --no-fund' : 'npm install --no-audit --no-fund');
}

// A node_modules installed before a patch was added (or copied from another checkout) gets the
// patches/ that npm ci's postinstall would have applied.
const patchStamp = join(root, 'node_modules', '.patches-stamp');
if (!packagesOnly && (!existsSync(patchStamp) || statSync(patchStamp).mtimeMs < newestMtime(join(root, 'patches'), '.patch'))) {
  console.error('[setup] applying patches/ to node_modules (patch-package)');
  run('npx patch-package --error-on-fail');
  run(`node -e "require('fs').writeFileSync('node_modules/.patches-stamp', String(Date.now()))"`);
}

const stamp = join(root, 'dist', '.build-stamp');
const srcNewest = Math.max(...['shared', 'directory-svc', 'meta-svc', 'router-svc', 'tools', 'bench', 'proto', 'test', 'scripts'].map((d) => newestMtime(join(root, d))));
if (!packagesOnly && (!existsSync(stamp) || statSync(stamp).mtimeMs < srcNewest)) {
  // The services and tools are built to dist/; tests and benchmarks run from source (tsx) but are
  // type-checked too, so a type error anywhere fails the run.
  console.error('[setup] building dist/ (tsc) and type-checking tests and benchmarks');
  run('npx tsc -p tsconfig.build.json');
  run('npx tsc -p tsconfig.json --noEmit');
  run(`node -e "require('fs').writeFileSync('dist/.build-stamp', String(Date.now()))"`);
}

/**
 * Makes sure `binary` is on PATH: the Debian package `pkg` when running as root. Without root, a
 * `required` binary stops the run with the command to type; an optional one only says what skips.
 */
function ensureDebianPackage(binary, pkg, required, withoutIt = '') {
  // Debian puts some daemons (dnsmasq) in /usr/sbin, which a normal user's PATH lacks.
  if (spawnSync('sh', ['-c', `command -v ${binary} || test -x /usr/sbin/${binary}`], { stdio: 'ignore' }).status === 0) return;
  if (process.getuid && process.getuid() === 0) {
    console.error(`[setup] ${binary} missing: apt-get install -y ${pkg}`);
    run(`apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq ${pkg}`);
  } else if (required) {
    console.error(`[setup] ${binary} is missing and we are not root: install the Debian package ${pkg} (sudo apt-get install -y ${pkg})`);
    process.exit(1);
  } else {
    console.error(`[setup] ${binary} is missing and we are not root: ${withoutIt} (sudo apt-get install -y ${pkg})`);
  }
}

if (process.argv.includes('--etcd')) ensureDebianPackage('etcd', 'etcd-server', true);

// Tests only: the meta-svc Redis suites (kvcm-meta §9.4) start their own redis-server on a free
// loopback port with persistence off.
if (process.argv.includes('--redis')) ensureDebianPackage('redis-server', 'redis-server', true);

// Tests only (`npm start` does not need a browser): the status page suite drives headless
// Chromium; without it (and not root) that suite skips.
if (process.argv.includes('--chromium')) ensureDebianPackage('chromium', 'chromium', false, 'the status page suite will skip');

// The engines.md §6 suites (and `npm start -- --engines_dns`, which installs it on demand) start
// their own dnsmasq on a free loopback port: Debian's dnsmasq-base is the binary alone, no service.
if (process.argv.includes('--dnsmasq')) ensureDebianPackage('dnsmasq', 'dnsmasq-base', true);
// Tests only: the observability suite runs `promtool check rules` on the Prometheus rules and
// `promtool check metrics` on each service's /metrics (promtool ships in Debian's prometheus).
if (process.argv.includes('--promtool')) ensureDebianPackage('promtool', 'prometheus', true);
