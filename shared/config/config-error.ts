/**
 * The one error class of `shared/config/`: a bad flag or a bad config file. `path` names the
 * field (`--grpc_port`, `streams[2].endpoint`); the message is one line, fit to print as the
 * process's only stderr output before exiting with code 2 (architecture.md "Processes and flags").
 */
import { PlainMessageError } from '../errors/domain-error.js';

export class ConfigError extends PlainMessageError {
  readonly class = 'config' as const;
  constructor(
    /** The flag (`--grpc_port`) or JSON field path (`streams[2].endpoint`); '' for the whole input. */
    readonly path: string,
    /** What was expected and what was found, without the path. */
    readonly reason: string,
    /** Overrides the default `<path>: <reason>` message (flags use `invalid --x: ...`). */
    message?: string,
  ) {
    super(message ?? (path === '' ? reason : `${path}: ${reason}`));
  }
}

export function isConfigError(e: unknown): e is ConfigError {
  return e instanceof ConfigError;
}
