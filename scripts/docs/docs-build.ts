/**
 * Everything generated in the docs, computed in one place: the content of every generated block
 * (by block name) and every plot file. `generate-docs.ts` writes them; the docs test compares them
 * with the checked-in copies. The pure parts need nothing running; the metrics blocks need the
 * facts `collectLiveFacts` reads from the running services.
 */
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { DEFAULT_META_CONFIG_JSON } from '../../meta-svc/config/default-meta-config.js';
import { kvctlHelp } from '../../tools/kvctl/kvctl-flags.js';
import { alertRules, alertsMarkdown } from './alerts-reference.js';
import { headlineMarkdown, readBenchResults } from './bench-results.js';
import { benchPlots, renderPlot } from './bench-plots.js';
import { clusterMarkdown, scaleFullMarkdown, SCALE_FULL_FILE, summaryMarkdown, sweepMarkdown, targetsMarkdown } from './bench-tables.js';
import type { BenchLine } from './bench-results.js';
import { CONFIG_OBJECTS, configTableMarkdown } from './config-file-reference.js';
import { commandsMarkdown, pageCommands, type DocCommand } from './doc-commands.js';
import { docPages } from './doc-pages.js';
import { FLAG_PROGRAMS, flagTableMarkdown } from './flag-reference.js';
import { fillBlocks, findBlocks } from './generated-blocks.js';
import { grpcReferenceMarkdown } from './grpc-reference.js';
import { SERVICE_NAMES, type LiveFacts } from './live-services.js';
import { storageKindsMarkdown } from './meta-config-reference.js';
import { metaRpcMarkdown } from './meta-rpc-reference.js';
import { metricsMarkdown } from './metrics-reference.js';

/** Block names whose content the live services decide. */
export const LIVE_BLOCKS: readonly string[] = SERVICE_NAMES.map((s) => `metrics/${s}`);
/** The block listing every command: computed last, from the pages with every other block filled. */
export const COMMANDS_BLOCK = 'commands/list';

/** A generated block's content, between blank lines so tables and lists render. */
function body(text: string): string {
  return `\n${text.trimEnd()}\n`;
}

function fenced(lang: string, text: string): string {
  return body(`\`\`\`${lang}\n${text.trimEnd()}\n\`\`\``);
}

/** Every block that needs nothing running. */
export function pureBlocks(root: string): Map<string, string> {
  const out = new Map<string, string>();
  for (const p of FLAG_PROGRAMS) out.set(`flags/${p.name}`, body(flagTableMarkdown(p)));
  for (const s of CONFIG_OBJECTS) out.set(`config/${s.name}`, body(configTableMarkdown(s)));
  out.set('config/meta-storage-kinds', body(storageKindsMarkdown()));
  out.set('config/meta-default', fenced('json', JSON.stringify(JSON.parse(DEFAULT_META_CONFIG_JSON), null, 2)));
  out.set('grpc/kvdirectory', body(grpcReferenceMarkdown(root)));
  out.set('http/meta-rpcs', body(metaRpcMarkdown()));
  out.set('help/kvctl', fenced('text', kvctlHelp()));
  const bench = readBenchResults(root);
  out.set('bench/headline', body(headlineMarkdown(bench)));
  out.set('bench/summary', body(summaryMarkdown(bench)));
  out.set('bench/cluster', body(clusterMarkdown(bench)));
  out.set('bench/targets', body(targetsMarkdown(bench)));
  out.set('bench/sweep', body(sweepMarkdown(bench)));
  out.set('bench/scale-full', body(scaleFullMarkdown(readJsonLines(join(root, SCALE_FULL_FILE)))));
  out.set('alerts/rules', body(alertsMarkdown(alertRules(root))));
  return out;
}

function readJsonLines(path: string): BenchLine[] {
  return readFileSync(path, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as BenchLine);
}

/** The metrics blocks, from the running services' registries. */
export function liveBlocks(facts: LiveFacts): Map<string, string> {
  const out = new Map<string, string>();
  for (const s of SERVICE_NAMES) out.set(`metrics/${s}`, body(metricsMarkdown(s, facts.metrics.get(s) ?? [])));
  return out;
}

/** A page's text as it is and as the generator would write it. */
export interface PageUpdate {
  readonly page: string;
  readonly before: string;
  readonly after: string;
  /** Names of the blocks whose content differs. */
  readonly staleBlocks: readonly string[];
}

/**
 * Every page with `blocks` filled in, then the commands list filled from those texts. Blocks the
 * map lacks (e.g. the live ones when the services were not started) are left as they are.
 */
export function fillPages(root: string, blocks: ReadonlyMap<string, string>): PageUpdate[] {
  const pages = docPages(root);
  const texts = new Map(pages.map((p) => [p, readFileSync(join(root, p), 'utf8')]));
  const filled = new Map<string, string>();
  for (const [page, text] of texts) filled.set(page, fillBlocks(text, page, withExisting(text, page, blocks)));
  const commands = pages.flatMap((p) => pageCommands(p, filled.get(p)!));
  const withCommands = new Map(blocks);
  withCommands.set(COMMANDS_BLOCK, body(commandsMarkdown(commands)));
  return pages.map((page) => {
    const before = texts.get(page)!;
    const after = fillBlocks(filled.get(page)!, page, withExisting(filled.get(page)!, page, withCommands));
    const old = new Map(findBlocks(before, page).map((b) => [b.name, b.content]));
    const staleBlocks = findBlocks(after, page)
      .filter((b) => old.get(b.name) !== b.content)
      .map((b) => b.name);
    return { page, before, after, staleBlocks };
  });
}

/** `blocks`, plus the page's current content for any block the map does not have. */
function withExisting(text: string, page: string, blocks: ReadonlyMap<string, string>): Map<string, string> {
  const out = new Map(blocks);
  for (const b of findBlocks(text, page)) if (!out.has(b.name)) out.set(b.name, b.content);
  return out;
}

/** Names of every block some page carries. */
export function blocksInPages(root: string): Set<string> {
  const out = new Set<string>();
  for (const page of docPages(root)) for (const b of findBlocks(readFileSync(join(root, page), 'utf8'), page)) out.add(b.name);
  return out;
}

/** Every command the pages show (with all blocks as checked in). */
export function allCommands(root: string): DocCommand[] {
  return docPages(root).flatMap((p) => pageCommands(p, readFileSync(join(root, p), 'utf8')));
}

/** A generated file and whether the checked-in copy equals it. */
export interface FileUpdate {
  readonly file: string;
  readonly content: string;
  readonly stale: boolean;
}

export async function plotFiles(root: string): Promise<FileUpdate[]> {
  const bench = readBenchResults(root);
  const out: FileUpdate[] = [];
  for (const plot of benchPlots(bench)) {
    const content = await renderPlot(plot);
    const path = join(root, plot.file);
    out.push({ file: plot.file, content, stale: !existsSync(path) || readFileSync(path, 'utf8') !== content });
  }
  return out;
}
