/**
 * `npm run docs`: writes every generated part of the docs in one go — the generated blocks of
 * every page (flag, config-file, gRPC, HTTP and metrics references; benchmark tables; the commands
 * list), the benchmark plots and the status page screenshot. `--check` writes nothing and exits 1
 * naming what is stale (the docs test does the same checks in `npm test`).
 *
 * Exit codes: 0 done (or nothing stale); 1 stale (--check) or a generator failed; 2 bad flag.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { configOrExit } from '../../shared/process/service-main.js';
import { blocksInPages, fillPages, liveBlocks, plotFiles, pureBlocks, COMMANDS_BLOCK } from './docs-build.js';
import { docsHelp, parseDocsArgs } from './docs-flags.js';
import { collectLiveFacts } from './live-services.js';
import { SCREENSHOT_FILE, takeStatusScreenshot } from './status-screenshot.js';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

async function main(): Promise<number> {
  const flags = configOrExit(() => parseDocsArgs(process.argv.slice(2)));
  if (flags === 'help') {
    process.stdout.write(docsHelp());
    return 0;
  }
  const blocks = pureBlocks(ROOT);
  if (flags.live) {
    console.error('[docs] starting directory-svc, router-svc and meta-svc to read their registries');
    for (const [name, content] of liveBlocks(await collectLiveFacts(ROOT))) blocks.set(name, content);
  }
  const present = blocksInPages(ROOT);
  const unused = [...blocks.keys(), COMMANDS_BLOCK].filter((b) => !present.has(b));
  if (unused.length > 0) throw new Error(`no page carries the generated block(s) ${unused.join(', ')}`);

  const stale: string[] = [];
  for (const update of fillPages(ROOT, blocks)) {
    if (update.after === update.before) continue;
    stale.push(`${update.page}: ${update.staleBlocks.join(', ')}`);
    if (!flags.check) writeFileSync(join(ROOT, update.page), update.after);
  }
  for (const plot of await plotFiles(ROOT)) {
    if (!plot.stale) continue;
    stale.push(plot.file);
    if (!flags.check) {
      mkdirSync(dirname(join(ROOT, plot.file)), { recursive: true });
      writeFileSync(join(ROOT, plot.file), plot.content);
    }
  }
  if (flags.check) {
    for (const s of stale) console.error(`[docs] stale: ${s}`);
    console.error(stale.length === 0 ? '[docs] every generated part is up to date' : `[docs] ${stale.length} stale: run npm run docs`);
    return stale.length === 0 ? 0 : 1;
  }
  for (const s of stale) console.error(`[docs] wrote ${s}`);
  if (flags.screenshot) {
    console.error(`[docs] taking ${SCREENSHOT_FILE}: local stack + headless Chromium`);
    mkdirSync(dirname(join(ROOT, SCREENSHOT_FILE)), { recursive: true });
    await takeStatusScreenshot(ROOT, join(ROOT, SCREENSHOT_FILE));
    console.error(`[docs] wrote ${SCREENSHOT_FILE}`);
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`[docs] failed: ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
    process.exit(1);
  },
);
