/**
 * Structured JSON logs (pino) for both services. Services create one root logger from the
 * `--log_level` flag and hand children (with a `component` binding) to each module; core
 * modules never log, edge modules do.
 */
import { pino, type DestinationStream, type Logger, type LevelWithSilent } from 'pino';

export type { Logger };

/**
 * The internal token wherever a future log line might carry it (a request's headers, gRPC
 * metadata, a flags object): no code logs these today, and this keeps it that way.
 */
export const LOG_REDACT_PATHS: readonly string[] = [
  'headers["x-internal-token"]',
  'req.headers["x-internal-token"]',
  'request.headers["x-internal-token"]',
  'metadata["x-internal-token"]',
  'internalApiToken',
  'flags.internalApiToken',
];

/** `destination` (default stdout) lets a test read the lines this logger writes. */
export function createLogger(service: string, level: LevelWithSilent = 'info', destination?: DestinationStream): Logger {
  const opts = { base: { service }, level, timestamp: pino.stdTimeFunctions.isoTime, redact: { paths: [...LOG_REDACT_PATHS], censor: '[redacted]' } };
  return destination === undefined ? pino(opts) : pino(opts, destination);
}

/** A logger that drops everything: the default for modules under test. */
export const silentLogger: Logger = pino({ level: 'silent' });
