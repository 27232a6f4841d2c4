// The references against the running programs, and the pages' commands run as written. Starts the
// docs fleet once (scripts/docs/live-services.ts: a simulated vLLM engine, directory-svc, router-svc,
// meta-svc on SQLite and on Redis, all real processes on free ports) and checks:
//   - the metrics reference equals what the services' registries hold, and lists every metric
//     their live /metrics prints;
//   - the HTTP reference lists every route each service serves, and each route it lists is served;
//   - every flag each program prints with --help is in the configuration reference;
//   - the commands marked `run` run from the checkout, and those marked `stack` run against the
//     fleet (the docs' ports 8888 / 50051 / 8889 / 6382 mapped to the fleet's).
import { expect } from 'chai';
import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { allCommands, fillPages, liveBlocks } from '../../scripts/docs/docs-build.js';
import type { DocCommand } from '../../scripts/docs/doc-commands.js';
import { FLAG_PROGRAMS } from '../../scripts/docs/flag-reference.js';
import { findBlocks } from '../../scripts/docs/generated-blocks.js';
import { LiveFleet, SERVICE_NAMES, type FleetPorts, type LiveFacts, type ServiceName } from '../../scripts/docs/live-services.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const COMMAND_MS = 120000;

function page(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

/** `GET /path` and `POST /path` written in code spans under each service's `## ` heading of the HTTP reference. */
function documentedRoutes(): Map<ServiceName, Set<string>> {
  const out = new Map<ServiceName, Set<string>>(SERVICE_NAMES.map((s) => [s, new Set<string>()]));
  let current: Set<string> | null = null;
  for (const line of page('docs/reference/http.md').split('\n')) {
    const h = /^## (\S+)$/.exec(line);
    if (h !== null) current = out.get(h[1] as ServiceName) ?? null;
    if (current === null) continue;
    for (const m of line.matchAll(/`(GET|POST) (\/[^`\s]*)`/g)) current.add(`${m[1]} ${m[2]}`);
  }
  return out;
}

/** Runs one shell command from the checkout; resolves with its exit code and output. */
function sh(command: string): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn('sh', ['-c', command], { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString('utf8')));
    child.stderr.on('data', (d: Buffer) => (output += d.toString('utf8')));
    const timer = setTimeout(() => child.kill('SIGKILL'), COMMAND_MS);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, output });
    });
  });
}

/** The command with the docs' default ports replaced by the fleet's. */
function onFleet(command: string, ports: FleetPorts): string {
  const map: Record<string, number> = { '8888': ports.routerHttp, '50051': ports.directoryGrpc, '8889': ports.directoryHttp, '6382': ports.metaHttp };
  return command.replace(/\b(localhost|127\.0\.0\.1):(8888|50051|8889|6382)\b/g, (_m, host: string, port: string) => `${host}:${map[port]}`);
}

async function runAll(commands: readonly DocCommand[], rewrite: (c: string) => string): Promise<string[]> {
  const failures: string[] = [];
  for (const c of commands) {
    const command = rewrite(c.command);
    const r = await sh(command);
    if (r.code !== 0) failures.push(`${c.page}:${c.line}: \`${command}\` exited ${r.code}:\n${r.output.slice(-1500)}`);
  }
  return failures;
}

describe('docs: references and commands against the running services', function () {
  this.timeout(10 * 60_000);
  let fleet: LiveFleet | null = null;
  let facts: LiveFacts;
  const documented = documentedRoutes();

  before(async function () {
    this.timeout(15 * 60_000);
    // The pages' commands run dist/ (kvctl, --help): build it when a source is newer, as npm test's pretest does.
    execFileSync(process.execPath, ['scripts/setup.mjs'], { cwd: ROOT, stdio: 'ignore' });
    fleet = await LiveFleet.start(ROOT, { fromDist: true });
    const extra = new Map(SERVICE_NAMES.map((s) => [s, [...documented.get(s)!].map((r) => r.split(' ')[1]!)]));
    facts = await fleet.facts(extra);
  });

  after(async () => {
    await fleet?.stop();
  });

  it('the metrics reference is what the services\' registries hold (npm run docs)', () => {
    const stale = fillPages(ROOT, liveBlocks(facts))
      .filter((u) => u.staleBlocks.some((b) => b.startsWith('metrics/')))
      .map((u) => `${u.page}: ${u.staleBlocks.join(', ')}`);
    expect(stale, `stale metrics reference — run \`npm run docs -- --screenshot=false\` and commit it:\n${stale.join('\n')}`).to.deep.equal([]);
  });

  it('every metric a live /metrics prints is in the metrics reference, under its service', () => {
    const text = page('docs/reference/metrics.md');
    const blocks = new Map(findBlocks(text, 'docs/reference/metrics.md').map((b) => [b.name, b.content]));
    const missing: string[] = [];
    for (const s of SERVICE_NAMES) {
      const exposed = facts.exposed.get(s)!;
      expect(exposed.length, `${s} metric families`).to.be.greaterThan(5);
      for (const name of exposed) if (!(blocks.get(`metrics/${s}`) ?? '').includes(`\`${name}\``)) missing.push(`${s}: ${name}`);
    }
    expect(missing, 'metrics served but not documented').to.deep.equal([]);
  });

  it('every route each service serves is in the HTTP reference, and every route listed there is served', () => {
    const undocumented: string[] = [];
    const unserved: string[] = [];
    for (const s of SERVICE_NAMES) {
      const served = new Set(facts.routes.get(s)!.map((r) => `${r.method} ${r.path}`));
      expect(served.size, `${s} routes`).to.be.greaterThan(2);
      for (const r of served) if (!documented.get(s)!.has(r)) undocumented.push(`${s}: ${r}`);
      for (const r of documented.get(s)!) if (!served.has(r)) unserved.push(`${s}: ${r}`);
    }
    expect(undocumented, 'served routes missing from docs/reference/http.md').to.deep.equal([]);
    expect(unserved, 'routes docs/reference/http.md lists that the service does not serve').to.deep.equal([]);
  });

  it('every flag each program prints with --help is in its table of the configuration reference', async () => {
    const text = page('docs/reference/configuration.md');
    const blocks = new Map(findBlocks(text, 'docs/reference/configuration.md').map((b) => [b.name, b.content]));
    // Each program's --help as a reader types it (the command the reference names).
    const helps = await Promise.all(FLAG_PROGRAMS.map(async (p) => ({ p, r: await sh(p.helpCommand) })));
    const missing: string[] = [];
    for (const { p, r } of helps) {
      expect(r.code, `${p.helpCommand}: ${r.output}`).to.equal(0);
      const flags = [...r.output.matchAll(/^ {2}--([a-z_]+)=/gm)].map((m) => m[1]!);
      expect(flags.length, `${p.name}: flags in --help`).to.be.greaterThan(2);
      for (const f of flags) if (!(blocks.get(`flags/${p.name}`) ?? '').includes(`\`--${f}\``)) missing.push(`${p.name}: --${f}`);
    }
    expect(missing, 'flags --help prints that the configuration reference lacks').to.deep.equal([]);
  });

  it('the commands marked `run` run as written from the checkout', async () => {
    const commands = allCommands(ROOT).filter((c) => c.check?.kind === 'run');
    expect(commands.length).to.be.greaterThan(4);
    // A program's --help already ran, as written, in the flags test above (exit 0 asserted there).
    const helpCommands = new Set(FLAG_PROGRAMS.map((p) => p.helpCommand));
    expect(await runAll(commands.filter((c) => !helpCommands.has(c.command)), (c) => c)).to.deep.equal([]);
  });

  it('the commands marked `stack` run as written against the running services', async () => {
    await fleet!.untilRoutable();
    const commands = allCommands(ROOT).filter((c) => c.check?.kind === 'stack');
    expect(commands.length).to.be.greaterThan(20);
    expect(await runAll(commands, (c) => onFleet(c, fleet!.ports))).to.deep.equal([]);
  });
});
