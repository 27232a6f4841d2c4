/**
 * kvctl's command line: `kvctl <command> [--name=value ...]`, the flags validated by the
 * services' table parser (shared/config/flags.ts) so errors read the same one-line way. Pure apart
 * from `readTokensFile`; the CLI prints a thrown `ConfigError`'s message and exits 2.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../../shared/config/config-error.js';
import { flagsHelp, parseFlags, type HostPort } from '../../shared/config/flags.js';
import { isTokenId } from '../../shared/keys/token-ids.js';

export const KVCTL_COMMANDS = ['streams', 'instances', 'query', 'stats'] as const;
export type KvctlCommandName = (typeof KVCTL_COMMANDS)[number];

export const KVCTL_FLAGS = {
  directory_addr: {
    type: 'host-port-list',
    default: '127.0.0.1:50051',
    help: 'directory-svc gRPC addresses; the next one is tried while one is unavailable',
  },
  internal_api_token: { type: 'string', default: '', placeholder: 'token', help: 'sent as x-internal-token metadata when set' },
  grpc_tls_ca: { type: 'string', default: '', placeholder: 'ca.pem', help: "CA (PEM) verifying the directory's gRPC certificate; empty = plaintext gRPC" },
  grpc_tls_cert: { type: 'string', default: '', placeholder: 'cert.pem', help: 'client certificate (PEM) for a directory requiring mutual TLS' },
  grpc_tls_key: { type: 'string', default: '', placeholder: 'key.pem', help: 'private key (PEM) of --grpc_tls_cert' },
  json: { type: 'bool', default: false, help: 'print the raw answer as JSON instead of a table' },
  tokens: { type: 'string', default: '', placeholder: '1,2,3', help: 'query: comma-separated token ids in [0, 2^31)' },
  tokens_file: { type: 'string', default: '', placeholder: 'path', help: 'query: file of token ids (JSON array, or separated by commas/whitespace)' },
  model: { type: 'string', default: '', placeholder: 'name', help: "query: only instances serving this model (or with an unknown list); an adapter's keys are its LoRA keys (cache-identity §2)" },
  cache_salt: { type: 'string', default: '', placeholder: 'salt', help: "query: the request's cache_salt (salts block 0's key, cache-identity §3)" },
  timeout_ms: { type: 'int', default: 5000, min: 1, max: 600000, help: 'deadline of each call' },
} as const;

export interface KvctlOptions {
  readonly command: KvctlCommandName;
  readonly directoryAddrs: readonly HostPort[];
  readonly internalApiToken: string;
  /** `--grpc_tls_ca/cert/key` paths ('' = not given), read by `readClientTls`. */
  readonly grpcTlsCa: string;
  readonly grpcTlsCert: string;
  readonly grpcTlsKey: string;
  readonly json: boolean;
  readonly timeoutMs: number;
  /** query only: ids given inline; null when they come from `tokensFile`. */
  readonly tokenIds: readonly number[] | null;
  /** query only: '' unless --tokens_file was given. */
  readonly tokensFile: string;
  /** query only: `--model`, '' = any. */
  readonly model: string;
  /** query only: `--cache_salt`, '' = unsalted. */
  readonly cacheSalt: string;
}

const USAGE = `Usage: kvctl <command> [--name=value ...]   (node dist/tools/kvctl.js)

Diagnostics over the directory's gRPC API (proto/kvdirectory.proto).

Commands:
  streams     every subscribed stream: state, sequence, residency, kv-events §10 counters
  instances   every discovered instance: lifecycle state, load, heartbeat age, exclusion reason
  query       prefix hits of --tokens / --tokens_file on every stream (routing.md query),
              or on those of --model's instances, keyed under --model / --cache_salt
  stats       directory-wide totals`;

export function kvctlHelp(): string {
  return flagsHelp(USAGE, KVCTL_FLAGS);
}

/**
 * Token ids from text: a JSON array, or integers separated by commas and/or whitespace. `what`
 * names the source in the error (`--tokens`, the file path). Throws `ConfigError`.
 */
export function parseTokenIds(text: string, what: string): number[] {
  const trimmed = text.trim();
  let items: unknown[];
  if (trimmed.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(trimmed);
      if (!Array.isArray(parsed)) throw new Error('not an array');
      items = parsed;
    } catch (e) {
      throw new ConfigError(what, 'bad JSON', `invalid ${what}: not a JSON array of token ids (${e instanceof Error ? e.message : String(e)})`);
    }
  } else {
    items = trimmed === '' ? [] : trimmed.split(/[\s,]+/).filter((s) => s !== '');
  }
  if (items.length === 0) throw new ConfigError(what, 'empty', `invalid ${what}: expected at least one token id`);
  const out: number[] = new Array<number>(items.length);
  for (let i = 0; i < items.length; i++) {
    const item = items[i];
    const n = typeof item === 'number' ? item : typeof item === 'string' && /^\d+$/.test(item) ? Number(item) : NaN;
    if (!isTokenId(n)) {
      throw new ConfigError(what, 'bad token id', `invalid ${what}: token id #${i + 1} ${JSON.stringify(item)} is not an integer in [0, 2^31)`);
    }
    out[i] = n;
  }
  return out;
}

/** Reads and parses `--tokens_file`; an unreadable file is a `ConfigError` too (exit 2). */
export function readTokensFile(path: string): number[] {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = (e as NodeJS.ErrnoException).code ?? (e instanceof Error ? e.message : String(e));
    throw new ConfigError('--tokens_file', 'unreadable', `invalid --tokens_file: cannot read ${path} (${code})`);
  }
  return parseTokenIds(text, `--tokens_file ${path}`);
}

/** argv (without node and script) → options, or 'help'. Throws `ConfigError` with one line. */
export function parseKvctlArgs(argv: readonly string[]): KvctlOptions | 'help' {
  if (argv.includes('--help') || argv.includes('-h') || argv[0] === 'help') return 'help';
  const command = argv[0];
  if (command === undefined || command.startsWith('-')) {
    throw new ConfigError('', 'missing command', `missing command: expected one of ${KVCTL_COMMANDS.join(', ')} (see --help)`);
  }
  if (!(KVCTL_COMMANDS as readonly string[]).includes(command)) {
    throw new ConfigError('', 'unknown command', `unknown command ${JSON.stringify(command)}: expected one of ${KVCTL_COMMANDS.join(', ')}`);
  }
  const parsed = parseFlags(KVCTL_FLAGS, argv.slice(1));
  if (parsed.kind === 'help') return 'help';
  const f = parsed.flags;
  const name = command as KvctlCommandName;
  let tokenIds: number[] | null = null;
  if (name === 'query') {
    const inline = parsed.given.has('tokens');
    const file = parsed.given.has('tokens_file');
    if (inline === file) {
      throw new ConfigError('--tokens', 'exactly one', 'query needs exactly one of --tokens=1,2,3 or --tokens_file=<path>');
    }
    if (inline) tokenIds = parseTokenIds(f.tokens, '--tokens');
    else if (f.tokensFile === '') throw new ConfigError('--tokens_file', 'empty', 'invalid --tokens_file: expected a path');
  } else {
    for (const flag of ['tokens', 'tokens_file', 'model', 'cache_salt'] as const) {
      if (parsed.given.has(flag)) throw new ConfigError(`--${flag}`, 'query only', `invalid --${flag}: only the query command takes it`);
    }
  }
  return Object.freeze({
    command: name,
    directoryAddrs: f.directoryAddr,
    internalApiToken: f.internalApiToken,
    grpcTlsCa: f.grpcTlsCa,
    grpcTlsCert: f.grpcTlsCert,
    grpcTlsKey: f.grpcTlsKey,
    json: f.json,
    timeoutMs: f.timeoutMs,
    tokenIds: tokenIds === null ? null : Object.freeze(tokenIds),
    tokensFile: name === 'query' && tokenIds === null ? f.tokensFile : '',
    model: f.model,
    cacheSalt: f.cacheSalt,
  });
}
