/**
 * Re-resolves the engines file's DNS names every `--engines_dns_refresh_ms` (engines.md §6) and
 * keeps, per name, the set of engines in force (DnsNameState's rules: two empty answers to empty
 * a set, errors keep the last good one). It tells its owner (EnginesSource) when any set changed;
 * the owner turns the sets into engines and applies the difference like a reloaded file.
 *
 *   every refresh: DnsLookup (A/AAAA or SRV) per name ──▶ DnsNameState ──changed──▶ onChange()
 *                               │ error: logged once per distinct error,
 *                               ▼        kv_engines_dns_errors_total{name}
 *                   kv_engines_dns_engines{name}
 *
 * Entries with the same name (and srv flag) share one lookup: the addresses do not depend on the
 * entry's ports. Rounds never overlap; a name added by a reload is resolved at once.
 */
import { Counter, Gauge, type Registry } from 'prom-client';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import { JoinedRun } from '../../shared/process/joined-run.js';
import type { DnsEngineEntry } from './dns-entry.js';
import { DnsLookup } from './dns-lookup.js';
import { DnsNameState, type DnsTarget } from './dns-resolution.js';

export interface DnsWatcherOptions {
  /** `--engines_dns_refresh_ms` */
  readonly refreshMs: number;
  /** `--engines_dns_server`; null: the system resolver. */
  readonly server: string | null;
  /** Some name's set of engines changed (called after the round that changed it). */
  readonly onChange: () => void;
  readonly logger?: Logger;
}

interface WatchedName {
  readonly dns: string;
  readonly srv: boolean;
  readonly state: DnsNameState;
}

const NO_TARGETS: readonly DnsTarget[] = Object.freeze([]);
/** Each query's first timeout: a quarter of the period, within these bounds (c-ares doubles it on the retry). */
const MIN_QUERY_TIMEOUT_MS = 250;
const MAX_QUERY_TIMEOUT_MS = 2000;
const QUERY_TRIES = 2;

export class DnsWatcher {
  private log: Logger;
  private readonly lookup: DnsLookup;
  private readonly names = new Map<string, WatchedName>();
  private readonly rounds = new JoinedRun(() => this.round());
  private errors: Counter | null = null;
  private engines: Gauge | null = null;
  private timer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly opts: DnsWatcherOptions) {
    this.log = opts.logger ?? silentLogger;
    const timeoutMs = Math.min(MAX_QUERY_TIMEOUT_MS, Math.max(MIN_QUERY_TIMEOUT_MS, Math.floor(opts.refreshMs / 4)));
    this.lookup = new DnsLookup({ server: opts.server, timeoutMs, tries: QUERY_TRIES });
  }

  /** The logger from start on (the watcher exists, for its metrics, before the service logs). */
  useLogger(logger: Logger): void {
    this.log = logger;
  }

  registerMetrics(registry: Registry): void {
    const registers = [registry];
    this.errors = new Counter({
      name: 'kv_engines_dns_errors_total',
      help: 'failed lookups of an engines-file DNS name (timeout, SERVFAIL, refused); the last good set of engines stays',
      labelNames: ['name'],
      registers,
    });
    this.engines = new Gauge({ name: 'kv_engines_dns_engines', help: 'engines an engines-file DNS name resolves to (the set in force)', labelNames: ['name'], registers });
    for (const w of this.names.values()) this.engines.set({ name: w.dns }, this.countFor(w.dns));
  }

  /** The file's DNS entries (start and every reload): new names are resolved at once, gone ones forgotten. */
  setEntries(entries: readonly DnsEngineEntry[]): void {
    const wanted = new Set(entries.map(nameKey));
    let added = false;
    for (const [key, w] of this.names) {
      if (wanted.has(key)) continue;
      this.names.delete(key);
      if (![...this.names.values()].some((o) => o.dns === w.dns)) this.engines?.remove({ name: w.dns });
    }
    for (const e of entries) {
      const key = nameKey(e);
      if (this.names.has(key)) continue;
      this.names.set(key, { dns: e.dns, srv: e.srv, state: new DnsNameState() });
      this.engines?.set({ name: e.dns }, this.countFor(e.dns));
      added = true;
    }
    if (added && this.timer !== null) void this.resolveNow();
  }

  /** The addresses (and SRV ports) in force for an entry's name; none before its first answer. */
  targets(entry: DnsEngineEntry): readonly DnsTarget[] {
    return this.names.get(nameKey(entry))?.state.targets ?? NO_TARGETS;
  }

  /** Resolves every name now, then every `refreshMs`. */
  start(): void {
    if (this.timer !== null || this.closed) return;
    this.timer = setInterval(() => void this.resolveNow(), this.opts.refreshMs);
    void this.resolveNow();
  }

  /** One round now (joins a running one). */
  resolveNow(): Promise<void> {
    return this.rounds.run();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.lookup.cancel();
    await this.rounds.settled();
  }

  /** Engines in force under one name (its A/AAAA and its SRV lookups, should the file use both). */
  private countFor(dns: string): number {
    let n = 0;
    for (const w of this.names.values()) if (w.dns === dns) n += w.state.targets.length;
    return n;
  }

  private async round(): Promise<void> {
    const watched = [...this.names.values()];
    const outcomes = await Promise.all(watched.map((w) => this.lookup.lookup(w.dns, w.srv)));
    if (this.closed) return;
    let changed = false;
    for (let i = 0; i < watched.length; i++) {
      const w = watched[i]!;
      // A reload may have dropped the name while its lookup ran.
      if (this.names.get(nameKey(w)) !== w) continue;
      const outcome = outcomes[i]!;
      const before = w.state.targets.length;
      const u = w.state.apply(outcome);
      if (outcome.kind === 'error') {
        this.errors?.inc({ name: w.dns });
        if (u.newError !== null) this.log.warn({ dns: w.dns, err: u.newError, engines: u.targets.length }, 'DNS lookup failed; the last good set of engines stays');
        continue;
      }
      if (u.recovered) this.log.info({ dns: w.dns }, 'DNS lookup answers again');
      if (u.heldEmpty) this.log.warn({ dns: w.dns, detail: outcome.kind === 'empty' ? outcome.detail : '', engines: u.targets.length }, 'DNS name has no records; its engines stay until the next answer agrees');
      if (u.changed) {
        changed = true;
        this.engines?.set({ name: w.dns }, this.countFor(w.dns));
        this.log.info({ dns: w.dns, engines: u.targets.length, before }, 'DNS answer changed');
      }
    }
    if (changed) this.opts.onChange();
  }
}

/** One lookup per (name, srv): entries differing only in ports share it. */
function nameKey(e: Pick<DnsEngineEntry, 'dns' | 'srv'>): string {
  return `${e.srv ? 'srv' : 'addr'}:${e.dns}`;
}
