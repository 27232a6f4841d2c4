/**
 * The in-memory instance table and its lifecycle (discovery.md "Instance states", "Heartbeats").
 * Pure: no etcd, no timers, no HTTP. Callers pass `nowMs` and feed it what the edges saw (etcd
 * puts and deletes, probe results, heartbeats, ticks); every method returns the changes it made,
 * which the edge logs, counts and hands to the subscription reconciler and the view stream.
 *
 * Identity: each registration the table accepts as a new engine process gets a fresh
 * `generation` (table-wide counter). A refresh keeps it; a replacement (new incarnation, or a
 * newer register_ts_ms when neither side has an incarnation) gets a new one, so every stream
 * derived from it has a new identity and the old index is dropped.
 */
import { DomainError } from '../../shared/errors/domain-error.js';
import { sameEngineEntry, type EngineEntry } from '../engines/engines-file.js';
import { sameRegistration, type InstanceRegistration, type InstanceType } from './instance-json.js';
import type { HeartbeatReport, MixRole } from './load-report.js';
import type { InstanceLoad } from '../load/instance-load.js';
import { sameModelLists, type ServedModel, type ServedModelList } from '../../shared/view/served-models.js';

/**
 * Where an instance comes from: an etcd registration, or an entry of the engines file
 * (engines.md §4) whose health, load and identity the directory scrapes itself.
 */
export type InstanceSource = 'etcd' | 'engines_file';

export type InstanceState = 'ACTIVE' | 'LEASE_LOST' | 'SUSPECT';
/** A state, or `REMOVED`: the instance left the table. */
export type InstanceFate = InstanceState | 'REMOVED';

/** The state table of discovery.md "Instance states": the only moves `transition` allows. */
const ALLOWED_MOVES: Readonly<Record<InstanceState, readonly InstanceFate[]>> = {
  // key deleted: /health answered → LEASE_LOST, probe failed → SUSPECT
  ACTIVE: ['LEASE_LOST', 'SUSPECT'],
  // PUT with the same incarnation → ACTIVE; no heartbeat for lease_lost_heartbeat_timeout → SUSPECT
  LEASE_LOST: ['ACTIVE', 'SUSPECT'],
  // PUT same incarnation → ACTIVE; a heartbeat → LEASE_LOST (never ACTIVE); detect interval → gone;
  // engines file: a healthy probe → ACTIVE (engines.md §4.1)
  SUSPECT: ['ACTIVE', 'LEASE_LOST', 'REMOVED'],
};

export type TransitionReason =
  | 'probe_healthy'
  | 'probe_failed'
  | 'heartbeat_timeout'
  | 'registration_refreshed'
  | 'heartbeat_while_suspect'
  | 'disconnected_interval'
  | 'engine_healthy'
  | 'engine_probes_failed';

export class InstanceTransitionError extends DomainError {
  readonly class = 'bad_transition' as const;
  constructor(readonly from: InstanceState, readonly to: InstanceFate) {
    super(`${from} → ${to} is not in the instance state table`);
  }
}

/** Checks one move against the state table; throws `InstanceTransitionError` for any other. */
export function transition(from: InstanceState, to: InstanceFate): InstanceFate {
  if (!ALLOWED_MOVES[from].includes(to)) throw new InstanceTransitionError(from, to);
  return to;
}

export interface LifecycleTimings {
  /** `--lease_lost_heartbeat_timeout_ms`: LEASE_LOST without a heartbeat this long → SUSPECT. */
  readonly leaseLostHeartbeatTimeoutMs: number;
  /** `--detect_disconnected_instance_interval` in ms: SUSPECT this long → removed. */
  readonly detectDisconnectedIntervalMs: number;
}

/** A read-only snapshot of one instance. */
export interface InstanceView {
  readonly name: string;
  readonly source: InstanceSource;
  /** The engines-file entry (url, kind, endpoints); null for etcd instances. */
  readonly engine: EngineEntry | null;
  readonly registration: InstanceRegistration;
  /** Changes exactly when the engine process (identity) changes; see the file comment. */
  readonly generation: number;
  readonly state: InstanceState;
  readonly stateSinceMs: number;
  /** Whether its `XLLM:<TYPE>:<name>` key currently exists (false while probing or after a delete). */
  readonly keyPresent: boolean;
  /** Latest valid load; null when none yet or the last report was invalid. */
  readonly load: InstanceLoad | null;
  readonly loadAtMs: number | null;
  readonly lastHeartbeatMs: number | null;
  /** MIX only (default PREFILL); null for the other types. */
  readonly currentRole: MixRole | null;
  /** ACTIVE or LEASE_LOST. */
  readonly schedulable: boolean;
  /** Schedulable with a valid load report (discovery.md "Heartbeats"). */
  readonly routingCandidate: boolean;
  /**
   * cache-identity §1: what it serves; null = unknown (a candidate for every model). etcd: the
   * registration's `models`; engines file: the entry's pin, else its last good `/v1/models`.
   */
  readonly models: ServedModelList;
}

export type InstanceChange =
  | { readonly kind: 'upsert'; readonly instance: InstanceView }
  | { readonly kind: 'replace'; readonly previous: InstanceView; readonly instance: InstanceView }
  | { readonly kind: 'remove'; readonly instance: InstanceView }
  | { readonly kind: 'state'; readonly instance: InstanceView; readonly from: InstanceState; readonly to: InstanceState; readonly reason: TransitionReason }
  | { readonly kind: 'load'; readonly instance: InstanceView };

/** A deleted key whose engine must be probed (`GET /health`) before LEASE_LOST or SUSPECT. */
export interface ProbeRequest {
  readonly name: string;
  /** Ties the result to this delete: a later PUT or delete makes the result stale. */
  readonly token: number;
}

export type IgnoredReason = 'stale_delete' | 'unknown_instance' | 'same_registration';

/** An engines-file entry refused because etcd holds its name (etcd wins; README "Decisions"). */
export type EnginePutRefusal = 'name_held_by_etcd';

export interface EnginePutResult {
  readonly changes: readonly InstanceChange[];
  readonly refused: EnginePutRefusal | null;
}

export interface PutResult {
  readonly changes: readonly InstanceChange[];
}

export interface DeleteResult {
  readonly changes: readonly InstanceChange[];
  readonly probe: ProbeRequest | null;
  readonly ignored: IgnoredReason | null;
}

export type HeartbeatOutcome = 'accepted' | 'unknown_instance' | 'stale_incarnation';

export interface HeartbeatResult {
  readonly outcome: HeartbeatOutcome;
  readonly changes: readonly InstanceChange[];
}

/** What a full etcd listing holds: the valid registrations and every instance key present. */
export interface InstanceListing {
  readonly registrations: readonly InstanceRegistration[];
  /** `<TYPE>:<name>` of every instance key listed, valid or not (an invalid value is not a delete). */
  readonly presentKeys: ReadonlySet<string>;
}

interface InstanceRecord {
  readonly source: InstanceSource;
  engine: EngineEntry | null;
  registration: InstanceRegistration;
  generation: number;
  state: InstanceState;
  stateSinceMs: number;
  keyPresent: boolean;
  /** The token of the delete awaiting a probe result; null when none. */
  pendingProbe: number | null;
  load: InstanceLoad | null;
  loadAtMs: number | null;
  lastHeartbeatMs: number | null;
  currentRole: MixRole | null;
  models: ServedModelList;
}

export function instanceKeyId(type: InstanceType, name: string): string {
  return `${type}:${name}`;
}

export class InstanceTable {
  private readonly records = new Map<string, InstanceRecord>();
  private nextGeneration = 1;
  private nextProbeToken = 1;

  constructor(private readonly timings: LifecycleTimings) {}

  get size(): number {
    return this.records.size;
  }

  get(name: string): InstanceView | null {
    const r = this.records.get(name);
    return r === undefined ? null : view(name, r);
  }

  /** Every instance, in name order (the planner's and the diagnostics' order). */
  instances(): InstanceView[] {
    const names = [...this.records.keys()].sort();
    return names.map((n) => view(n, this.records.get(n)!));
  }

  /**
   * An etcd PUT of a valid instance value (discovery.md "Instance states"): a new name is
   * registered ACTIVE; the same identity refreshes it (back to ACTIVE, index kept); another
   * identity replaces it (old streams and index dropped).
   */
  put(reg: InstanceRegistration, nowMs: number): PutResult {
    const name = reg.name;
    const r = this.records.get(name);
    if (r === undefined) {
      const created = this.newRecord(reg, nowMs);
      this.records.set(name, created);
      return { changes: [{ kind: 'upsert', instance: view(name, created) }] };
    }
    // etcd wins a name the engines file also lists: a registered engine holds a live lease,
    // the file may be stale. The file's streams go as on any replacement.
    if (r.source !== 'etcd' || isReplacement(r.registration, reg)) {
      const previous = view(name, r);
      const created = this.newRecord(reg, nowMs);
      this.records.set(name, created);
      return { changes: [{ kind: 'replace', previous, instance: view(name, created) }] };
    }
    const changes: InstanceChange[] = [];
    const dataChanged = !sameRegistration(r.registration, reg);
    r.registration = reg;
    r.models = reg.models;
    r.keyPresent = true;
    r.pendingProbe = null;
    if (reg.type === 'MIX' && r.currentRole === null) r.currentRole = 'PREFILL';
    if (reg.type !== 'MIX') r.currentRole = null;
    if (r.state !== 'ACTIVE') changes.push(this.move(name, r, 'ACTIVE', 'registration_refreshed', nowMs));
    // A refresh that changes dp_size, type or address still keeps the generation: the reconciler
    // compares endpoints and adds or removes exactly the streams that changed.
    if (dataChanged) changes.push({ kind: 'upsert', instance: view(name, r) });
    return { changes };
  }

  /**
   * An etcd DELETE of `XLLM:<type>:<name>`. `previous` is the deleted value (prevKv), null when
   * unknown or unparsable. A delete of another key than the one registered, or whose previous
   * value carries another incarnation, is stale and ignored. Otherwise the caller must probe the
   * engine and report with `probeResult`; the instance stays ACTIVE meanwhile.
   */
  delete(type: InstanceType, name: string, previous: InstanceRegistration | null): DeleteResult {
    const r = this.records.get(name);
    if (r === undefined) return { changes: [], probe: null, ignored: 'unknown_instance' };
    if (!r.keyPresent || r.registration.type !== type) return { changes: [], probe: null, ignored: 'stale_delete' };
    if (previous !== null && isReplacement(previous, r.registration)) return { changes: [], probe: null, ignored: 'stale_delete' };
    r.keyPresent = false;
    r.pendingProbe = this.nextProbeToken++;
    return { changes: [], probe: { name, token: r.pendingProbe }, ignored: null };
  }

  /** The outcome of the `GET /health` probe asked for by `delete`; stale results are dropped. */
  probeResult(probe: ProbeRequest, healthy: boolean, nowMs: number): readonly InstanceChange[] {
    const r = this.records.get(probe.name);
    if (r === undefined || r.pendingProbe !== probe.token || r.keyPresent) return [];
    r.pendingProbe = null;
    if (r.state !== 'ACTIVE') return [];
    return [this.move(probe.name, r, healthy ? 'LEASE_LOST' : 'SUSPECT', healthy ? 'probe_healthy' : 'probe_failed', nowMs)];
  }

  /**
   * A valid heartbeat. Unknown names and other incarnations are refused (HTTP 409). The
   * incarnation is compared only when both the heartbeat and the registration carry one.
   */
  heartbeat(report: HeartbeatReport, nowMs: number): HeartbeatResult {
    const r = this.records.get(report.name);
    // Engines-file instances take their load from /metrics only.
    if (r === undefined || r.source !== 'etcd') return { outcome: 'unknown_instance', changes: [] };
    const registered = r.registration.incarnationId;
    if (registered !== null && report.incarnationId !== null && registered !== report.incarnationId) {
      return { outcome: 'stale_incarnation', changes: [] };
    }
    const changes: InstanceChange[] = [];
    r.lastHeartbeatMs = nowMs;
    if (r.state === 'SUSPECT') changes.push(this.move(report.name, r, 'LEASE_LOST', 'heartbeat_while_suspect', nowMs));
    if (r.registration.type === 'MIX') {
      const role = report.currentRole ?? 'PREFILL';
      if (role !== r.currentRole) {
        r.currentRole = role;
        changes.push({ kind: 'upsert', instance: view(report.name, r) });
      }
    }
    if (report.load !== null) {
      r.load = report.load;
      r.loadAtMs = nowMs;
      changes.push({ kind: 'load', instance: view(report.name, r) });
    }
    return { outcome: 'accepted', changes };
  }

  /** The last report for `name` was invalid: it is no routing candidate until a valid one. */
  invalidateLoad(name: string): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.load === null) return [];
    r.load = null;
    r.loadAtMs = null;
    return [{ kind: 'load', instance: view(name, r) }];
  }

  /**
   * Load from the legacy `XLLM:LOADMETRICS:<name>` key: used only until the instance's first
   * heartbeat, which is always fresher (discovery.md: read for compatibility, never required).
   */
  legacyLoad(name: string, load: InstanceLoad, nowMs: number): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.source !== 'etcd' || r.lastHeartbeatMs !== null) return [];
    r.load = load;
    r.loadAtMs = nowMs;
    return [{ kind: 'load', instance: view(name, r) }];
  }

  /** The timed moves: LEASE_LOST → SUSPECT and SUSPECT → removed. */
  tick(nowMs: number): readonly InstanceChange[] {
    const changes: InstanceChange[] = [];
    for (const [name, r] of this.records) {
      // Engines-file instances leave only when gone from the file (engines.md §4.1).
      if (r.source !== 'etcd') continue;
      if (r.state === 'LEASE_LOST') {
        const lastSign = Math.max(r.lastHeartbeatMs ?? r.stateSinceMs, r.stateSinceMs);
        if (nowMs - lastSign >= this.timings.leaseLostHeartbeatTimeoutMs) {
          changes.push(this.move(name, r, 'SUSPECT', 'heartbeat_timeout', nowMs));
        }
      } else if (r.state === 'SUSPECT' && nowMs - r.stateSinceMs >= this.timings.detectDisconnectedIntervalMs) {
        transition(r.state, 'REMOVED');
        this.records.delete(name);
        changes.push({ kind: 'remove', instance: view(name, r) });
      }
    }
    return changes;
  }

  /**
   * A full listing after (re)connecting to etcd: every valid registration is applied as a PUT,
   * and every registered key that is no longer listed as a delete (its engine is probed).
   */
  resync(listing: InstanceListing, nowMs: number): { changes: InstanceChange[]; probes: ProbeRequest[] } {
    const changes: InstanceChange[] = [];
    const probes: ProbeRequest[] = [];
    for (const [name, r] of [...this.records]) {
      if (!r.keyPresent || listing.presentKeys.has(instanceKeyId(r.registration.type, name))) continue;
      const res = this.delete(r.registration.type, name, null);
      if (res.probe !== null) probes.push(res.probe);
    }
    for (const reg of listing.registrations) changes.push(...this.put(reg, nowMs).changes);
    return { changes, probes };
  }

  // ---- engines file (engines.md §4) ---------------------------------------------------------

  /**
   * An engines-file engine that passed its first healthy probe and load scrape (or a later
   * scrape or reload of it). New → ACTIVE; another identity (`process_start_time_seconds`) → a
   * replacement (new generation, old streams and index dropped, no credit from them); a changed
   * entry → an upsert the reconciler diffs. Refused while etcd holds the name.
   */
  putEngine(entry: EngineEntry, identity: string | null, nowMs: number): EnginePutResult {
    const name = entry.name;
    const reg = engineRegistration(entry, identity);
    const r = this.records.get(name);
    if (r !== undefined && r.source === 'etcd') return { changes: [], refused: 'name_held_by_etcd' };
    if (r === undefined || isReplacement(r.registration, reg)) {
      // A replacement keeps the last scraped list until the new process's /v1/models answers
      // (the scraper asks at once): a restarted engine nearly always serves the same base model,
      // and an unknown list would make it a candidate for every model meanwhile.
      const created = this.newRecord(reg, nowMs, entry, r === undefined || entry.models !== null ? entry.models : r.models);
      this.records.set(name, created);
      const instance = view(name, created);
      return { changes: [r === undefined ? { kind: 'upsert', instance } : { kind: 'replace', previous: view(name, r), instance }], refused: null };
    }
    if (r.engine !== null && sameEngineEntry(r.engine, entry)) return { changes: [], refused: null };
    // A new pin replaces the list; a pin removed leaves it unknown until /v1/models answers.
    if (entry.models !== null) r.models = entry.models;
    else if (r.engine?.models != null) r.models = null;
    r.engine = entry;
    r.registration = reg;
    return { changes: [{ kind: 'upsert', instance: view(name, r) }], refused: null };
  }

  /**
   * cache-identity §1: an engines-file instance's scraped `/v1/models`. A change publishes an
   * upsert (like a load change publishes a load); an unchanged list or a pinned instance nothing.
   */
  engineModels(name: string, models: readonly ServedModel[]): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.source !== 'engines_file' || r.engine?.models != null) return [];
    if (r.models !== null && sameModelLists(r.models, models)) return [];
    r.models = models;
    return [{ kind: 'upsert', instance: view(name, r) }];
  }

  /** A load scrape of an engines-file instance; null invalidates it (stale: no candidate). */
  engineLoad(name: string, load: InstanceLoad | null, nowMs: number): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.source !== 'engines_file') return [];
    if (load === null && r.load === null) return [];
    r.load = load;
    r.loadAtMs = load === null ? null : nowMs;
    return [{ kind: 'load', instance: view(name, r) }];
  }

  /** engines.md §4.1: a healthy probe → ACTIVE; the caller's failed-probe count reached → SUSPECT. */
  engineHealth(name: string, healthy: boolean, nowMs: number): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.source !== 'engines_file') return [];
    const to: InstanceState = healthy ? 'ACTIVE' : 'SUSPECT';
    if (r.state === to) return [];
    return [this.move(name, r, to, healthy ? 'engine_healthy' : 'engine_probes_failed', nowMs)];
  }

  /** The entry left the engines file: the instance and its streams go. */
  removeEngine(name: string): readonly InstanceChange[] {
    const r = this.records.get(name);
    if (r === undefined || r.source !== 'engines_file') return [];
    this.records.delete(name);
    return [{ kind: 'remove', instance: view(name, r) }];
  }

  private newRecord(reg: InstanceRegistration, nowMs: number, engine: EngineEntry | null = null, models: ServedModelList = reg.models): InstanceRecord {
    return {
      source: engine === null ? 'etcd' : 'engines_file',
      engine,
      registration: reg,
      generation: this.nextGeneration++,
      state: 'ACTIVE',
      stateSinceMs: nowMs,
      // An engines-file instance has no etcd key, so etcd deletes and listings never touch it.
      keyPresent: engine === null,
      pendingProbe: null,
      load: null,
      loadAtMs: null,
      lastHeartbeatMs: null,
      currentRole: reg.type === 'MIX' ? 'PREFILL' : null,
      models,
    };
  }

  private move(name: string, r: InstanceRecord, to: InstanceState, reason: TransitionReason, nowMs: number): InstanceChange {
    const from = r.state;
    transition(from, to);
    r.state = to;
    r.stateSinceMs = nowMs;
    return { kind: 'state', instance: view(name, r), from, to, reason };
  }
}

/**
 * discovery.md: another `incarnation_id` is a replacement; when both lack it, a newer
 * `register_ts_ms` is. One side with an id and the other without is a different identity too
 * (an engine upgraded or downgraded in place is a new process).
 */
export function isReplacement(current: InstanceRegistration, next: InstanceRegistration): boolean {
  const a = current.incarnationId;
  const b = next.incarnationId;
  if (a !== null || b !== null) return a !== b;
  return current.registerTsMs !== null && next.registerTsMs !== null && next.registerTsMs > current.registerTsMs;
}

/**
 * The registration an engines-file entry stands for: its role as the type, its kind as the
 * backend, the scraped identity as the incarnation (null without `process_start_time_seconds`:
 * the generation then changes only when the entry does).
 */
function engineRegistration(entry: EngineEntry, identity: string | null): InstanceRegistration {
  return Object.freeze({
    name: entry.name,
    type: entry.role,
    rpcAddress: entry.url,
    incarnationId: identity,
    registerTsMs: null,
    dpSize: entry.dpSize,
    ttftProfile: Object.freeze([]),
    tpotProfile: Object.freeze([]),
    backendType: entry.kind,
    models: entry.models,
  });
}

function view(name: string, r: InstanceRecord): InstanceView {
  const schedulable = r.state === 'ACTIVE' || r.state === 'LEASE_LOST';
  return Object.freeze({
    name,
    source: r.source,
    engine: r.engine,
    registration: r.registration,
    generation: r.generation,
    state: r.state,
    stateSinceMs: r.stateSinceMs,
    keyPresent: r.keyPresent,
    load: r.load,
    loadAtMs: r.loadAtMs,
    lastHeartbeatMs: r.lastHeartbeatMs,
    currentRole: r.currentRole,
    schedulable,
    routingCandidate: schedulable && r.load !== null,
    models: r.models,
  });
}
