// The generated parts of the docs against the code they come from, without starting anything:
// every generated block and plot equals what `npm run docs` writes today; what is written by hand
// but has a machine-readable counterpart (meta-svc config keys, benchmark flags, alert runbooks)
// agrees with it; and every shell command a page shows says how it is checked. The references that
// need running services are checked in docs.live.test.ts.
import { expect } from 'chai';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import GithubSlugger from 'github-slugger';
import { alertRules } from '../../scripts/docs/alerts-reference.js';
import { allCommands, blocksInPages, COMMANDS_BLOCK, fillPages, LIVE_BLOCKS, plotFiles, pureBlocks } from '../../scripts/docs/docs-build.js';
import { metaConfigAccepts } from '../../scripts/docs/meta-config-reference.js';
import { SCREENSHOT_FILE } from '../../scripts/docs/status-screenshot.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const FIX = 'run `npm run docs -- --live=false --screenshot=false` and commit what it rewrites';

function page(path: string): string {
  return readFileSync(join(ROOT, path), 'utf8');
}

/** The lines of `text` from the heading `heading` to the next heading of the same or a higher level. */
function section(text: string, heading: string): string {
  const lines = text.split('\n');
  const start = lines.findIndex((l) => l === heading);
  if (start < 0) throw new Error(`no heading ${heading}`);
  const level = /^#+/.exec(heading)![0].length;
  const end = lines.findIndex((l, i) => i > start && /^#+ /.test(l) && /^#+/.exec(l)![0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

describe('docs: generated parts are current (npm run docs)', function () {
  this.timeout(60000);

  it('every generated block a page carries is what the generator writes from today\'s code and bench/results/', () => {
    const stale = fillPages(ROOT, pureBlocks(ROOT))
      .filter((u) => u.after !== u.before)
      .map((u) => `${u.page}: ${u.staleBlocks.join(', ')}`);
    expect(stale, `stale generated blocks — ${FIX}:\n${stale.join('\n')}`).to.deep.equal([]);
  });

  it('every generated block has a page, and no page carries a block nobody generates', () => {
    const present = blocksInPages(ROOT);
    const generated = new Set([...pureBlocks(ROOT).keys(), ...LIVE_BLOCKS, COMMANDS_BLOCK]);
    expect([...generated].filter((b) => !present.has(b)), 'blocks no page carries').to.deep.equal([]);
    expect([...present].filter((b) => !generated.has(b)), 'blocks no generator writes').to.deep.equal([]);
  });

  it('the benchmark plots are the SVGs the generator draws from bench/results/latest.json', async () => {
    const plots = await plotFiles(ROOT);
    expect(plots.length).to.equal(3);
    expect(plots.filter((p) => p.stale).map((p) => p.file), `stale plots — ${FIX}`).to.deep.equal([]);
  });

  it('the status page screenshot is a PNG in the docs, shown by the README and the health page', () => {
    const png = readFileSync(join(ROOT, SCREENSHOT_FILE));
    expect(png.subarray(0, 8).toString('hex'), 'PNG signature').to.equal('89504e470d0a1a0a');
    expect(statSync(join(ROOT, SCREENSHOT_FILE)).size).to.be.greaterThan(20_000);
    expect(page('README.md')).to.include(`](${SCREENSHOT_FILE})`);
    expect(page('docs/operations/health.md')).to.include('](../images/status-page.png)');
  });

  it('every meta-svc config key the configuration page lists is one the parser accepts', () => {
    const lines = section(page('docs/reference/configuration.md'), '## meta-svc config file').split('\n');
    const start = lines.indexOf('| key | default | accepted |');
    const end = lines.findIndex((l, i) => i > start && !l.startsWith('|'));
    const keys = lines.slice(start + 2, end).map((l) => /^\| `([a-z_.[\]]+)` \|/.exec(l)?.[1] ?? `unreadable row: ${l}`);
    expect(keys.length, 'keys listed').to.be.greaterThan(25);
    expect(keys.filter((k) => !metaConfigAccepts(k)), 'keys meta-svc refuses as unknown').to.deep.equal([]);
    expect(metaConfigAccepts('http.no_such_key'), 'the check can fail').to.equal(false);
  });

  it('every flag a benchmark reads from its command line is in the benchmarks page\'s flag table', () => {
    const runAll = page('bench/run-all.ts');
    const files = ['bench/run-all.ts', ...[...runAll.matchAll(/file: '([^']+)'/g)].map((m) => m[1]!)];
    expect(files.length).to.be.greaterThan(10);
    const read = new Map<string, string>();
    for (const file of files) {
      for (const line of page(file).split('\n')) {
        if (!/process\.argv|numberArg\(|numArg\(/.test(line)) continue;
        for (const m of line.matchAll(/['"`](--[a-z][a-z0-9_-]*)/g)) read.set(m[1]!, file);
        for (const m of line.matchAll(/numArg\('([a-z_]+)'/g)) read.set(`--${m[1]!}`, file);
      }
    }
    expect(read.size, 'flags found in the benchmarks').to.be.greaterThan(15);
    const table = section(page('docs/benchmarks.md'), '### Flags');
    const missing = [...read].filter(([flag]) => !table.includes(`\`${flag}`)).map(([flag, file]) => `${flag} (${file})`);
    expect(missing, 'benchmark flags missing from docs/benchmarks.md#flags').to.deep.equal([]);
  });

  it('every alert of a rules file under deploy/ has a "what to do" section on the alerts page', () => {
    const slugger = new GithubSlugger();
    const headings = new Set(
      page('docs/operations/alerts.md')
        .split('\n')
        .filter((l) => /^#{2,4} /.test(l))
        .map((l) => slugger.slug(l.replace(/^#+ /, '').replace(/`/g, ''))),
    );
    const missing = alertRules(ROOT).filter((r) => !headings.has(r.alert.toLowerCase())).map((r) => `${r.alert} (${r.file})`);
    expect(missing, 'alerts without a runbook heading named after them').to.deep.equal([]);
  });

  it('every shell command a page shows says how it is checked; covered-by names files that exist', () => {
    const commands = allCommands(ROOT);
    expect(commands.length).to.be.greaterThan(40);
    const unchecked = commands.filter((c) => c.check === null).map((c) => `${c.page}:${c.line}: ${c.problem}: ${c.command}`);
    expect(unchecked, 'commands without a docs-test annotation').to.deep.equal([]);
    const missing = commands.flatMap((c) => (c.check?.kind === 'covered-by' ? c.check.paths.filter((p) => !existsSync(join(ROOT, p))).map((p) => `${c.page}:${c.line}: ${p}`) : []));
    expect(missing, 'covered-by files that do not exist').to.deep.equal([]);
  });
});
