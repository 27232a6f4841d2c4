/**
 * The MetaService configuration (kvcm-meta §8): the file named by `--meta_config_file` (or
 * KVCM_META_CONFIG_FILE) replaces the built-in default — no merge — and omitted keys take the §8
 * defaults; meta-svc's `--http_port` / `--meta_store=sqlite:<path>` / `--node_id` override
 * `http.port` / `store.path` / `node_id`. Validation
 * collects every problem as one `config error at <json.path>: <reason>` line (the caller prints
 * each to stderr and exits 2). `parseMetaConfig` is pure: host facts arrive as arguments.
 */
import { BadRequestError, missingFieldsMessage } from '../meta-errors.js';
import { JsonParseError, parseJson } from '../wire/json-parse.js';
import type { JsonObject, JsonValue } from '../wire/json-parse.js';
import { jsonTextOf } from '../wire/json-text.js';
import { RequestReader } from '../wire/request-reader.js';
import { REGISTER_INSTANCE_REQUEST, parseRegistration } from '../instances/registration.js';
import type { InstanceRecord } from '../store/meta-store.js';
import { ConfigIssues, ConfigObject, indexPath } from './config-object.js';
import { DEFAULT_META_CONFIG_JSON } from './default-meta-config.js';
import { DEFAULT_EVENT_REPORT_TIMINGS, type EventReportTimings } from './event-report-timings.js';
import { STORAGE_KINDS, isStorageKind } from './storage-kinds.js';
import type { StorageKind } from './storage-kinds.js';

export interface StorageConfig {
  readonly globalUniqueName: string;
  /** Config `type` (§4.5 table). */
  readonly kind: StorageKind;
  /** §2 StorageType number of `kind`. */
  readonly storageType: number;
  readonly eventReport: boolean;
  /** As configured ('' when absent); URIs use the §4.5 normalized form. */
  readonly rootPath: string;
  readonly clusterName: string;
  readonly keyCountPerFile: number;
  readonly checkStorageAvailableWhenOpen: boolean;
  /** Config `available`; startup may turn it off (§8 check_storage_available_when_open). */
  readonly available: boolean;
  /** Opaque `spec` object, echoed in `storage_configs` (§5.2). */
  readonly spec: JsonObject;
  /** Effective timings for an event-report storage: `event_report` with this storage's overrides. */
  readonly eventReportTimings: EventReportTimings;
}

export interface InstanceGroupConfig {
  readonly name: string;
  /** Defaults to `name` (§4.2). */
  readonly quotaGroupName: string;
  /** Ordered writable storages (§4.2, §6). */
  readonly storageCandidates: readonly string[];
  /** At most one per event-report type (§4.2). */
  readonly eventReportStorageCandidates: readonly string[];
  /** 0 = unlimited. */
  readonly maxInstanceCount: number;
  /** 0 = unlimited. */
  readonly quotaBytes: bigint;
  /** Opaque JSON text, returned verbatim (§4.2). */
  readonly extraInfo: string;
  readonly userData: string;
}

export interface MetaConfig {
  readonly nodeId: string;
  readonly http: {
    readonly host: string;
    readonly port: number;
    readonly advertiseHost: string;
    readonly maxBodyBytes: number;
  };
  readonly store: {
    readonly type: 'sqlite';
    readonly path: string;
    readonly synchronous: 'NORMAL' | 'FULL';
  };
  readonly storages: readonly StorageConfig[];
  readonly instanceGroups: readonly InstanceGroupConfig[];
  readonly eventReport: EventReportTimings;
  readonly write: { readonly defaultTimeoutSeconds: number; readonly maxTimeoutSeconds: number };
  readonly limits: { readonly maxKeysPerRequest: number; readonly maxEventsPerRequest: number };
  /** Validated registrations (§4.1), registered at startup when absent. */
  readonly bootstrapInstances: readonly InstanceRecord[];
}

export interface MetaConfigInput {
  /** Config file text; null = use the built-in default. */
  readonly fileText: string | null;
  /** meta-svc `--http_port` when given. */
  readonly httpPortOverride?: number;
  /** The path of meta-svc `--meta_store=sqlite:<path>` when given. */
  readonly dbPathOverride?: string;
  /** meta-svc `--node_id` when given. */
  readonly nodeIdOverride?: string;
  /** os.hostname(), for the default `node_id`. */
  readonly hostname: string;
  /** First non-internal IPv4 address, for the default `http.advertise_host`. */
  readonly firstIpv4: string;
}

export type MetaConfigResult = { readonly ok: true; readonly config: MetaConfig } | { readonly ok: false; readonly errors: readonly string[] };

const TOP_KEYS = ['node_id', 'http', 'store', 'storages', 'instance_groups', 'event_report', 'write', 'limits', 'bootstrap_instances'];
const HTTP_KEYS = ['host', 'port', 'advertise_host', 'max_body_bytes'];
const STORE_KEYS = ['type', 'path', 'synchronous'];
const STORAGE_KEYS = [
  'global_unique_name',
  'type',
  'root_path',
  'cluster_name',
  'key_count_per_file',
  'check_storage_available_when_open',
  'available',
  'spec',
  'event_report',
];
const GROUP_KEYS = [
  'name',
  'quota_group_name',
  'storage_candidates',
  'event_report_storage_candidates',
  'max_instance_count',
  'quota_bytes',
  'extra_info',
  'user_data',
];
const EVENT_REPORT_KEYS = [
  'heartbeat_timeout_ms',
  'cleanup_grace_ms',
  'liveness_check_interval_ms',
  'snapshot_min_interval_ms',
  'snapshot_delta_drain_timeout_ms',
];
const STORAGE_NAME = /^[A-Za-z0-9_.-]{1,64}$/;
const INT32_MAX = 2 ** 31 - 1;
const MAX_BODY_BYTES_LIMIT = 2 ** 29 - 24;

/** Validate and complete a MetaService config (§8). */
export function parseMetaConfig(input: MetaConfigInput): MetaConfigResult {
  const issues = new ConfigIssues();
  let root: JsonValue;
  try {
    root = parseJson(input.fileText ?? DEFAULT_META_CONFIG_JSON);
  } catch (e) {
    if (!(e instanceof JsonParseError)) throw e;
    issues.at('', `not valid JSON: ${e.reason} at offset ${e.offset}`);
    return { ok: false, errors: issues.lines };
  }
  const top = ConfigObject.of(root, '', issues, TOP_KEYS);
  if (!top) return { ok: false, errors: issues.lines };

  const http = readHttp(top, issues, input);
  const store = readStore(top, issues, input);
  const eventReport = readTimings(top.has('event_report') ? ConfigObject.of(top.raw('event_report'), top.at('event_report'), issues, EVENT_REPORT_KEYS) : null, DEFAULT_EVENT_REPORT_TIMINGS, issues);
  const storages = readStorages(top, issues, eventReport);
  const instanceGroups = readGroups(top, issues, storages);
  const write = readPositivePair(top, 'write', ['default_timeout_seconds', 'max_timeout_seconds'], [30, 3600], issues);
  const limits = readPositivePair(top, 'limits', ['max_keys_per_request', 'max_events_per_request'], [100000, 100000], issues);
  const bootstrapInstances = readBootstrap(top, issues, new Set(instanceGroups.map((g) => g.name)));
  const fileNodeId = top.str('node_id', `${input.hostname}:${http.port}`);
  const nodeId = input.nodeIdOverride ?? fileNodeId;

  if (issues.lines.length > 0) return { ok: false, errors: issues.lines };
  const config: MetaConfig = {
    nodeId,
    http,
    store,
    storages,
    instanceGroups,
    eventReport,
    write: { defaultTimeoutSeconds: write[0], maxTimeoutSeconds: write[1] },
    limits: { maxKeysPerRequest: limits[0], maxEventsPerRequest: limits[1] },
    bootstrapInstances,
  };
  return { ok: true, config: deepFreeze(config) };
}

function readHttp(top: ConfigObject, issues: ConfigIssues, input: MetaConfigInput): MetaConfig['http'] {
  const o = top.has('http') ? ConfigObject.of(top.raw('http'), top.at('http'), issues, HTTP_KEYS) : null;
  const host = o ? o.str('host', '0.0.0.0') : '0.0.0.0';
  if (o && host === '') o.fail('host', 'must not be empty');
  const filePort = o ? o.int('port', 6382, 1, 65535) : 6382;
  const advertiseHost = o ? o.str('advertise_host', input.firstIpv4) : input.firstIpv4;
  // Upper bound: a body is decoded into one JS string, which V8 caps near 2^29 characters.
  const maxBodyBytes = o ? o.int('max_body_bytes', 67108864, 1, MAX_BODY_BYTES_LIMIT) : 67108864;
  return { host, port: input.httpPortOverride ?? filePort, advertiseHost, maxBodyBytes };
}

function readStore(top: ConfigObject, issues: ConfigIssues, input: MetaConfigInput): MetaConfig['store'] {
  const o = top.has('store') ? ConfigObject.of(top.raw('store'), top.at('store'), issues, STORE_KEYS) : null;
  let synchronous: 'NORMAL' | 'FULL' = 'NORMAL';
  let path = './data/kvcm.db';
  if (o) {
    const type = o.str('type', 'sqlite');
    if (type !== 'sqlite') o.fail('type', `must be "sqlite", got ${JSON.stringify(type)}`);
    path = o.str('path', path);
    if (path === '') o.fail('path', 'must not be empty');
    const s = o.str('synchronous', 'NORMAL');
    if (s === 'NORMAL' || s === 'FULL') synchronous = s;
    else o.fail('synchronous', `must be "NORMAL" or "FULL", got ${JSON.stringify(s)}`);
  }
  return { type: 'sqlite', path: input.dbPathOverride ?? path, synchronous };
}

function readTimings(o: ConfigObject | null, base: EventReportTimings, issues: ConfigIssues): EventReportTimings {
  if (!o) return base;
  // Upper bound: these feed timers, and Node clamps delays above 2^31−1 ms to 1 ms.
  const t: EventReportTimings = {
    heartbeatTimeoutMs: o.int('heartbeat_timeout_ms', base.heartbeatTimeoutMs, 1, INT32_MAX),
    cleanupGraceMs: o.int('cleanup_grace_ms', base.cleanupGraceMs, 1, INT32_MAX),
    livenessCheckIntervalMs: o.int('liveness_check_interval_ms', base.livenessCheckIntervalMs, 1, INT32_MAX),
    snapshotMinIntervalMs: o.int('snapshot_min_interval_ms', base.snapshotMinIntervalMs, 1, INT32_MAX),
    snapshotDeltaDrainTimeoutMs: o.int('snapshot_delta_drain_timeout_ms', base.snapshotDeltaDrainTimeoutMs, 1, INT32_MAX),
  };
  if (t.livenessCheckIntervalMs >= t.heartbeatTimeoutMs) {
    issues.at(o.at('liveness_check_interval_ms'), `must be < heartbeat_timeout_ms (${t.livenessCheckIntervalMs} ≥ ${t.heartbeatTimeoutMs})`);
  }
  return t;
}

function readStorages(top: ConfigObject, issues: ConfigIssues, eventReport: EventReportTimings): StorageConfig[] {
  const out: StorageConfig[] = [];
  const seen = new Set<string>();
  top.array('storages').forEach((v, i) => {
    const path = indexPath(top.at('storages'), i);
    const o = ConfigObject.of(v, path, issues, STORAGE_KEYS);
    if (!o) return;
    const name = o.str('global_unique_name', '', true);
    if (o.has('global_unique_name') && !STORAGE_NAME.test(name)) o.fail('global_unique_name', `must match ^[A-Za-z0-9_.-]{1,64}$, got ${JSON.stringify(name)}`);
    else if (seen.has(name)) o.fail('global_unique_name', `duplicate storage name ${JSON.stringify(name)}`);
    seen.add(name);
    const kindText = o.str('type', '', true);
    let kind: StorageKind = 'file';
    if (isStorageKind(kindText)) kind = kindText;
    else if (o.has('type')) o.fail('type', `unknown storage type ${JSON.stringify(kindText)} (expected one of ${Object.keys(STORAGE_KINDS).join(', ')})`);
    const info = STORAGE_KINDS[kind];
    const rootPath = o.str('root_path', '');
    if ((kind === 'file' || kind === 'nfs') && rootPath === '' && isStorageKind(kindText)) o.fail('root_path', `required for type ${kind}`);
    const keyCountPerFile = o.int('key_count_per_file', 1, 1, INT32_MAX);
    if (keyCountPerFile !== 1) o.fail('key_count_per_file', `must be 1, got ${keyCountPerFile}`);
    let spec: JsonObject = new Map();
    const specRaw = o.raw('spec');
    if (specRaw !== undefined) {
      if (specRaw instanceof Map) spec = specRaw;
      else o.fail('spec', 'expected an object');
    }
    let timings = eventReport;
    if (o.has('event_report')) {
      if (!info.eventReport) o.fail('event_report', `only event-report storages may override event_report (type ${kind})`);
      else timings = readTimings(ConfigObject.of(o.raw('event_report'), o.at('event_report'), issues, EVENT_REPORT_KEYS), eventReport, issues);
    }
    out.push({
      globalUniqueName: name,
      kind,
      storageType: info.storageType,
      eventReport: info.eventReport,
      rootPath,
      clusterName: o.str('cluster_name', ''),
      keyCountPerFile: 1,
      checkStorageAvailableWhenOpen: o.bool('check_storage_available_when_open', false),
      available: o.bool('available', true),
      spec,
      eventReportTimings: timings,
    });
  });
  return out;
}

function readGroups(top: ConfigObject, issues: ConfigIssues, storages: readonly StorageConfig[]): InstanceGroupConfig[] {
  const byName = new Map(storages.map((s) => [s.globalUniqueName, s]));
  const out: InstanceGroupConfig[] = [];
  const seen = new Set<string>();
  top.array('instance_groups').forEach((v, i) => {
    const path = indexPath(top.at('instance_groups'), i);
    const o = ConfigObject.of(v, path, issues, GROUP_KEYS);
    if (!o) return;
    const name = o.str('name', '', true);
    if (o.has('name') && name === '') o.fail('name', 'must not be empty');
    else if (seen.has(name)) o.fail('name', `duplicate group name ${JSON.stringify(name)}`);
    seen.add(name);

    const storageCandidates = o.strList('storage_candidates');
    checkCandidates(o, 'storage_candidates', storageCandidates, byName, false, issues);
    const eventCandidates = o.strList('event_report_storage_candidates');
    checkCandidates(o, 'event_report_storage_candidates', eventCandidates, byName, true, issues);

    const extraRaw = o.raw('extra_info');
    const extraInfo = extraRaw === undefined ? '' : typeof extraRaw === 'string' ? extraRaw : jsonTextOf(extraRaw);
    const quotaGroupName = o.str('quota_group_name', name);
    out.push({
      name,
      quotaGroupName: quotaGroupName === '' ? name : quotaGroupName,
      storageCandidates,
      eventReportStorageCandidates: eventCandidates,
      maxInstanceCount: o.int('max_instance_count', 0, 0),
      quotaBytes: o.uint63('quota_bytes', 0n),
      extraInfo,
      userData: o.str('user_data', ''),
    });
  });
  return out;
}

/** §8: candidates exist, are of the right kind, no duplicates; ≤ 1 event-report storage per type. */
function checkCandidates(
  o: ConfigObject,
  key: string,
  names: readonly string[],
  byName: ReadonlyMap<string, StorageConfig>,
  eventReport: boolean,
  issues: ConfigIssues,
): void {
  const seen = new Set<string>();
  const typesSeen = new Map<number, string>();
  names.forEach((n, i) => {
    const at = indexPath(o.at(key), i);
    const s = byName.get(n);
    if (seen.has(n)) issues.at(at, `storage ${JSON.stringify(n)} listed twice`);
    else if (!s) issues.at(at, `unknown storage ${JSON.stringify(n)}`);
    else if (s.eventReport !== eventReport) {
      issues.at(at, eventReport ? `storage ${JSON.stringify(n)} is not an event-report storage` : `event-report storage ${JSON.stringify(n)} cannot be a writable candidate`);
    } else if (eventReport) {
      const prev = typesSeen.get(s.storageType);
      if (prev !== undefined) issues.at(at, `a second ${s.kind} storage (${JSON.stringify(prev)} already listed)`);
      typesSeen.set(s.storageType, n);
    }
    seen.add(n);
  });
}

function readPositivePair(
  top: ConfigObject,
  key: string,
  names: readonly [string, string],
  defs: readonly [number, number],
  issues: ConfigIssues,
): [number, number] {
  const o = top.has(key) ? ConfigObject.of(top.raw(key), top.at(key), issues, names) : null;
  if (!o) return [defs[0], defs[1]];
  return [o.int(names[0], defs[0], 1, INT32_MAX), o.int(names[1], defs[1], 1, INT32_MAX)];
}

/** §8: each entry is a registerInstance body validated as §4.1; ids unique. */
function readBootstrap(top: ConfigObject, issues: ConfigIssues, groups: ReadonlySet<string>): InstanceRecord[] {
  const out: InstanceRecord[] = [];
  const ids = new Set<string>();
  top.array('bootstrap_instances').forEach((v, i) => {
    const path = indexPath(top.at('bootstrap_instances'), i);
    if (!(v instanceof Map)) {
      issues.at(path, 'expected a registerInstance request object');
      return;
    }
    try {
      const parsed = parseRegistration(new RequestReader(v, path), (g) => groups.has(g));
      if (!parsed.ok) {
        for (const f of parsed.invalidFields) issues.at(`${path}.${f.field}`, missingFieldsMessage(REGISTER_INSTANCE_REQUEST, [f.entry]));
        return;
      }
      if (ids.has(parsed.record.instanceId)) {
        issues.at(`${path}.instance_id`, `duplicate bootstrap instance ${JSON.stringify(parsed.record.instanceId)}`);
        return;
      }
      ids.add(parsed.record.instanceId);
      out.push(parsed.record);
    } catch (e) {
      if (!(e instanceof BadRequestError)) throw e;
      // The reader names the field path (which starts with `path`); keep it as the location.
      const m = /^field (\S+): (.*)$/.exec(e.reason);
      if (m) issues.at(m[1] as string, m[2] as string);
      else issues.at(path, e.reason);
    }
  });
  return out;
}

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !(v instanceof Map) && !Object.isFrozen(v)) {
    Object.freeze(v);
    for (const k of Object.keys(v)) deepFreeze((v as Record<string, unknown>)[k]);
  }
  return v;
}
