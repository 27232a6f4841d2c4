/**
 * One engines-file engine's scraper (engines.md §4.1–§4.3, §6): every `engines_refresh_interval_ms`
 * it probes `GET <url>/health` and reads `GET <url>/metrics`, and tells the instance sink what
 * that means. It is also the engine's `EngineIdentitySource`, which its streams' subscribers ask
 * on reconnect (§3 rule 4). The decisions live in `EngineHealthState` (pure, clock passed in);
 * this class only does the HTTP and the timer.
 *
 * KV event sources (§6): `GET <url>/kv_event_sources` is asked before the engine is admitted, again
 * before a new process (another identity) replaces it, and again when it comes back from SUSPECT
 * (how a restart shows when the engine exports no identity). Its answer gives the streams and wins
 * over the entry's ports; an engine that does not serve it (any 4xx) or answers something unusable
 * uses the ports (an unusable answer is logged and counted). A transport error, a 5xx, 408 or 429
 * is asked again on the next pass, and admission waits for an answer: a new process is never
 * subscribed on its predecessor's ports.
 */
import { JoinedRun } from '../../shared/process/joined-run.js';
import type { InstanceLoad } from '../load/instance-load.js';
import type { EngineIdentity, EngineIdentitySource } from './engine-identity.js';
import { readEngineMetrics, type EngineMetricsReading } from './engine-metrics.js';
import type { EngineEntry } from './engines-file.js';
import { KvEventSourcesError, parseKvEventSources, type KvEventSource } from './kv-event-sources.js';

/** `event_sources*`: where the engine's streams come from (§6), for the source's one log line per outcome. */
export type EngineReport = 'scrape_failed' | 'scrape_ok' | 'refused' | 'event_sources' | 'event_sources_malformed' | 'event_sources_failed';

/** vLLM's discovery route (engines.md §6). */
export const KV_EVENT_SOURCES_PATH = '/kv_event_sources';

/** The engine's answer in force: none yet, its sources, or its entry's ports. */
type SourcesAnswer = { readonly kind: 'pending' } | { readonly kind: 'served'; readonly sources: readonly KvEventSource[] } | { readonly kind: 'ports' };

/** One `GET /kv_event_sources`: an answer, or a failure to ask again. */
type SourcesFetch =
  | { readonly kind: 'served'; readonly sources: readonly KvEventSource[] }
  | { readonly kind: 'unserved' | 'malformed' | 'failed'; readonly detail: string };

const PENDING: SourcesAnswer = Object.freeze({ kind: 'pending' });

/** What the scraper tells the instance table (DiscoveryService implements it). */
export interface EngineInstanceSink {
  /** Admits or refreshes the engine; a new identity replaces it. Returns the refusal, null when accepted. */
  putEngine(entry: EngineEntry, identity: string | null): string | null;
  /** A new load, or null when the last one is older than 3 × the refresh interval. */
  engineLoad(name: string, load: InstanceLoad | null): void;
  engineHealth(name: string, healthy: boolean): void;
}

export interface EngineScraperOptions {
  readonly refreshIntervalMs: number;
  /** `--instance_delete_probe_attempts`: consecutive failed probes before SUSPECT. */
  readonly failedProbesToSuspect: number;
  /** `--instance_delete_probe_timeout_ms`: each GET's time limit. */
  readonly requestTimeoutMs: number;
  readonly nowMs: () => number;
  /** A scrape or put outcome worth one log line (the source de-duplicates); 'scrape_ok' ends a failure episode. */
  readonly report: (name: string, what: EngineReport, detail: string) => void;
}

/** What one tick's outcome makes the sink do; pure so the rules are unit-tested without HTTP. */
export class EngineHealthState {
  private failedProbes = 0;
  private healthySeen = false;
  private load: InstanceLoad | null = null;
  private loadAtMs: number | null = null;
  /** The load currently published: the sink is told only about changes. */
  private publishedLoadAtMs: number | null = null;
  identity: EngineIdentity = undefined;

  constructor(private readonly failedProbesToSuspect: number, private readonly staleAfterMs: number) {}

  /** A health probe answered (200 → healthy). */
  probe(healthy: boolean): void {
    if (healthy) {
      this.failedProbes = 0;
      this.healthySeen = true;
    } else {
      this.failedProbes++;
    }
  }

  /** A successful `/metrics` read; a reading without the waiting metric leaves the previous load (§4.2). */
  reading(r: EngineMetricsReading, nowMs: number): void {
    this.identity = r.identity;
    if (r.load !== null) {
      this.load = r.load;
      this.loadAtMs = nowMs;
    }
  }

  /** §4.1: ACTIVE needs a first healthy probe and a first load. */
  get admissible(): boolean {
    return this.healthySeen && this.loadAtMs !== null;
  }

  get suspect(): boolean {
    return this.failedProbes >= this.failedProbesToSuspect;
  }

  get healthy(): boolean {
    return this.failedProbes === 0;
  }

  /** The load to publish now: a new one, null once stale (3 × interval, §4.2), or 'unchanged'. */
  loadUpdate(nowMs: number): InstanceLoad | null | 'unchanged' {
    if (this.loadAtMs === null) return 'unchanged';
    const stale = nowMs - this.loadAtMs > this.staleAfterMs;
    if (stale) {
      if (this.publishedLoadAtMs === -1) return 'unchanged';
      this.publishedLoadAtMs = -1;
      return null;
    }
    if (this.publishedLoadAtMs === this.loadAtMs) return 'unchanged';
    this.publishedLoadAtMs = this.loadAtMs;
    return this.load;
  }

  /** After a replacement the table holds no load: publish the current one again. */
  forgetPublishedLoad(): void {
    this.publishedLoadAtMs = null;
  }
}

export class EngineScraper implements EngineIdentitySource {
  private readonly state: EngineHealthState;
  private timer: NodeJS.Timeout | null = null;
  private readonly passes = new JoinedRun(() => this.pass());
  private readonly aborts = new AbortController();
  private closed = false;
  /** The identity last put into the table (undefined: not admitted). */
  private putIdentity: EngineIdentity = undefined;
  private sources: SourcesAnswer = PENDING;
  /** Ask `/kv_event_sources` on the next pass. */
  private sourcesWanted = true;
  /** The identity the engine had when the answer in force was fetched. */
  private sourcesIdentity: string | null = null;
  /** The sink was told SUSPECT: the next healthy pass asks `/kv_event_sources` again. */
  private suspectTold = false;
  /** The entry with the answer in force applied: what the table gets. */
  private admitted: EngineEntry;

  constructor(
    private entry: EngineEntry,
    private readonly sink: EngineInstanceSink,
    private readonly opts: EngineScraperOptions,
  ) {
    this.state = new EngineHealthState(opts.failedProbesToSuspect, 3 * opts.refreshIntervalMs);
    this.admitted = entry;
  }

  get name(): string {
    return this.entry.name;
  }

  /** Starts the periodic probe and scrape (the first at once). */
  start(): void {
    if (this.timer !== null || this.closed) return;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), this.opts.refreshIntervalMs);
  }

  /** A reloaded file changed this entry: the next tick scrapes the new url and refreshes the instance. */
  update(entry: EngineEntry): void {
    if (entry.url !== this.entry.url) {
      this.sources = PENDING;
      this.sourcesWanted = true;
    }
    this.entry = entry;
    this.admitted = withSources(entry, this.sources);
    if (this.putIdentity !== undefined) this.sync();
  }

  current(): EngineIdentity {
    return this.state.identity;
  }

  /** §3 rule 4: a scrape started now; also feeds the table, so a changed identity replaces the instance at once. */
  async scrapeNow(signal: AbortSignal): Promise<string | null> {
    const reading = await this.readMetrics(AbortSignal.any([signal, this.aborts.signal]));
    this.state.reading(reading, this.opts.nowMs());
    this.sync();
    return reading.identity;
  }

  /** One probe and scrape now; joins a running one (ticks never overlap). */
  tick(): Promise<void> {
    return this.passes.run();
  }

  async close(): Promise<void> {
    this.closed = true;
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    this.aborts.abort();
    await this.passes.settled();
  }

  private async pass(): Promise<void> {
    const signal = this.aborts.signal;
    const [healthy, reading, sources] = await Promise.all([
      this.probeHealth(signal),
      this.readMetrics(signal).catch((e: unknown) => {
        if (!this.closed) this.opts.report(this.entry.name, 'scrape_failed', e instanceof Error ? e.message : String(e));
        return null;
      }),
      this.sourcesWanted ? this.fetchSources(signal) : null,
    ]);
    if (this.closed) return;
    this.state.probe(healthy);
    if (reading !== null) {
      this.state.reading(reading, this.opts.nowMs());
      this.opts.report(this.entry.name, 'scrape_ok', '');
    }
    if (sources !== null) this.takeSources(sources);
    this.sync();
    // The sync found a new process: ask it now rather than a period later (the old one's entry stands meanwhile).
    if (this.sources.kind === 'pending' && this.putIdentity !== undefined && !this.closed) {
      const again = await this.fetchSources(signal);
      if (this.closed) return;
      this.takeSources(again);
      this.sync();
    }
  }

  /** Tells the sink what the state means now: admission or identity, load, health. */
  private sync(): void {
    if (this.closed || !this.state.admissible) return;
    const identity = this.state.identity ?? null;
    // §6: a new process may have bound other ports: its sources are asked before it replaces the old one.
    if (this.putIdentity !== undefined && identity !== this.putIdentity && identity !== this.sourcesIdentity) {
      this.sources = PENDING;
      this.sourcesWanted = true;
    }
    if (this.sources.kind === 'pending') return;
    const refused = this.sink.putEngine(this.admitted, identity);
    if (refused !== null) {
      this.putIdentity = undefined;
      this.opts.report(this.entry.name, 'refused', refused);
      return;
    }
    // A first admission or a replacement starts without load in the table.
    if (this.putIdentity !== identity) this.state.forgetPublishedLoad();
    this.putIdentity = identity;
    const load = this.state.loadUpdate(this.opts.nowMs());
    if (load !== 'unchanged') this.sink.engineLoad(this.entry.name, load);
    if (this.state.healthy) {
      // Back from SUSPECT: maybe a restart of an engine without identity, on other ports.
      if (this.suspectTold) this.sourcesWanted = true;
      this.suspectTold = false;
      this.sink.engineHealth(this.entry.name, true);
    } else if (this.state.suspect) {
      this.suspectTold = true;
      this.sink.engineHealth(this.entry.name, false);
    }
  }

  /** An answer replaces the one in force; a failure is asked again on the next pass. */
  private takeSources(f: SourcesFetch): void {
    const name = this.entry.name;
    if (f.kind === 'failed') {
      this.opts.report(name, 'event_sources_failed', f.detail);
      return;
    }
    this.sourcesWanted = false;
    this.sourcesIdentity = this.state.identity ?? null;
    this.sources = f.kind === 'served' ? { kind: 'served', sources: f.sources } : { kind: 'ports' };
    this.admitted = withSources(this.entry, this.sources);
    if (f.kind === 'malformed') this.opts.report(name, 'event_sources_malformed', f.detail);
    else this.opts.report(name, 'event_sources', describeStreams(this.admitted, f.kind === 'unserved' ? f.detail : null));
  }

  private async fetchSources(signal: AbortSignal): Promise<SourcesFetch> {
    const url = `${this.entry.url}${KV_EVENT_SOURCES_PATH}`;
    let status: number;
    let text: string;
    try {
      const res = await fetch(url, { signal: this.limited(signal), redirect: 'manual' });
      status = res.status;
      text = await res.text();
    } catch (e) {
      return { kind: 'failed', detail: `GET ${url}: ${e instanceof Error ? e.message : String(e)}` };
    }
    // A busy or starting engine: ask again. Any other non-200 means the route is not there.
    if (status >= 500 || status === 408 || status === 429) return { kind: 'failed', detail: `GET ${url} answered ${status}` };
    if (status !== 200) return { kind: 'unserved', detail: `GET ${url} answered ${status}` };
    let body: unknown;
    try {
      body = JSON.parse(text);
    } catch {
      return { kind: 'malformed', detail: `GET ${url}: not JSON` };
    }
    try {
      return { kind: 'served', sources: parseKvEventSources(body, new URL(this.entry.url).hostname) };
    } catch (e) {
      if (e instanceof KvEventSourcesError) return { kind: 'malformed', detail: `GET ${url}: ${e.detail}` };
      throw e;
    }
  }

  private async probeHealth(signal: AbortSignal): Promise<boolean> {
    try {
      const res = await fetch(`${this.entry.url}/health`, { signal: this.limited(signal), redirect: 'manual' });
      await res.arrayBuffer().catch(() => undefined);
      return res.status === 200;
    } catch {
      // Refused, reset, timed out or aborted: an unhealthy answer, not an error of ours.
      return false;
    }
  }

  private async readMetrics(signal: AbortSignal): Promise<EngineMetricsReading> {
    let text: string;
    try {
      const res = await fetch(`${this.entry.url}/metrics`, { signal: this.limited(signal), redirect: 'manual' });
      text = await res.text();
      if (res.status !== 200) throw new Error(`GET /metrics answered ${res.status}`);
    } catch (e) {
      throw new Error(`GET ${this.entry.url}/metrics failed: ${e instanceof Error ? e.message : String(e)}`);
    }
    return readEngineMetrics(text, this.entry.kind);
  }

  private limited(signal: AbortSignal): AbortSignal {
    return AbortSignal.any([signal, AbortSignal.timeout(this.opts.requestTimeoutMs)]);
  }
}

/** The entry the table gets: the answer's streams (and rank count) when the engine serves them. */
function withSources(entry: EngineEntry, answer: SourcesAnswer): EngineEntry {
  if (answer.kind !== 'served') return entry.eventSources === null ? entry : Object.freeze({ ...entry, eventSources: null });
  const n = answer.sources.length;
  return Object.freeze({ ...entry, eventSources: answer.sources, dpSize: n > 0 ? n : entry.dpSize });
}

/** One log line's worth: where each rank's events come from. */
function describeStreams(entry: EngineEntry, unserved: string | null): string {
  if (entry.eventSources !== null) {
    if (entry.eventSources.length === 0) return 'none: GET /kv_event_sources lists no publisher';
    return `GET /kv_event_sources: ${entry.eventSources.map((s) => `rank ${s.dpRank} ${s.endpoint}`).join(', ')}`;
  }
  if (entry.eventEndpoint === null) return `none: ${unserved ?? 'no answer'} and the entry has no event_port`;
  return `the entry's ports from ${entry.eventEndpoint}${unserved === null ? '' : ` (${unserved})`}`;
}
