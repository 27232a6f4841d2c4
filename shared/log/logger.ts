/**
 * Structured JSON logs (pino) for both services. Services create one root logger from the
 * `--log_level` flag and hand children (with a `component` binding) to each module; core
 * modules never log, edge modules do.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

export const LOG_LEVELS: readonly LevelWithSilent[] = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export function createLogger(service: string, level: LevelWithSilent = 'info'): Logger {
  return pino({ base: { service }, level, timestamp: pino.stdTimeFunctions.isoTime });
}

/** A logger that drops everything: the default for modules under test. */
export const silentLogger: Logger = pino({ level: 'silent' });
