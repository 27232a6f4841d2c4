/**
 * The docs generator's own flags (`npm run docs -- --help`), parsed by the services' table parser
 * so the tool reads and fails like every other command here.
 */
import { flagsHelp, parseFlags, type FlagValues } from '../../shared/config/flags.js';

export const DOCS_FLAGS = {
  check: { type: 'bool', default: false, help: 'write nothing: list every stale generated block, plot or page and exit 1 if there is one' },
  live: { type: 'bool', default: true, help: 'start directory-svc, router-svc and meta-svc (SQLite and Redis) to read their registries for the metrics reference' },
  screenshot: { type: 'bool', default: true, help: 'retake docs/images/status-page.png: the local stack and headless Chromium (not with --check)' },
} as const;

export type DocsFlags = FlagValues<typeof DOCS_FLAGS>;

export const DOCS_USAGE = [
  'Usage: npm run docs -- [--name=value ...]   (node --import tsx scripts/docs/generate-docs.ts)',
  '',
  'Writes every generated part of the docs: flag and config-file tables, the gRPC and metrics',
  'references, benchmark tables and plots, the commands list and the status page screenshot.',
].join('\n');

export function docsHelp(): string {
  return flagsHelp(DOCS_USAGE, DOCS_FLAGS);
}

export function parseDocsArgs(argv: readonly string[]): DocsFlags | 'help' {
  const parsed = parseFlags(DOCS_FLAGS, argv);
  return parsed.kind === 'help' ? 'help' : parsed.flags;
}
