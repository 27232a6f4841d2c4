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
import { parseRouterFlags, routerHelp, type RouterFlags } from '../shared/config/router-flags.js';
import { createLogger } from '../shared/log/logger.js';
import { ServiceShutdown, configOrExit } from '../shared/process/service-main.js';
import type { GrpcClientTls } from '../shared/security/grpc-tls.js';
import { readClientTls } from '../shared/security/tls-files.js';
import { ConfigError } from '../shared/config/config-error.js';
import { readModelsFile } from '../shared/config/models-file.js';
import { ModelTokenizers } from '../shared/tokenize/model-tokenizers.js';
import { defaultRenderThreads } from '../shared/tokenize/prompt-tokenizer.js';
import { RouterService } from './router-service.js';

/** A stop that takes longer than this exits 1 rather than hanging. */
const STOP_DEADLINE_MS = 10000;

async function run(): Promise<void> {
  // The logger exists only after the flags are parsed; the tokenizers (loaded with them) report through this.
  let templateSwitchedOff = (label: string, reason: string): void => void [label, reason];
  const startup = configOrExit((): { flags: RouterFlags; grpcTls: GrpcClientTls | null; tokenizers: ModelTokenizers } | 'help' => {
    const parsed = parseRouterFlags(process.argv.slice(2));
    if (parsed.kind === 'help') return 'help';
    const { flags } = parsed;
    if (flags.chatTemplate !== '' && flags.tokenizer === '') throw new ConfigError('--chat_template', 'needs --tokenizer', 'invalid --chat_template: needs --tokenizer (the template renders text for that tokenizer)');
    // The PEM files are read (and loaded once) now, so a bad path or pair is exit 2, not a failed handshake later.
    // So are the tokenizer files (tokenization.md §1, cache-identity §5): a missing or unparsable
    // one, or a bad models-file entry, is exit 2 naming it.
    const tokenizers = ModelTokenizers.load({
      models: flags.modelsFile === '' ? [] : readModelsFile(flags.modelsFile),
      modelsFile: flags.modelsFile,
      defaultDir: flags.tokenizer,
      defaultTemplate: flags.chatTemplate,
      renderThreads: defaultRenderThreads(),
      onTemplateSwitchOff: (label, reason) => templateSwitchedOff(label, reason),
    });
    return { flags, grpcTls: readClientTls(flags), tokenizers };
  });
  if (startup === 'help') {
    process.stdout.write(routerHelp());
    return;
  }
  const { flags, grpcTls, tokenizers } = startup;

  const log = createLogger('router-svc', flags.logLevel);
  templateSwitchedOff = (label, reason) =>
    log.warn({ component: 'tokenizer', tokenizer: label, reason }, 'compiled chat template switched off: every chat is now rendered by the interpreter');
  if (flags.internalApiToken !== '' && grpcTls === null) {
    log.warn('--internal_api_token is set but gRPC to the directory is plaintext: the token crosses the network readable; set --grpc_tls_ca');
  }
  const starting = new AbortController();
  let service: RouterService | null = null;
  const shutdown = new ServiceShutdown(log, STOP_DEADLINE_MS);
  // Closed in reverse: a stop first abandons a start still waiting for the view, then closes the service.
  shutdown.started.push({ name: 'service', close: async () => service?.close() });
  shutdown.started.push({ name: 'start', close: async () => starting.abort() });

  // The view client's retry timers are unref'd (it never holds a process open by itself), so
  // while the directory is unreachable nothing else would keep the event loop, and the process,
  // alive; once the port is open the HTTP server does.
  const waiting = setInterval(() => undefined, 60_000);
  try {
    service = await RouterService.start({ flags, grpcTls, tokenizers, logger: log, signal: starting.signal });
  } catch (e) {
    if (shutdown.stopping) return; // a signal arrived while waiting for the view: stop() exits
    await shutdown.failStart(e);
  } finally {
    clearInterval(waiting);
  }
}

void run();
