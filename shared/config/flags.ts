/**
 * A small declarative command-line flag parser shared by both services (architecture.md
 * "Processes and flags"). Flags keep the engine's `--name=value` style; `--name value` and a bare
 * boolean `--flag` are accepted too. Each service declares one table (name → type, default,
 * range, help line); parsing is pure: argv (and an env object for the few documented fallbacks)
 * in, a frozen camelCase object out, or a `ConfigError` whose message is the one line to print.
 */
import { ConfigError } from './config-error.js';

interface FlagBase {
  /** One line for `--help`. */
  readonly help: string;
  /** camelCase key in the parsed object, when the default (snake_case → camelCase) lacks a unit. */
  readonly key?: string;
  /** Environment variable read when the flag is absent (documented fallbacks only, e.g. kvcm-meta §8). */
  readonly env?: string;
}

export interface StringFlag extends FlagBase {
  readonly type: 'string';
  readonly default: string;
  /** The value names something that must exist when given (an empty `--x=` is still the default ''). */
  readonly placeholder?: string;
}
export interface IntFlag extends FlagBase {
  readonly type: 'int';
  /** null: unset unless given. */
  readonly default: number | null;
  readonly min: number;
  readonly max: number;
}
export interface FloatFlag extends FlagBase {
  readonly type: 'float';
  readonly default: number | null;
  readonly min: number;
  readonly max: number;
}
export interface BoolFlag extends FlagBase {
  readonly type: 'bool';
  readonly default: boolean;
}
export interface EnumFlag extends FlagBase {
  readonly type: 'enum';
  readonly values: readonly string[];
  readonly default: string;
}
export interface HostPortListFlag extends FlagBase {
  readonly type: 'host-port-list';
  /** Written as on the command line, e.g. `127.0.0.1:2379`; parsed like any given value. */
  readonly default: string;
  /** An empty value is the empty list (`--etcd_addr=`: no etcd at all) rather than an error. */
  readonly emptyMeansNone?: boolean;
}

export type FlagSpec = StringFlag | IntFlag | FloatFlag | BoolFlag | EnumFlag | HostPortListFlag;
export type FlagTable = Readonly<Record<string, FlagSpec>>;

/** One `host:port` of a list flag (`--etcd_addr`, `--directory_addr`). */
export interface HostPort {
  readonly host: string;
  readonly port: number;
}

type CamelCase<S extends string> = S extends `${infer H}_${infer T}` ? `${H}${Capitalize<CamelCase<T>>}` : S;
type KeyOf<K extends string, S> = S extends { readonly key: infer N extends string } ? N : CamelCase<K>;
type ValueOf<S> = S extends { readonly type: 'string' }
  ? string
  : S extends { readonly type: 'int' | 'float'; readonly default: null }
    ? number | null
    : S extends { readonly type: 'int' | 'float' }
      ? number
      : S extends { readonly type: 'bool' }
        ? boolean
        : S extends { readonly type: 'enum'; readonly values: readonly (infer V)[] }
          ? V
          : S extends { readonly type: 'host-port-list' }
            ? readonly HostPort[]
            : never;

/** The parsed, frozen flag object of a table: snake_case names become camelCase keys. */
export type FlagValues<T extends FlagTable> = {
  readonly [K in keyof T & string as KeyOf<K, T[K]>]: ValueOf<T[K]>;
};

/**
 * `given` holds the snake_case names set on the command line (not by default or env), for
 * settings where an explicit flag overrides a config file but the default must not (kvcm-meta §8).
 */
export type ParsedArgs<F> = { readonly kind: 'help' } | { readonly kind: 'flags'; readonly flags: F; readonly given: ReadonlySet<string> };

const INT_RE = /^[+-]?\d+$/;
const FLOAT_RE = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
const HOST_RE = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?)$/;
const TRUE_WORDS = new Set(['true', '1', 'yes', 'on']);
const FALSE_WORDS = new Set(['false', '0', 'no', 'off']);

/**
 * Parses `argv` (without node and script) against `table`. Throws `ConfigError` for an unknown
 * flag, a flag given twice, a positional argument, a missing value or a value out of range.
 * `--help` / `-h` anywhere wins over every other problem, so help always prints.
 */
export function parseFlags<T extends FlagTable>(
  table: T,
  argv: readonly string[],
  env: Readonly<Record<string, string | undefined>> = {},
): ParsedArgs<FlagValues<T>> {
  if (argv.includes('--help') || argv.includes('-h')) return { kind: 'help' };
  const given = new Map<string, string | null>();
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i]!;
    if (!arg.startsWith('--') || arg === '--') {
      throw new ConfigError('', '', `unexpected argument ${JSON.stringify(arg)}: flags are --name=value (see --help)`);
    }
    const eq = arg.indexOf('=');
    const name = eq < 0 ? arg.slice(2) : arg.slice(2, eq);
    const spec = table[name];
    if (spec === undefined) throw unknownFlag(table, name);
    if (given.has(name)) throw new ConfigError(`--${name}`, 'given more than once', `invalid --${name}: given more than once`);
    let raw: string | null;
    if (eq >= 0) raw = arg.slice(eq + 1);
    else if (spec.type === 'bool') raw = null; // bare boolean flag: never swallows the next argument
    else if (i + 1 < argv.length && !argv[i + 1]!.startsWith('--')) raw = argv[++i]!;
    else raw = null;
    given.set(name, raw);
  }
  const out: Record<string, unknown> = {};
  for (const name of Object.keys(table)) {
    const spec = table[name]!;
    const key = spec.key ?? camelCase(name);
    let raw: string | null | undefined = given.get(name);
    const isGiven = given.has(name);
    if (!isGiven && spec.env !== undefined && env[spec.env] !== undefined && env[spec.env] !== '') raw = env[spec.env]!;
    out[key] = !isGiven && raw === undefined ? defaultValue(name, spec) : convert(name, spec, raw ?? null);
  }
  return { kind: 'flags', flags: Object.freeze(out) as FlagValues<T>, given: new Set(given.keys()) };
}

/** `--help` text generated from the table: usage line, then one entry per flag. */
export function flagsHelp(usage: string, table: FlagTable): string {
  const lines = [usage, '', 'Flags (--name=value; --name value and bare --bool also accepted):'];
  for (const name of Object.keys(table)) {
    const spec = table[name]!;
    const head = `  --${name}=<${placeholder(spec)}>`;
    lines.push(head);
    const extras = [describeDefault(spec)];
    if (spec.env !== undefined) extras.push(`env ${spec.env} when absent`);
    lines.push(`      ${spec.help} (${extras.join('; ')})`);
  }
  lines.push('  --help', '      print this text and exit');
  return lines.join('\n') + '\n';
}

/** Parses one `host:port[,host:port]` list; `what` names the flag or field in the error. */
export function parseHostPortList(text: string): readonly HostPort[] | null {
  const parts = text.split(',');
  const out: HostPort[] = [];
  for (const part of parts) {
    const p = part.trim();
    const colon = p.lastIndexOf(':');
    if (colon <= 0) return null;
    const host = p.slice(0, colon);
    const portText = p.slice(colon + 1);
    if (!HOST_RE.test(host) || !/^\d{1,5}$/.test(portText)) return null;
    const port = Number(portText);
    if (port < 1 || port > 65535) return null;
    out.push(Object.freeze({ host, port }));
  }
  return Object.freeze(out);
}

function convert(name: string, spec: FlagSpec, raw: string | null): unknown {
  const bad = (): ConfigError => {
    const got = raw === null ? 'no value' : JSON.stringify(raw);
    return new ConfigError(`--${name}`, `expected ${expectation(spec)}, got ${got}`, `invalid --${name}: expected ${expectation(spec)}, got ${got}`);
  };
  switch (spec.type) {
    case 'string':
      if (raw === null) throw bad();
      return raw;
    case 'int': {
      if (raw === null || !INT_RE.test(raw)) throw bad();
      const n = Number(raw);
      if (!Number.isSafeInteger(n) || n < spec.min || n > spec.max) throw bad();
      return n;
    }
    case 'float': {
      if (raw === null || !FLOAT_RE.test(raw)) throw bad();
      const n = Number(raw);
      if (!Number.isFinite(n) || n < spec.min || n > spec.max) throw bad();
      return n;
    }
    case 'bool': {
      if (raw === null) return true;
      const w = raw.toLowerCase();
      if (TRUE_WORDS.has(w)) return true;
      if (FALSE_WORDS.has(w)) return false;
      throw bad();
    }
    case 'enum': {
      if (raw === null) throw bad();
      // Case-insensitive, normalized to the table's spelling: `--load_balance_policy=car` is CAR.
      const hit = spec.values.find((v) => v.toLowerCase() === raw.toLowerCase());
      if (hit === undefined) throw bad();
      return hit;
    }
    case 'host-port-list': {
      if (raw === '' && spec.emptyMeansNone === true) return Object.freeze([]);
      const list = raw === null ? null : parseHostPortList(raw);
      if (list === null) throw bad();
      return list;
    }
    default:
      return assertNever(spec);
  }
}

function defaultValue(name: string, spec: FlagSpec): unknown {
  if (spec.type === 'host-port-list') return convert(name, spec, spec.default);
  return spec.default;
}

function expectation(spec: FlagSpec): string {
  switch (spec.type) {
    case 'string':
      return 'a value';
    case 'int':
      return `an integer in ${spec.min}..${spec.max}`;
    case 'float':
      return `a number in [${spec.min}, ${spec.max}]`;
    case 'bool':
      return 'true or false';
    case 'enum':
      return `one of ${spec.values.join(', ')}`;
    case 'host-port-list':
      return `host:port[,host:port...] with ports in 1..65535${spec.emptyMeansNone === true ? ', or empty for none' : ''}`;
    default:
      return assertNever(spec);
  }
}

function placeholder(spec: FlagSpec): string {
  switch (spec.type) {
    case 'string':
      return spec.placeholder ?? 'string';
    case 'int':
      return `int ${spec.min}..${spec.max}`;
    case 'float':
      return `number ${spec.min}..${spec.max}`;
    case 'bool':
      return 'true|false';
    case 'enum':
      return spec.values.join('|');
    case 'host-port-list':
      return 'host:port[,host:port]';
    default:
      return assertNever(spec);
  }
}

function describeDefault(spec: FlagSpec): string {
  if (spec.default === null) return 'default: unset';
  if (spec.default === '') return 'default: empty';
  return `default: ${String(spec.default)}`;
}

function unknownFlag(table: FlagTable, name: string): ConfigError {
  // `--grpc-port` is a common slip for `--grpc_port`: name the real flag in the one line.
  const alt = name.replace(/-/g, '_');
  const hint = alt !== name && table[alt] !== undefined ? ` (did you mean --${alt}?)` : ' (see --help)';
  return new ConfigError(`--${name}`, 'unknown flag', `unknown flag --${name}${hint}`);
}

function camelCase(name: string): string {
  return name.replace(/_([a-z0-9])/g, (_m, c: string) => c.toUpperCase());
}

function assertNever(x: never): never {
  throw new Error(`impossible flag spec ${JSON.stringify(x)}`);
}
