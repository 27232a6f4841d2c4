/**
 * The identity source of engines.md §3 rule 4 and §4.3: which process is behind an engine's
 * address, read from its `/metrics` (`process_start_time_seconds`). The subscriber asks it on
 * reconnect whether the process it had synchronized with is still the one publishing; the
 * engines-file discovery implements it from its periodic scrapes.
 *
 * Identity values: a string (the process start time as exported), `null` when the engine's
 * metrics are reachable but carry no identity (Prometheus multiprocess mode: no identity source),
 * `undefined` before any successful scrape.
 */
export type EngineIdentity = string | null | undefined;

export interface EngineIdentitySource {
  /** The identity from the latest successful scrape (no I/O). */
  current(): EngineIdentity;
  /**
   * A scrape started by this call (never a cached answer): resolves with the identity it read
   * (`string` or `null`), rejects when `/metrics` cannot be read or `signal` aborts.
   */
  scrapeNow(signal: AbortSignal): Promise<string | null>;
}
