/**
 * meta-svc entry point (`node dist/meta-svc/main.js`, or without a build
 * `node --import tsx meta-svc/main.ts`): the KVCM-compatible MetaService (kvcm-meta) as a process
 * of its own, so its store work never stalls the directory's event loop (architecture.md). The
 * only module that reads process.argv and process.env:
 *
 *   flags → §8 config (file, then the flags given on the command line) → store → MetaService
 *
 * Exit codes: 0 after a clean SIGINT/SIGTERM stop (§9.3 drain); 2 for a bad flag or config file,
 * with one stderr line per problem; 1 when the store or the listener cannot start, or a stop hangs.
 */
import { metaHelp, parseMetaFlags, type MetaFlags } from '../shared/config/meta-flags.js';
import { createLogger } from '../shared/log/logger.js';
import { ServiceShutdown, configOrExit } from '../shared/process/service-main.js';
import type { MetaStoreLocation } from '../shared/config/meta-store-url.js';
import { loadMetaConfig } from './config/load-meta-config.js';
import type { MetaConfig } from './config/meta-config.js';
import { startMetaService } from './meta-service.js';
import { openMetaStore } from './store/open-meta-store.js';

/** §9.3: exit within 10 s of SIGTERM. */
const STOP_DEADLINE_MS = 10000;

interface Startup {
  readonly flags: MetaFlags;
  readonly config: MetaConfig;
  readonly store: MetaStoreLocation;
}

/** Flags, then the §8 config with the given flags applied; null after printing the config errors. */
function loadStartup(argv: readonly string[], env: NodeJS.ProcessEnv): Startup | 'help' | null {
  const parsed = configOrExit(() => parseMetaFlags(argv, env));
  if (parsed.kind === 'help') return 'help';
  const { flags, given } = parsed;
  const storeGiven = given.has('meta_store');
  const loaded = loadMetaConfig({
    configFile: flags.metaConfigFile,
    httpPortOverride: given.has('http_port') ? flags.httpPort : undefined,
    dbPathOverride: storeGiven && flags.store.kind === 'sqlite' ? flags.store.path : undefined,
    nodeIdOverride: given.has('node_id') && flags.nodeId !== '' ? flags.nodeId : undefined,
  });
  if (!loaded.ok) {
    for (const line of loaded.errors) console.error(line);
    return null;
  }
  // Without --meta_store the config file's `store` (or its default) decides.
  const store: MetaStoreLocation = storeGiven ? flags.store : { kind: 'sqlite', path: loaded.config.store.path };
  return { flags, config: loaded.config, store };
}

async function run(): Promise<void> {
  const startup = loadStartup(process.argv.slice(2), process.env);
  if (startup === 'help') {
    process.stdout.write(metaHelp());
    return;
  }
  if (startup === null) process.exit(2);
  const { flags, config, store: location } = startup;
  const log = createLogger('meta-svc', flags.logLevel);
  const shutdown = new ServiceShutdown(log, STOP_DEADLINE_MS);
  try {
    const store = await openMetaStore(location, config);
    const meta = await startMetaService({ config, store, logger: log, internalApiToken: flags.internalApiToken, processMetrics: true });
    shutdown.started.push({ name: 'meta', close: () => meta.close() });
    log.info({ http_port: meta.port, node_id: config.nodeId, store: location.kind }, 'meta-svc started');
  } catch (e) {
    await shutdown.failStart(e);
  }
}

void run();
