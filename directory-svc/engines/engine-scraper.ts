/**
 * One engines-file engine's scraper (engines.md §4.1–§4.3, §6): every `engines_refresh_interval_ms`
 * it probes `GET <url>/health` and reads `GET <url>/metrics`, and tells the instance sink what
 * that means. It is also the engine's `EngineIdentitySource`, which its streams' subscribers ask
 * on reconnect (§3 rule 4). The decisions live in `EngineHealthState` (pure, clock passed in);
 * this class only does the HTTP and the timer.
 *
 * Served models (cache-identity §1) run on a timer of their own (`engines_models_refresh_ms`):
 * `GET <url>/v1/models` for an engine without a pinned list, at once on (re)activation (first
 * admission, replacement, back from SUSPECT) and then every period; the rules are
 * `ServedModelsState`'s (served-models-scrape.ts).
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
import { fetchServedModels, MODELS_NOT_SERVED, ServedModelsState, type ServedModelsOutcome } from './served-models-scrape.js';
import type { ServedModel } from '../../shared/view/served-models.js';
import type { KvEventSource } from './kv-event-sources.js';
import { fetchKvEventSources, type KvEventSourcesFetch } from './kv-event-sources-fetch.js';

/** `event_sources*`: where the engine's streams come from (§6), for the source's one log line per outcome. */
export type EngineReport = 'scrape_failed' | 'scrape_ok' | 'refused' | 'event_sources' | 'event_sources_malformed' | 'event_sources_failed';

/** The engine's answer in force: none yet, its sources, or its entry's ports. */
type SourcesAnswer = { readonly kind: 'pending' } | { readonly kind: 'served'; readonly sources: readonly KvEventSource[] } | { readonly kind: 'ports' };

const PENDING: SourcesAnswer = Object.freeze({ kind: 'pending' });

/** What the scraper tells the instance table (DiscoveryService implements it). */
export interface EngineInstanceSink {
  /** Admits or refreshes the engine; a new identity replaces it. Returns the refusal, null when accepted. */
  putEngine(entry: EngineEntry, identity: string | null): string | null;
  /** A new load, or null when the last one is older than 3 × the refresh interval. */
  engineLoad(name: string, load: InstanceLoad | null): void;
  engineHealth(name: string, healthy: boolean): void;
  /** cache-identity §1: the engine's scraped served models (never called for a pinned list). */
  engineModels(name: string, models: readonly ServedModel[]): void;
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
  /** `--engines_models_refresh_ms`: the `/v1/models` period (default 10000). */
  readonly modelsRefreshMs?: number;
  /** Every `/v1/models` scrape's outcome (the source counts failures and logs the first of each kind). */
  readonly modelsReport?: (name: string, outcome: ServedModelsOutcome, detail: string) => void;
}

/** cache-identity §1's default period, when the caller does not give one. */
const DEFAULT_MODELS_REFRESH_MS = 10000;

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
  private models = new ServedModelsState();
  /** Resolves with the failure's detail (reported by the caller), null after a good or no scrape. */
  private readonly modelsPasses = new JoinedRun(() => this.modelsPass());
  private modelsTimer: NodeJS.Timeout | null = null;
  /**
   * The sink was last told SUSPECT: the next healthy sync is a reactivation (a fresh /v1/models,
   * and `/kv_event_sources` asked again: maybe a restart of an engine without identity, on other ports).
   */
  private toldSuspect = false;
  /** Set while a tick's own sync runs after it scraped /v1/models (admission needs no second one). */
  private modelsScrapedThisPass = false;
  private sources: SourcesAnswer = PENDING;
  /** Ask `/kv_event_sources` on the next pass. */
  private sourcesWanted = true;
  /** The identity the engine had when the answer in force was fetched. */
  private sourcesIdentity: string | null = null;
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
    this.modelsTimer = setInterval(() => this.modelsTick(), this.opts.modelsRefreshMs ?? DEFAULT_MODELS_REFRESH_MS);
  }

  /** A reloaded file changed this entry: the next tick scrapes the new url and refreshes the instance. */
  update(entry: EngineEntry): void {
    const previous = this.entry;
    // A pin added: what was scraped before it says nothing once it is removed again.
    if (previous.models === null && entry.models !== null) this.models = new ServedModelsState();
    if (entry.url !== previous.url) {
      this.sources = PENDING;
      this.sourcesWanted = true;
    }
    this.entry = entry;
    this.admitted = withSources(entry, this.sources);
    if (this.putIdentity !== undefined) this.sync();
    // A pin removed (the list is the engine's again, unknown until it answers) or another url.
    if ((previous.models !== null && entry.models === null) || previous.url !== entry.url) this.modelsTick();
  }

  /** The served models from the last good `/v1/models` scrape; null before one (or when pinned and never scraped). */
  get scrapedModels(): readonly ServedModel[] | null {
    return this.models.list;
  }

  /** One `/v1/models` scrape now; joins a running one. Settles after the sink heard of a change. */
  async scrapeModels(): Promise<void> {
    this.reportModelsFailure(await this.modelsPasses.run());
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
    if (this.modelsTimer !== null) clearInterval(this.modelsTimer);
    this.timer = null;
    this.modelsTimer = null;
    this.aborts.abort();
    await Promise.all([this.passes.settled(), this.modelsPasses.settled()]);
  }

  private async pass(): Promise<void> {
    const signal = this.aborts.signal;
    // Until admitted, /v1/models is read beside /health and /metrics, so the instance enters the
    // table with its list: an admitted engine with an unknown list is a candidate for every model.
    const withModels = this.entry.models === null && this.putIdentity === undefined;
    const [healthy, reading, modelsFailure, sources] = await Promise.all([
      this.probeHealth(signal),
      this.readMetrics(signal).catch((e: unknown) => {
        if (!this.closed) this.opts.report(this.entry.name, 'scrape_failed', e instanceof Error ? e.message : String(e));
        return null;
      }),
      withModels ? this.modelsPasses.run() : null,
      this.sourcesWanted ? fetchKvEventSources(this.entry.url, this.limited(signal)) : null,
    ]);
    if (this.closed) return;
    // An engine not up yet fails /v1/models too; that is its health's story, not a models error.
    if (healthy) this.reportModelsFailure(modelsFailure);
    this.state.probe(healthy);
    if (reading !== null) {
      this.state.reading(reading, this.opts.nowMs());
      this.opts.report(this.entry.name, 'scrape_ok', '');
    }
    if (sources !== null) this.takeSources(sources);
    this.modelsScrapedThisPass = withModels;
    try {
      this.sync();
    } finally {
      this.modelsScrapedThisPass = false;
    }
    // The sync found a new process: ask it now rather than a period later (the old one's entry stands meanwhile).
    if (this.sources.kind === 'pending' && this.putIdentity !== undefined && !this.closed) {
      const again = await fetchKvEventSources(this.entry.url, this.limited(signal));
      if (this.closed) return;
      this.takeSources(again);
      this.sync();
    }
  }

  /** An answer replaces the one in force; a failure is asked again on the next pass. */
  private takeSources(f: KvEventSourcesFetch): void {
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

  /** The models timer: admitted, reachable and not pinned (a SUSPECT engine is re-read when it comes back). */
  private modelsTick(): void {
    if (this.closed || this.putIdentity === undefined || this.state.suspect || this.entry.models !== null) return;
    void this.scrapeModels();
  }

  /** One `/v1/models` read; a failure keeps the last good list (cache-identity §1) and is returned. */
  private async modelsPass(): Promise<string | null> {
    if (this.closed || this.entry.models !== null) return null;
    let list: readonly ServedModel[] | typeof MODELS_NOT_SERVED;
    try {
      list = await fetchServedModels(this.entry.url, this.limited(this.aborts.signal));
    } catch (e) {
      return this.closed ? null : e instanceof Error ? e.message : String(e);
    }
    // Pinned meanwhile: the answer is for a list nobody reads any more.
    if (this.closed || this.entry.models !== null) return null;
    const outcome = list === MODELS_NOT_SERVED ? this.models.notServed() : this.models.good(list);
    this.opts.modelsReport?.(this.entry.name, outcome, '');
    if (outcome.kind === 'good' && outcome.changed) this.publishModels();
    return null;
  }

  private reportModelsFailure(detail: string | null): void {
    if (detail === null || this.closed) return;
    this.opts.modelsReport?.(this.entry.name, this.models.failed(detail), detail);
  }

  /** The scraped list into the table (it ignores an unchanged list and a pinned instance). */
  private publishModels(): void {
    const list = this.models.list;
    if (this.closed || this.putIdentity === undefined || this.entry.models !== null || list === null) return;
    this.sink.engineModels(this.entry.name, list);
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
    const admittedNow = this.putIdentity !== identity;
    if (admittedNow) this.state.forgetPublishedLoad();
    this.putIdentity = identity;
    // Before the load, so the instance becomes a candidate with its list, never without one.
    this.publishModels();
    const load = this.state.loadUpdate(this.opts.nowMs());
    if (load !== 'unchanged') this.sink.engineLoad(this.entry.name, load);
    const backFromSuspect = this.toldSuspect && this.state.healthy;
    if (this.state.healthy) {
      if (backFromSuspect) this.sourcesWanted = true;
      this.sink.engineHealth(this.entry.name, true);
      this.toldSuspect = false;
    } else if (this.state.suspect) {
      this.sink.engineHealth(this.entry.name, false);
      this.toldSuspect = true;
    }
    // cache-identity §1: (re)activation reads /v1/models at once (a restarted or recovered engine
    // may have other adapters loaded); a first admission from a tick that just read it needs none.
    if ((admittedNow && !this.modelsScrapedThisPass) || backFromSuspect) this.modelsTick();
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
