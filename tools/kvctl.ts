/**
 * kvctl (`node dist/tools/kvctl.js <command>`, or `node --import tsx tools/kvctl.ts`): the
 * directory's gRPC diagnostics as aligned tables or raw JSON. The only kvctl module that reads
 * process.argv or exits.
 *
 * Exit codes: 0 answered; 2 bad command, flag or tokens file (one stderr line); 1 the call failed
 * (one stderr line naming the rpc, address and grpc status).
 */
import { isConfigError } from '../shared/config/config-error.js';
import type { GrpcClientTls } from '../shared/security/grpc-tls.js';
import { readClientTls } from '../shared/security/tls-files.js';
import { DirectoryClient, KvctlRpcError } from './kvctl/directory-client.js';
import { kvctlHelp, parseKvctlArgs, readTokensFile, type KvctlOptions } from './kvctl/kvctl-flags.js';
import { renderInstances, renderQuery, renderStats, renderStreams } from './kvctl/render.js';

/** The answer to print: the raw message (for --json) and its table. */
interface Answer {
  readonly raw: unknown;
  readonly text: string;
}

async function answer(opts: KvctlOptions, tokenIds: readonly number[] | null, client: DirectoryClient): Promise<Answer> {
  switch (opts.command) {
    case 'streams': {
      const res = await client.listStreams();
      return { raw: res, text: renderStreams(res) };
    }
    case 'instances': {
      const res = await client.listInstances();
      return { raw: res, text: renderInstances(res) };
    }
    case 'query': {
      const res = await client.query(tokenIds ?? [], opts.model, opts.cacheSalt);
      return { raw: res, text: renderQuery(res) };
    }
    case 'stats': {
      const res = await client.getStats();
      return { raw: res, text: renderStats(res) };
    }
  }
}

/** One stderr line for a failed call; UNIMPLEMENTED ListInstances is an older directory, not a fault. */
function rpcErrorLine(e: KvctlRpcError): string {
  if (e.rpc === 'ListInstances' && e.code === 'UNIMPLEMENTED') return `kvctl: directory at ${e.address} does not support ListInstances yet`;
  return `kvctl: ${e.message}`;
}

async function main(argv: readonly string[]): Promise<number> {
  let opts: KvctlOptions | 'help';
  let tokenIds: readonly number[] | null;
  let tls: GrpcClientTls | null;
  try {
    opts = parseKvctlArgs(argv);
    if (opts === 'help') {
      process.stdout.write(kvctlHelp());
      return 0;
    }
    tokenIds = opts.command === 'query' ? (opts.tokenIds ?? readTokensFile(opts.tokensFile)) : null;
    tls = readClientTls(opts);
  } catch (e) {
    if (!isConfigError(e)) throw e;
    process.stderr.write(`kvctl: ${e.message}\n`);
    return 2;
  }
  const client = new DirectoryClient({ addresses: opts.directoryAddrs, internalApiToken: opts.internalApiToken, tls, timeoutMs: opts.timeoutMs });
  try {
    const a = await answer(opts, tokenIds, client);
    process.stdout.write(opts.json ? JSON.stringify(a.raw, null, 2) + '\n' : a.text);
    return 0;
  } catch (e) {
    if (!(e instanceof KvctlRpcError)) throw e;
    process.stderr.write(rpcErrorLine(e) + '\n');
    return 1;
  } finally {
    client.close();
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    process.exitCode = code;
  },
  (e: unknown) => {
    process.stderr.write(`kvctl: unexpected failure: ${e instanceof Error ? e.message : String(e)}\n`);
    process.exitCode = 1;
  },
);
