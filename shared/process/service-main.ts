/**
 * The start-up and shutdown plumbing every process entry point shares (directory-svc/main.ts,
 * router-svc/main.ts, tools/engine-sim/cli.ts): a bad flag is one stderr line and exit 2; a start
 * failure is a fatal log line and exit 1; SIGINT/SIGTERM stop what was started in reverse start
 * order and exit 0; a second signal, or a stop that outlasts its deadline, exits at once.
 */
import { isConfigError } from '../config/config-error.js';
import type { Logger } from '../log/logger.js';

/** Something an entry point started and must stop, in reverse start order. */
export interface Stoppable {
  readonly name: string;
  close(): Promise<void>;
}

/**
 * Runs `load` (flag parsing, config files): a ConfigError ends the process with its one-line
 * message on stderr and exit 2; anything else is rethrown.
 */
export function configOrExit<T>(load: () => T): T {
  try {
    return load();
  } catch (e) {
    if (!isConfigError(e)) throw e;
    console.error(e.message);
    process.exit(2);
  }
}

/** The stop side of one process: what it started, and the one stop that closes it. */
export class ServiceShutdown {
  /** Parts started so far; push each as soon as it runs. */
  readonly started: Stoppable[] = [];
  private stoppingNow = false;

  /** Stops on SIGINT/SIGTERM (exit 0). A stop taking longer than `deadlineMs` exits 1. */
  constructor(
    private readonly log: Logger,
    private readonly deadlineMs: number,
  ) {
    process.on('SIGINT', () => void this.stop('SIGINT', 0));
    process.on('SIGTERM', () => void this.stop('SIGTERM', 0));
  }

  /** True once a stop began (a signal may arrive while still starting). */
  get stopping(): boolean {
    return this.stoppingNow;
  }

  /** Closes every started part in reverse order (a failure is logged, not fatal), then exits `code`. */
  async stop(reason: string, code: number): Promise<never> {
    if (this.stoppingNow) process.exit(code === 0 ? 1 : code); // a second signal: do not wait any longer
    this.stoppingNow = true;
    this.log.info({ reason }, 'stopping');
    const deadline = setTimeout(() => {
      this.log.error({ deadline_ms: this.deadlineMs }, 'stop deadline passed; exiting');
      process.exit(1);
    }, this.deadlineMs);
    deadline.unref();
    for (const s of this.started.reverse()) {
      try {
        await s.close();
      } catch (e) {
        this.log.warn({ part: s.name, err: e instanceof Error ? e.message : String(e) }, 'close failed');
      }
    }
    this.log.info('stopped');
    process.exit(code);
  }

  /** A start that failed: one fatal line (with `fields`), then stop with exit 1. */
  failStart(e: unknown, fields: Record<string, unknown> = {}): Promise<never> {
    this.log.fatal({ err: e instanceof Error ? e.message : String(e), ...fields }, 'start failed');
    return this.stop('start failed', 1);
  }
}
