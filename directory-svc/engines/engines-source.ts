/**
 * The front module of `engines/`: the engines file as a second instance source beside etcd
 * (engines.md §4, §6). It reads `--engines_file` at start (a bad file is a startup error), re-reads
 * it every min(engines_refresh_interval_ms, 5 s), has its DNS entries resolved every
 * `--engines_dns_refresh_ms` (DnsWatcher), and applies the difference in the engines in force:
 * one EngineScraper per engine, which admits its engine into the shared instance table once
 * healthy with a load, and keeps its health, load, identity and KV event sources current. An
 * address joining or leaving a DNS name is exactly an entry added to or removed from the file.
 * The table, the stream planner and the subscription reconciler are discovery's own; nothing
 * here plans streams.
 *
 *   engines file ──poll──▶ parseEnginesFile ─┬─ listed entries ───────────────┐
 *                            │ bad: last good  └─ DNS entries ─▶ DnsWatcher ─┐ │
 *                            ▼ one log/content                               ▼ ▼
 *                  kv_engines_file_errors_total           expandDnsEntries ──diff──▶ EngineScraper per engine
 *                                                                                   │ /health, /metrics, /kv_event_sources
 *                                                                                   ▼
 *                                                    EngineInstanceSink (DiscoveryService → InstanceTable)
 */
import { readFileSync } from 'node:fs';
import { Counter, Gauge, type Registry } from 'prom-client';
import { ConfigError, isConfigError } from '../../shared/config/config-error.js';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { EngineIdentitySource } from './engine-identity.js';
import { expandDnsEntries, type DnsDuplicate } from './dns-expansion.js';
import { DnsWatcher } from './dns-watcher.js';
import { EngineScraper, type EngineInstanceSink, type EngineReport } from './engine-scraper.js';
import { parseEnginesFile, sameEngineEntry, type EngineEntry, type EnginesFile, type EnginesFileContext } from './engines-file.js';
import type { ServedModelsOutcome } from './served-models-scrape.js';

/** engines.md §4: the file is re-read at least this often. */
const MAX_REREAD_INTERVAL_MS = 5000;
/** engines.md §6: `--engines_dns_refresh_ms` default. */
const DEFAULT_DNS_REFRESH_MS = 5000;

export interface EnginesSourceOptions {
  readonly path: string;
  /** `--engines_refresh_interval_ms` */
  readonly refreshIntervalMs: number;
  /** `--instance_delete_probe_attempts` */
  readonly failedProbesToSuspect: number;
  /** `--instance_delete_probe_timeout_ms` */
  readonly requestTimeoutMs: number;
  /** `--engines_models_refresh_ms` (cache-identity §1); default 10000. */
  readonly modelsRefreshMs?: number;
  /** `--engines_dns_refresh_ms` (engines.md §6; default 5000). */
  readonly dnsRefreshMs?: number;
  /** `--engines_dns_server`; absent or null: the system resolver. */
  readonly dnsServer?: string | null;
  /** Static streams' instance names: an entry using one is invalid. */
  readonly reservedNames?: ReadonlySet<string>;
  /** Monotonic clock of the load-staleness window (default performance.now); injected by tests. */
  readonly nowMs?: () => number;
}

/** The engines (instance) side of the instance table that the scrapers need, plus removal. */
export interface EnginesSink extends EngineInstanceSink {
  removeEngine(name: string): void;
}

export class EnginesSource {
  private log: Logger = silentLogger;
  private readonly nowMs: () => number;
  private readonly ctx: EnginesFileContext;
  private readonly scrapers = new Map<string, EngineScraper>();
  private fileErrors: Counter | null = null;
  private sourcesErrors: Counter | null = null;
  private engineCount: Gauge | null = null;
  private modelsErrors: Counter<'instance'> | null = null;
  private sink: EnginesSink | null = null;
  /** The last good file: listed entries and DNS entries. */
  private file: EnginesFile;
  /** The engines in force: the listed ones and those the DNS entries resolve to now. */
  private entries: readonly EngineEntry[];
  private readonly dns: DnsWatcher;
  private lastText: string;
  private lastBadText: string | null = null;
  /** name → the last refusal/scrape failure logged, so each distinct one is logged once. */
  private readonly reported = new Map<string, string>();
  /** name → the last `/kv_event_sources` outcome logged. */
  private readonly sourcesReported = new Map<string, string>();
  /** Engines found twice (engines.md §6), as logged: each is logged again only after it went away. */
  private duplicates = new Set<string>();
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  private constructor(private readonly opts: EnginesSourceOptions, text: string, file: EnginesFile) {
    this.nowMs = opts.nowMs ?? (() => performance.now());
    this.ctx = opts.reservedNames === undefined ? {} : { reservedNames: opts.reservedNames };
    this.lastText = text;
    this.file = file;
    this.entries = file.engines;
    this.dns = new DnsWatcher({
      refreshMs: opts.dnsRefreshMs ?? DEFAULT_DNS_REFRESH_MS,
      server: opts.dnsServer ?? null,
      onChange: () => this.expand(),
    });
  }

  /** Registers the source's metrics (the registry `GET /metrics` serves exists only after the file was validated). */
  registerMetrics(registry: Registry): void {
    const registers = [registry];
    this.fileErrors = new Counter({ name: 'kv_engines_file_errors_total', help: 'distinct engines-file contents rejected on reload (the last good list stays)', registers });
    this.sourcesErrors = new Counter({
      name: 'kv_engines_event_sources_errors_total',
      help: 'malformed GET /kv_event_sources answers (the engine then uses its entry\'s ports, engines.md §6)',
      registers,
    });
    this.engineCount = new Gauge({ name: 'kv_engines_file_engines', help: 'engines in force from the engines file: listed ones and those its DNS entries resolve to', registers });
    this.engineCount.set(this.entries.length);
    this.modelsErrors = new Counter({
      name: 'kv_engines_models_errors_total',
      help: 'failed or malformed GET /v1/models scrapes per engine (the last good served-models list stays; cache-identity §1)',
      labelNames: ['instance'],
      registers,
    });
    this.dns.registerMetrics(registry);
  }

  /** Reads and validates the file at start; throws `ConfigError` (`invalid --engines_file: engines[1].url: ...`). */
  static open(opts: EnginesSourceOptions): EnginesSource {
    const text = readText(opts.path);
    const file = parseEnginesFile(text, opts.reservedNames === undefined ? {} : { reservedNames: opts.reservedNames });
    return new EnginesSource(opts, text, file);
  }

  /** The engines in force: the last good file's listed engines and its DNS names' current engines. */
  get engines(): readonly EngineEntry[] {
    return this.entries;
  }

  /** Resolves the DNS entries now (tests; the watcher does it every `--engines_dns_refresh_ms`). */
  resolveDnsNow(): Promise<void> {
    return this.dns.resolveNow();
  }

  /** The identity source of an engine in force (the stream planner passes it into stream configs). */
  identity(name: string): EngineIdentitySource | undefined {
    return this.scrapers.get(name);
  }

  /** Starts the scrapers of the current list and the file poll. */
  start(sink: EnginesSink, logger?: Logger): void {
    if (this.sink !== null || this.closed) return;
    this.sink = sink;
    if (logger !== undefined) this.log = logger;
    this.apply(this.entries, []);
    const every = Math.min(this.opts.refreshIntervalMs, MAX_REREAD_INTERVAL_MS);
    this.timer = setInterval(() => this.reload(), every);
    this.dns.useLogger(this.log);
    this.dns.setEntries(this.file.dnsEntries);
    this.dns.start();
  }

  /** Re-reads the file now (the poll calls this; tests call it to skip the wait). Returns whether it changed the list. */
  reload(): boolean {
    if (this.closed) return false;
    let text: string | null = null;
    let file: EnginesFile;
    try {
      text = readText(this.opts.path);
      if (text === this.lastText) return false;
      file = parseEnginesFile(text, this.ctx);
    } catch (e) {
      if (!isConfigError(e)) throw e;
      // engines.md §4: one log per distinct bad content (an unreadable file: per distinct reason).
      const key = text ?? e.message;
      if (key !== this.lastBadText) {
        this.lastBadText = key;
        this.fileErrors?.inc();
        this.log.error({ path: this.opts.path, err: e.message }, 'engines file rejected on reload; the last good list stays in force');
      }
      return false;
    }
    this.lastBadText = null;
    this.lastText = text!;
    this.file = file;
    this.dns.setEntries(file.dnsEntries);
    this.expand();
    this.log.info({ path: this.opts.path, engines: file.engines.length, dns_entries: file.dnsEntries.length }, 'engines file reloaded');
    return true;
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.dns.close();
    const all = [...this.scrapers.values()];
    this.scrapers.clear();
    await Promise.all(all.map((s) => s.close()));
  }

  /** The engines in force from the file and the DNS answers in force; applies the difference. */
  private expand(): void {
    if (this.closed) return;
    const expanded = expandDnsEntries(this.file.engines, this.file.dnsEntries, (e) => this.dns.targets(e), this.ctx.reservedNames);
    this.logDuplicates(expanded.duplicates);
    const previous = this.entries;
    this.entries = expanded.engines;
    this.engineCount?.set(this.entries.length);
    this.apply(this.entries, previous);
  }

  /** engines.md §6: an engine found twice is kept once, and said so (once per episode). */
  private logDuplicates(duplicates: readonly DnsDuplicate[]): void {
    const now = new Set<string>();
    for (const d of duplicates) {
      const key = `${d.engine}|${d.dropped}|${d.keptBy}`;
      now.add(key);
      if (!this.duplicates.has(key)) this.log.warn({ engine: d.engine, dns: d.dropped, kept_by: d.keptBy }, 'engine found twice: kept once, from the first source');
    }
    this.duplicates = now;
  }

  /** Entries added, removed or changed act like etcd PUT/DELETE would (engines.md §4). */
  private apply(next: readonly EngineEntry[], previous: readonly EngineEntry[]): void {
    const sink = this.sink;
    if (sink === null) return;
    const wanted = new Map(next.map((e) => [e.name, e]));
    for (const old of previous) {
      if (wanted.has(old.name)) continue;
      const s = this.scrapers.get(old.name);
      this.scrapers.delete(old.name);
      this.reported.delete(old.name);
      this.sourcesReported.delete(old.name);
      void s?.close();
      this.modelsErrors?.remove({ instance: old.name });
      sink.removeEngine(old.name);
      if (old.dnsName === null) this.log.info({ engine: old.name }, 'engine removed from the engines file');
      else this.log.info({ engine: old.name, dns: old.dnsName }, 'engine left: its DNS name no longer resolves to it');
    }
    const before = new Map(previous.map((e) => [e.name, e]));
    for (const entry of next) {
      const s = this.scrapers.get(entry.name);
      if (s === undefined) {
        const scraper = new EngineScraper(entry, sink, {
          refreshIntervalMs: this.opts.refreshIntervalMs,
          failedProbesToSuspect: this.opts.failedProbesToSuspect,
          requestTimeoutMs: this.opts.requestTimeoutMs,
          nowMs: this.nowMs,
          report: (name, what, detail) => this.report(name, what, detail),
          ...(this.opts.modelsRefreshMs !== undefined ? { modelsRefreshMs: this.opts.modelsRefreshMs } : {}),
          modelsReport: (name, outcome, detail) => this.modelsReport(name, outcome, detail),
        });
        this.scrapers.set(entry.name, scraper);
        scraper.start();
        const found = entry.dnsName === null ? 'engine listed' : 'engine joined through DNS';
        this.log.info({ engine: entry.name, url: entry.url, kind: entry.kind, dp_size: entry.dpSize, dns: entry.dnsName ?? undefined }, `${found}; waiting for its first healthy probe and load`);
        continue;
      }
      const old = before.get(entry.name);
      if (old !== undefined && !sameEngineEntry(old, entry)) {
        s.update(entry);
        this.log.info({ engine: entry.name }, 'engine entry changed');
      }
    }
  }

  /** One log line per distinct problem of an engine (a scrape failing every second is logged once per episode). */
  private report(name: string, what: EngineReport, detail: string): void {
    if (what === 'event_sources' || what === 'event_sources_malformed' || what === 'event_sources_failed') {
      this.reportSources(name, what, detail);
      return;
    }
    if (what === 'scrape_ok') {
      if (this.reported.get(name)?.startsWith('scrape_failed:') === true) {
        this.reported.delete(name);
        this.log.info({ engine: name }, 'engine scrape succeeds again');
      }
      return;
    }
    const key = `${what}:${detail}`;
    if (this.reported.get(name) === key) return;
    this.reported.set(name, key);
    if (what === 'refused') this.log.error({ engine: name, reason: detail }, 'engines-file entry not admitted: etcd registers an instance of the same name (etcd wins)');
    else this.log.warn({ engine: name, err: detail }, 'engine scrape failed; the previous load stays until it is stale');
  }

  /** cache-identity §1: every failed /v1/models scrape is counted; each distinct error is logged once per episode. */
  private modelsReport(name: string, outcome: ServedModelsOutcome, detail: string): void {
    if (outcome.kind === 'good') {
      if (outcome.recovered) this.log.info({ engine: name }, 'engine /v1/models answers again');
      return;
    }
    if (outcome.kind === 'not_served') {
      if (outcome.firstOfItsKind) this.log.info({ engine: name }, 'engine does not serve GET /v1/models (404): its served models stay unknown, a candidate for every model');
      return;
    }
    this.modelsErrors?.inc({ instance: name });
    if (outcome.firstOfItsKind) this.log.warn({ engine: name, err: detail }, 'engine served-models scrape failed; the last good list stays (unknown before the first)');
  }

  /** engines.md §6: where an engine's streams come from, logged once per distinct outcome. */
  private reportSources(name: string, what: EngineReport, detail: string): void {
    if (what === 'event_sources_malformed') this.sourcesErrors?.inc();
    const key = `${what}:${detail}`;
    if (this.sourcesReported.get(name) === key) return;
    this.sourcesReported.set(name, key);
    if (what === 'event_sources') this.log.info({ engine: name, streams: detail }, 'engine KV event streams');
    else if (what === 'event_sources_malformed') this.log.error({ engine: name, err: detail }, 'GET /kv_event_sources answered something unusable; the entry\'s ports are used');
    else this.log.warn({ engine: name, err: detail }, 'GET /kv_event_sources failed; asked again on the next scrape');
  }
}

function readText(path: string): string {
  try {
    return readFileSync(path, 'utf8');
  } catch (e) {
    const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : 'error';
    throw new ConfigError('', `cannot read ${JSON.stringify(path)} (${code})`);
  }
}
