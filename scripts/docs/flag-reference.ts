/**
 * The command-line flag tables of every service and tool, rendered from the same `FlagTable`
 * objects their parsers use (shared/config/flags.ts), so the configuration reference cannot say
 * anything the parser does not do. Pure.
 */
import type { FlagSpec, FlagTable } from '../../shared/config/flags.js';
import { DIRECTORY_FLAGS } from '../../shared/config/directory-flags.js';
import { META_FLAGS } from '../../shared/config/meta-flags.js';
import { ROUTER_FLAGS } from '../../shared/config/router-flags.js';
import { ENGINE_SIM_FLAGS } from '../../tools/engine-sim/engine-sim-flags.js';
import { KVCTL_FLAGS } from '../../tools/kvctl/kvctl-flags.js';
import { STACK_FLAGS } from '../../tools/stack/stack-flags.js';
import { DOCS_FLAGS } from './docs-flags.js';
import { code, markdownTable } from './markdown-table.js';

/** One program whose flags the reference lists. */
export interface FlagProgram {
  /** Block name suffix and the name readers know (`directory-svc`). */
  readonly name: string;
  /** The command that prints the same flags with `--help`, as a reader types it. */
  readonly helpCommand: string;
  readonly table: FlagTable;
}

export const FLAG_PROGRAMS: readonly FlagProgram[] = [
  { name: 'directory-svc', helpCommand: 'node dist/directory-svc/main.js --help', table: DIRECTORY_FLAGS },
  { name: 'router-svc', helpCommand: 'node dist/router-svc/main.js --help', table: ROUTER_FLAGS },
  { name: 'meta-svc', helpCommand: 'node dist/meta-svc/main.js --help', table: META_FLAGS },
  { name: 'engine-sim', helpCommand: 'node dist/tools/engine-sim/cli.js --help', table: ENGINE_SIM_FLAGS },
  { name: 'kvctl', helpCommand: 'node dist/tools/kvctl.js --help', table: KVCTL_FLAGS },
  { name: 'stack', helpCommand: 'npm start -- --help', table: STACK_FLAGS },
  { name: 'docs', helpCommand: 'npm run docs -- --help', table: DOCS_FLAGS },
];

/** The Markdown table of one program's flags, in the order `--help` prints them. */
export function flagTableMarkdown(program: FlagProgram): string {
  const rows = Object.keys(program.table).map((name) => {
    const spec = program.table[name]!;
    return [code(`--${name}`), valueText(spec), defaultText(spec), meaning(spec)];
  });
  const lines = [
    `Generated from \`${tableSource(program.name)}\`; the same text as \`${program.helpCommand}\`.`,
    '',
    markdownTable(['flag', 'value', 'default', 'meaning'], rows),
  ];
  return lines.join('\n');
}

/** Where each program's table is declared (for the reader who wants the code). */
function tableSource(name: string): string {
  switch (name) {
    case 'directory-svc':
      return 'shared/config/directory-flags.ts';
    case 'router-svc':
      return 'shared/config/router-flags.ts';
    case 'meta-svc':
      return 'shared/config/meta-flags.ts';
    case 'engine-sim':
      return 'tools/engine-sim/engine-sim-flags.ts';
    case 'kvctl':
      return 'tools/kvctl/kvctl-flags.ts';
    case 'stack':
      return 'tools/stack/stack-flags.ts';
    case 'docs':
      return 'scripts/docs/docs-flags.ts';
    default:
      throw new Error(`no flag table source for ${name}`);
  }
}

function valueText(spec: FlagSpec): string {
  switch (spec.type) {
    case 'string':
      return spec.placeholder ?? 'string';
    case 'int':
      return `integer ${spec.min}..${spec.max}`;
    case 'float':
      return `number ${spec.min}..${spec.max}`;
    case 'bool':
      return '`true` or `false`';
    case 'enum':
      return spec.values.map((v) => code(v)).join(', ');
    case 'host-port-list':
      return '`host:port[,host:port]`';
    default:
      return assertNever(spec);
  }
}

function defaultText(spec: FlagSpec): string {
  if (spec.default === null) return 'unset';
  if (spec.default === '') return 'empty';
  return code(String(spec.default));
}

function meaning(spec: FlagSpec): string {
  return spec.env === undefined ? spec.help : `${spec.help}; read from \`${spec.env}\` when the flag is absent`;
}

function assertNever(x: never): never {
  throw new Error(`impossible flag spec ${JSON.stringify(x)}`);
}
