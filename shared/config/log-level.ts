/** `--log_level` values of both services: pino's levels (shared/log/logger.ts). */
export const LOG_LEVEL_VALUES = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVEL_VALUES)[number];
