/**
 * The front module of `discovery/`: wires the etcd watcher, the instance table, the delete
 * probes, the lifecycle clock and the subscription reconciler (discovery.md). main.ts builds one
 * with the flags and the kv-events config; the HTTP edge feeds it heartbeats; the view stream
 * (later) subscribes to its changes.
 *
 *   etcd ──watch──▶ EtcdWatcher ──put/delete──▶ InstanceTable ◀── heartbeats (HTTP)
 *                                    │ delete ▲ probe result           │ changes
 *                                    ▼        │                        ▼
 *                               GET /health probe          listeners, metrics, logs
 *   every refresh_interval_ms: planStreams(table) ──▶ SubscriptionReconciler ──▶ Directory
 */
import type { Registry } from 'prom-client';
import type { DirectoryFlags } from '../../shared/config/directory-flags.js';
import type { DiscoveryConfig } from '../../shared/config/kv-events-config.js';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import type { DiscoveryError } from './discovery-errors.js';
import { createDiscoveryMetrics, type DiscoveryMetrics } from './discovery-metrics.js';
import { EtcdWatcher, type DiscoveryEventSink } from './etcd-watcher.js';
import { PROBE_INTERVAL_MS, probeInstanceHealth } from './health-probe.js';
import type { InstanceRegistration, InstanceType } from './instance-json.js';
import {
  InstanceTable,
  type HeartbeatOutcome,
  type InstanceChange,
  type InstanceListing,
  type InstanceState,
  type InstanceView,
  type ProbeRequest,
} from './instance-table.js';
import type { HeartbeatReport } from './load-report.js';
import type { InstanceLoad } from '../load/instance-load.js';
import { planStreams, type EngineIdentityLookup, type PlanExclusion, type PlannedStream, type StreamPlan } from './stream-planner.js';
import type { EngineEntry } from '../engines/engines-file.js';
import type { EnginesSink } from '../engines/engines-source.js';
import type { ServedModel } from '../../shared/view/served-models.js';
import { SubscriptionReconciler, type ReconcileResult, type StreamTarget } from './subscription-reconciler.js';

/** The flags discovery reads (architecture.md "Processes and flags"). */
export type DiscoveryFlags = Pick<
  DirectoryFlags,
  | 'etcdAddr'
  | 'etcdNamespace'
  | 'leaseLostHeartbeatTimeoutMs'
  | 'detectDisconnectedInstanceIntervalS'
  | 'instanceDeleteProbeTimeoutMs'
  | 'instanceDeleteProbeAttempts'
>;

export interface DiscoveryServiceOptions {
  readonly flags: DiscoveryFlags;
  /**
   * The kv-events `discovery` block; null or `enabled: false` keeps the instance table and
   * heartbeats but subscribes to nothing.
   */
  readonly discovery: DiscoveryConfig | null;
  /** kv-events `max_streams`. */
  readonly maxStreams: number;
  /** Where streams go (the Directory); null subscribes to nothing. */
  readonly streams: StreamTarget | null;
  /**
   * The engines file is in use (engines.md §4): its instances are planned beside etcd's, with
   * these identity sources. Absent: etcd only.
   */
  readonly engines?: { readonly identity: EngineIdentityLookup; readonly refreshIntervalMs: number };
  readonly logger?: Logger;
  /** Metrics land here when given (the registry `GET /metrics` serves). */
  readonly registry?: Registry;
  readonly nowMs?: () => number;
  /** How often the LEASE_LOST/SUSPECT timeouts are checked (default 100 ms). */
  readonly lifecycleTickMs?: number;
  /** etcd retry bounds (tests shorten them). */
  readonly etcdMinRetryMs?: number;
  readonly etcdMaxRetryMs?: number;
}

export type InstanceChangeListener = (change: InstanceChange) => void;

export interface DiscoveryDiagnostics {
  readonly etcdConnected: boolean;
  /** False with `--etcd_addr=` empty: no watch, no connection (engines.md §6). */
  readonly etcdEnabled: boolean;
  /** True while etcd is unreachable: the table is the last one known. */
  readonly stale: boolean;
  readonly etcdListings: number;
  readonly instances: readonly InstanceView[];
  readonly streams: readonly PlannedStream[];
  readonly exclusions: readonly PlanExclusion[];
}

const DEFAULT_LIFECYCLE_TICK_MS = 100;
const STATES: readonly InstanceState[] = ['ACTIVE', 'LEASE_LOST', 'SUSPECT'];

export class DiscoveryService {
  private readonly log: Logger;
  private readonly nowMs: () => number;
  private readonly table: InstanceTable;
  /** null with `--etcd_addr=` empty: no etcd client is ever created (architecture.md flags). */
  private readonly watcher: EtcdWatcher | null;
  private readonly reconciler: SubscriptionReconciler | null;
  private readonly metrics: DiscoveryMetrics | null;
  private readonly listeners = new Set<InstanceChangeListener>();
  private readonly probes = new Set<AbortController>();
  private tickTimer: NodeJS.Timeout | null = null;
  private closed = false;

  private constructor(private readonly opts: DiscoveryServiceOptions) {
    this.log = opts.logger ?? silentLogger;
    this.nowMs = opts.nowMs ?? Date.now;
    this.metrics = opts.registry === undefined ? null : createDiscoveryMetrics(opts.registry);
    this.table = new InstanceTable({
      leaseLostHeartbeatTimeoutMs: opts.flags.leaseLostHeartbeatTimeoutMs,
      detectDisconnectedIntervalMs: opts.flags.detectDisconnectedInstanceIntervalS * 1000,
    });
    this.watcher =
      opts.flags.etcdAddr.length === 0
        ? null
        : new EtcdWatcher({
            hosts: opts.flags.etcdAddr,
            namespace: opts.flags.etcdNamespace,
            sink: this.sink(),
            logger: this.log,
            ...(opts.etcdMinRetryMs !== undefined ? { minRetryMs: opts.etcdMinRetryMs } : {}),
            ...(opts.etcdMaxRetryMs !== undefined ? { maxRetryMs: opts.etcdMaxRetryMs } : {}),
          });
    const discovery = opts.discovery;
    const etcdStreams = discovery !== null && discovery.enabled;
    const engines = opts.engines;
    // One reconciler over both sources, so max_streams and endpoint conflicts span them.
    this.reconciler =
      (etcdStreams || engines !== undefined) && opts.streams !== null
        ? new SubscriptionReconciler({
            target: opts.streams,
            plan: () => planStreams(this.table.instances(), discovery, opts.maxStreams, engines?.identity),
            intervalMs: etcdStreams ? discovery.refreshIntervalMs : engines!.refreshIntervalMs,
            logger: this.log,
          })
        : null;
  }

  /** Starts the watch, the lifecycle clock and the reconciler; returns at once (etcd may be down). */
  static start(opts: DiscoveryServiceOptions): DiscoveryService {
    const svc = new DiscoveryService(opts);
    if (svc.watcher === null) svc.log.info('--etcd_addr is empty: no etcd discovery (engines file and DNS only)');
    svc.watcher?.start();
    svc.tickTimer = setInterval(() => svc.apply(svc.table.tick(svc.nowMs())), opts.lifecycleTickMs ?? DEFAULT_LIFECYCLE_TICK_MS);
    svc.reconciler?.start();
    svc.metrics?.etcdConnected.set(0);
    return svc;
  }

  /** A valid heartbeat (HTTP edge): `accepted` → 200, otherwise 409. Load is fresh at once. */
  heartbeat(report: HeartbeatReport): HeartbeatOutcome {
    const res = this.table.heartbeat(report, this.nowMs());
    this.metrics?.heartbeats.inc({ outcome: res.outcome });
    this.apply(res.changes);
    return res.outcome;
  }

  /** An invalid heartbeat naming `name`: it is no routing candidate until a valid one. */
  invalidReport(name: string): void {
    this.metrics?.heartbeats.inc({ outcome: 'invalid' });
    this.apply(this.table.invalidateLoad(name));
  }

  instance(name: string): InstanceView | null {
    return this.table.get(name);
  }

  instances(): InstanceView[] {
    return this.table.instances();
  }

  /** The plan the reconciler would apply now (diagnostics and tests). */
  plan(): StreamPlan | null {
    const d = this.opts.discovery;
    const engines = this.opts.engines;
    return d === null && engines === undefined ? null : planStreams(this.table.instances(), d, this.opts.maxStreams, engines?.identity);
  }

  /** The engines file's side of the instance table (engines.md §4), for the EnginesSource. */
  enginesSink(): EnginesSink {
    return {
      putEngine: (entry: EngineEntry, identity: string | null) => {
        const res = this.table.putEngine(entry, identity, this.nowMs());
        this.apply(res.changes);
        return res.refused;
      },
      engineLoad: (name: string, load: InstanceLoad | null) => this.apply(this.table.engineLoad(name, load, this.nowMs())),
      engineHealth: (name: string, healthy: boolean) => this.apply(this.table.engineHealth(name, healthy, this.nowMs())),
      engineModels: (name: string, models: readonly ServedModel[]) => this.apply(this.table.engineModels(name, models)),
      removeEngine: (name: string) => this.apply(this.table.removeEngine(name)),
    };
  }

  /** Runs one reconciliation pass now (tests; the timer runs them every refresh_interval_ms). */
  reconcileNow(): Promise<ReconcileResult | null> {
    return this.reconciler === null ? Promise.resolve(null) : this.reconciler.reconcile();
  }

  get etcdConnected(): boolean {
    return this.watcher?.connected ?? false;
  }

  /** False with `--etcd_addr=` empty. */
  get etcdEnabled(): boolean {
    return this.watcher !== null;
  }

  diagnostics(): DiscoveryDiagnostics {
    const connected = this.watcher?.connected ?? false;
    return {
      etcdConnected: connected,
      etcdEnabled: this.watcher !== null,
      // Without etcd the table is never stale: nothing is missing from it.
      stale: this.watcher !== null && !connected,
      etcdListings: this.watcher?.listings ?? 0,
      instances: this.table.instances(),
      streams: this.reconciler?.streams() ?? [],
      exclusions: this.reconciler?.exclusions ?? [],
    };
  }

  /** Every instance change, in order (the view stream's source). Returns the unsubscribe. */
  onChange(listener: InstanceChangeListener): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Stops the watch, probes, clock and reconciler. Streams stay with the directory, which closes them. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.tickTimer !== null) clearInterval(this.tickTimer);
    for (const p of this.probes) p.abort();
    await Promise.all([this.watcher?.close(), this.reconciler?.close()]);
  }

  private sink(): DiscoveryEventSink {
    return {
      listing: (listing: InstanceListing, loads: ReadonlyMap<string, InstanceLoad>) => {
        const now = this.nowMs();
        this.metrics?.etcdListings.inc();
        const res = this.table.resync(listing, now);
        this.apply(res.changes);
        for (const p of res.probes) this.probe(p);
        for (const [name, load] of loads) this.apply(this.table.legacyLoad(name, load, now));
        this.log.info({ instances: listing.registrations.length }, 'etcd prefix listed');
      },
      put: (reg: InstanceRegistration) => this.apply(this.table.put(reg, this.nowMs()).changes),
      delete: (type: InstanceType, name: string, previous: InstanceRegistration | null) => {
        const res = this.table.delete(type, name, previous);
        if (res.ignored !== null) {
          this.log.info({ instance: name, type, reason: res.ignored }, 'etcd delete ignored');
          return;
        }
        if (res.probe !== null) this.probe(res.probe);
      },
      load: (name: string, load: InstanceLoad) => this.apply(this.table.legacyLoad(name, load, this.nowMs())),
      rejected: (key: string, error: DiscoveryError) => {
        this.metrics?.rejectedKeys.inc({ class: error.class });
        this.log.warn({ key, class: error.class, err: error.message }, 'etcd key rejected');
      },
      connection: (connected: boolean, detail: string) => {
        this.metrics?.etcdConnected.set(connected ? 1 : 0);
        if (connected) this.log.info({ detail }, 'etcd watch live');
        else this.log.warn({ detail }, 'etcd unreachable: serving the last instance table (stale)');
      },
    };
  }

  /** discovery.md: a deleted key → GET /health, attempts × timeout, 100 ms apart. */
  private probe(req: ProbeRequest): void {
    if (this.closed) return;
    const ctl = new AbortController();
    this.probes.add(ctl);
    const opts = { attempts: this.opts.flags.instanceDeleteProbeAttempts, timeoutMs: this.opts.flags.instanceDeleteProbeTimeoutMs, intervalMs: PROBE_INTERVAL_MS };
    void probeInstanceHealth(req.name, opts, ctl.signal).then((healthy) => {
      this.probes.delete(ctl);
      if (this.closed) return;
      this.log.info({ instance: req.name, healthy }, 'lease lost; health probe done');
      this.apply(this.table.probeResult(req, healthy, this.nowMs()));
    });
  }

  private apply(changes: readonly InstanceChange[]): void {
    if (changes.length === 0) return;
    for (const c of changes) {
      switch (c.kind) {
        case 'state':
          this.metrics?.transitions.inc({ from: c.from, to: c.to });
          this.log.info({ instance: c.instance.name, from: c.from, to: c.to, reason: c.reason }, 'instance state');
          break;
        case 'replace':
          this.metrics?.replacements.inc();
          this.log.info(
            {
              instance: c.instance.name,
              source: c.instance.source,
              old_incarnation: c.previous.registration.incarnationId,
              incarnation: c.instance.registration.incarnationId,
            },
            'instance replaced: old streams and index dropped',
          );
          break;
        case 'remove':
          if (c.instance.source === 'etcd') this.metrics?.removals.inc();
          this.log.info({ instance: c.instance.name }, 'instance removed');
          break;
        case 'upsert':
          this.log.debug({ instance: c.instance.name, type: c.instance.registration.type, dp_size: c.instance.registration.dpSize }, 'instance registered');
          break;
        case 'load':
          break;
      }
      for (const l of this.listeners) {
        try {
          l(c);
        } catch (e) {
          this.log.error({ err: e instanceof Error ? e.message : String(e) }, 'instance change listener failed');
        }
      }
    }
    // Per-state counts change only with state, membership or replacement (not on load reports).
    if (this.metrics !== null && changes.some((c) => c.kind !== 'load')) {
      const counts: Record<InstanceState, number> = { ACTIVE: 0, LEASE_LOST: 0, SUSPECT: 0 };
      for (const i of this.table.instances()) counts[i.state]++;
      for (const s of STATES) this.metrics.instances.set({ state: s }, counts[s]);
    }
  }
}
