/**
 * router-svc entry point (`node dist/router-svc/main.js`, or without a build
 * `node --import tsx router-svc/main.ts`). The only module that reads process.argv; it parses the
 * flags, creates the pino logger and handles signals, and RouterService wires the parts
 * (architecture.md "Processes and flags").
 *
 * Exit codes: 0 after a clean SIGINT/SIGTERM stop (also while still waiting for the first view);
 * 2 for a bad flag, with exactly one line on stderr naming it; 1 when the HTTP port cannot be
 * bound or a stop hangs.
 */
import { isConfigError } from '../shared/config/config-error.js';
import { parseRouterFlags, routerHelp, type RouterFlags } from '../shared/config/router-flags.js';
import { createLogger } from '../shared/log/logger.js';
import type { GrpcClientTls } from '../shared/security/grpc-tls.js';
import { readClientTls } from '../shared/security/tls-files.js';
import { RouterService } from './router-service.js';

/** A stop that takes longer than this exits 1 rather than hanging. */
const STOP_DEADLINE_MS = 10000;

async function run(): Promise<void> {
  let flags: RouterFlags;
  let grpcTls: GrpcClientTls | null;
  try {
    const parsed = parseRouterFlags(process.argv.slice(2));
    if (parsed.kind === 'help') {
      process.stdout.write(routerHelp());
      return;
    }
    flags = parsed.flags;
    // The PEM files are read (and loaded once) now, so a bad path or pair is exit 2, not a failed handshake later.
    grpcTls = readClientTls(flags);
  } catch (e) {
    if (isConfigError(e)) {
      console.error(e.message);
      process.exit(2);
    }
    throw e;
  }

  const log = createLogger('router-svc', flags.logLevel);
  if (flags.internalApiToken !== '' && grpcTls === null) {
    log.warn('--internal_api_token is set but gRPC to the directory is plaintext: the token crosses the network readable; set --grpc_tls_ca');
  }
  const starting = new AbortController();
  let service: RouterService | null = null;
  let stopping = false;

  const stop = async (reason: string, code: number): Promise<never> => {
    if (stopping) process.exit(code === 0 ? 1 : code); // a second signal: do not wait any longer
    stopping = true;
    log.info({ reason }, 'stopping');
    const deadline = setTimeout(() => {
      log.error({ deadline_ms: STOP_DEADLINE_MS }, 'stop deadline passed; exiting');
      process.exit(1);
    }, STOP_DEADLINE_MS);
    deadline.unref();
    starting.abort();
    try {
      await service?.close();
    } catch (e) {
      log.warn({ err: e instanceof Error ? e.message : String(e) }, 'close failed');
    }
    log.info('stopped');
    process.exit(code);
  };
  process.on('SIGINT', () => void stop('SIGINT', 0));
  process.on('SIGTERM', () => void stop('SIGTERM', 0));

  // The view client's retry timers are unref'd (it never holds a process open by itself), so
  // while the directory is unreachable nothing else would keep the event loop, and the process,
  // alive; once the port is open the HTTP server does.
  const waiting = setInterval(() => undefined, 60_000);
  try {
    service = await RouterService.start({ flags, grpcTls, logger: log, signal: starting.signal });
  } catch (e) {
    if (stopping) return; // a signal arrived while waiting for the view: stop() exits
    log.fatal({ err: e instanceof Error ? e.message : String(e) }, 'start failed');
    await stop('start failed', 1);
  } finally {
    clearInterval(waiting);
  }
}

void run();
