/**
 * `POST /api/reportEvent` (kvcm-meta §7): decodes the ReportEventRequest (§7.1), applies the
 * common-field checks and instance resolution of §7.2 steps 1–2, hands the events to the
 * executor and prints the ReportEventResponse (§7.12). JSON type errors are the reader's
 * BadRequestErrors (HTTP 400); everything else is a business outcome.
 */
import type { MetaHttpServer, RpcContext, RpcResult } from '../http/meta-http-server.js';
import type { MetaMetrics } from '../http/meta-metrics.js';
import { ReportEventType, StorageType, enumName, isEnumValue, type ErrorCodeName } from '../meta-enums.js';
import { invalidFieldEntry, isMetaError, missingFieldsMessage } from '../meta-errors.js';
import type { MetaServiceDeps } from '../meta-service.js';
import type { RequestReader } from '../wire/request-reader.js';
import { wholeRequestError, type ReportEventOutcome } from '../report/report-event-executor.js';
import { createEventReporting, type EventReporting } from '../report/event-reporting.js';
import type { DecodedEvent, WireBlock, WireSpec } from '../report/report-events.js';
import { isEventReportStorageType, type EventReportStorageType } from '../report/report-location-id.js';

/** What reportEvent needs to know about a registered instance and its group (§4.2, §7.2). */
export interface ReportInstance {
  /** The group's `event_report_storage_candidates`: StorageType → `global_unique_name` (at most one per type). */
  readonly eventReportStorages: ReadonlyMap<number, string>;
  /** The group's `extra_info`, already a string (§4.2). */
  readonly extraInfo: string;
}

export interface ReportEventRpcDeps {
  readonly reporting: EventReporting;
  /** null = unknown instance (or its group is no longer configured) → INSTANCE_NOT_EXIST. */
  readonly resolveInstance: (instanceId: string) => Promise<ReportInstance | null>;
  readonly metrics?: MetaMetrics;
}

const MAX_HOST_BYTES = 255;
const HOST_FORBIDDEN = /[\s#]/;

/** §7.1: params member of each event type. */
const MEMBERS = ['node_register', 'block_add', 'block_delete', 'host_down', 'heartbeat', 'block_snapshot'] as const;
const MEMBER_OF_TYPE: ReadonlyMap<number, (typeof MEMBERS)[number]> = new Map([
  [ReportEventType.EVENT_NODE_REGISTER, 'node_register'],
  [ReportEventType.EVENT_BLOCK_ADD, 'block_add'],
  [ReportEventType.EVENT_BLOCK_DELETE, 'block_delete'],
  [ReportEventType.EVENT_HOST_DOWN, 'host_down'],
  [ReportEventType.EVENT_HEARTBEAT, 'heartbeat'],
  [ReportEventType.EVENT_BLOCK_SNAPSHOT, 'block_snapshot'],
]);

/**
 * startMetaService's registration call: builds the reportEvent subsystem over the service deps,
 * registers the RPC, wakes gate waiters on drain (§9.3) and stops the checker and cleanup on
 * close. The returned `visibility` is what the lookups filter event-report locations with.
 */
export function registerReportEventRpc(server: MetaHttpServer, deps: MetaServiceDeps): EventReporting {
  const eventStorages = deps.config.storages.filter((s) => s.eventReport);
  const cluster = deps.cluster;
  const reporting = createEventReporting({
    store: deps.store,
    logger: deps.logger.child({ component: 'meta-report-event' }),
    nowMs: deps.nowMs,
    timingsFor: (name) => deps.instances.storage(name)?.eventReportTimings ?? deps.config.eventReport,
    allTimings: eventStorages.length > 0 ? eventStorages.map((s) => s.eventReportTimings) : [deps.config.eventReport],
    maxEventsPerRequest: deps.config.limits.maxEventsPerRequest,
    metrics: deps.metrics,
    sync: cluster ? (registry) => cluster.reporterSync(registry) : undefined,
  });
  registerReportEventHandler(server, { reporting, metrics: deps.metrics, resolveInstance: (id) => resolveReportInstance(deps, id) });
  server.onDrain(() => reporting.drain());
  deps.onClose(() => reporting.close());
  return reporting;
}

/** Registers the handler over an already built subsystem (tests build their own). */
export function registerReportEventHandler(server: MetaHttpServer, deps: ReportEventRpcDeps): void {
  server.registerRpc('reportEvent', (req, ctx) => handleReportEvent(req, ctx, deps));
}

/** ReportInstance from the instance registry; INSTANCE_NOT_EXIST becomes null. */
async function resolveReportInstance(deps: MetaServiceDeps, instanceId: string): Promise<ReportInstance | null> {
  let resolved;
  try {
    resolved = await deps.instances.resolve(instanceId);
  } catch (e) {
    if (isMetaError(e) && e.code === 'INSTANCE_NOT_EXIST') return null;
    throw e;
  }
  const eventReportStorages = new Map<number, string>();
  for (const name of resolved.group.eventReportStorageCandidates) {
    const storage = deps.instances.storage(name);
    if (storage) eventReportStorages.set(storage.storageType, name);
  }
  return {
    eventReportStorages,
    extraInfo: resolved.group.extraInfo,
  };
}

export async function handleReportEvent(req: RequestReader, ctx: RpcContext, deps: ReportEventRpcDeps): Promise<RpcResult> {
  // Decode everything first: a JSON type error must be a 400 before any side effect.
  const eventReaders = req.messages('events');
  const instanceId = req.str('instance_id');
  // §7.2 step 1: empty → OK, no validation or liveness refresh; only the group's extra_info is
  // looked up (KVCM parity), "" when the instance is unknown.
  if (eventReaders.length === 0) {
    const known = instanceId === '' ? null : await deps.resolveInstance(instanceId);
    return toResult(wholeRequestError('OK', ''), known?.extraInfo ?? '');
  }
  const events = eventReaders.map(decodeEvent);
  const hostIpPort = req.str('host_ip_port');
  const storageType = req.enumOf('storage_type', StorageType);

  // §7.2 step 2: common fields, whole request, no side effects.
  // §1.4: a missing field by name, a present but invalid one with its value (KVCM parity).
  const bad: string[] = [];
  if (instanceId === '') bad.push('instance_id');
  if (hostIpPort === '') bad.push('host_ip_port');
  else if (!isValidHost(hostIpPort)) bad.push(invalidFieldEntry('host_ip_port', hostIpPort));
  if (storageType === StorageType.ST_UNSPECIFIED) bad.push('storage_type');
  else if (!isEventReportStorageType(storageType)) bad.push(invalidFieldEntry('storage_type', enumName(StorageType, storageType)));
  if (bad.length > 0) return count(deps, events, toResult(wholeRequestError('INVALID_ARGUMENT', missingFieldsMessage('ReportEvent', bad)), ''));

  const instance = await deps.resolveInstance(instanceId);
  if (!instance) return count(deps, events, toResult(wholeRequestError('INSTANCE_NOT_EXIST', `instance ${instanceId} does not exist`), ''));
  const storageName = instance.eventReportStorages.get(storageType);
  if (storageName === undefined) {
    const outcome = wholeRequestError('INSTANCE_NOT_EXIST', `instance ${instanceId} has no ${enumName(StorageType, storageType)} storage`);
    return count(deps, events, toResult(outcome, instance.extraInfo));
  }
  const outcome = await deps.reporting.executor.execute(
    { instanceId, storageType: storageType as EventReportStorageType, hostIpPort, storageName },
    events,
  );
  if (outcome.code !== 'OK') ctx.log.debug({ code: outcome.code, host: hostIpPort }, 'reportEvent not fully applied');
  return count(deps, events, toResult(outcome, instance.extraInfo));
}

/** §7.2 step 2: non-empty, ≤ 255 bytes, no whitespace, no `#`. */
function isValidHost(host: string): boolean {
  return host !== '' && Buffer.byteLength(host, 'utf8') <= MAX_HOST_BYTES && !HOST_FORBIDDEN.test(host);
}

function decodeEvent(e: RequestReader): DecodedEvent {
  const eventType = e.enumOf('event_type', ReportEventType);
  const member = MEMBER_OF_TYPE.get(eventType);
  if (member === undefined) return { eventType, memberOk: false };
  const p = e.message(member);
  // Common case, checked without probing the five other members by both spellings: the object
  // holds just `event_type` (non-null, since the type is known) and the matching member.
  let memberOk = p !== null;
  if (!(memberOk && e.memberCount === 2)) {
    for (const m of MEMBERS) if (m !== member && e.has(m)) memberOk = false;
  }
  switch (eventType) {
    case ReportEventType.EVENT_NODE_REGISTER:
      return { eventType, memberOk, mediums: p ? p.strList('mediums') : [] };
    case ReportEventType.EVENT_BLOCK_ADD: {
      // `uri` (field 2) is deprecated and ignored (§7.1).
      if (p === null) return { eventType, memberOk, blockKey: '', medium: '', specs: [] };
      return { eventType, memberOk, blockKey: p.str('block_key'), medium: p.str('medium'), specs: decodeSpecs(p) };
    }
    case ReportEventType.EVENT_BLOCK_DELETE:
      return {
        eventType,
        memberOk,
        blockKey: p ? p.str('block_key') : '',
        medium: p ? p.str('medium') : '',
        specNames: p ? p.strList('spec_names') : [],
      };
    case ReportEventType.EVENT_HOST_DOWN:
      return { eventType, memberOk };
    case ReportEventType.EVENT_HEARTBEAT:
      // system_status is opaque (DEBUG log only); read it so a malformed map is a 400.
      if (p) p.map('system_status');
      return { eventType, memberOk };
    default:
      // EVENT_BLOCK_SNAPSHOT; its own `medium` (field 1) is deprecated and ignored.
      return { eventType: ReportEventType.EVENT_BLOCK_SNAPSHOT, memberOk, blocks: p ? p.messages('blocks').map(decodeBlock) : [] };
  }
}

function decodeBlock(b: RequestReader): WireBlock {
  return { blockKey: b.str('block_key'), medium: b.str('medium'), specs: decodeSpecs(b) };
}

function decodeSpecs(b: RequestReader): WireSpec[] {
  const specReaders = b.messages('specs');
  const specs: WireSpec[] = new Array<WireSpec>(specReaders.length);
  for (let i = 0; i < specReaders.length; i++) {
    const s = specReaders[i] as RequestReader;
    specs[i] = { name: s.str('name'), uri: s.str('uri') };
  }
  return specs;
}

function toResult(o: ReportEventOutcome, extraInfo: string): RpcResult {
  return {
    code: o.code,
    message: o.message,
    fields: {
      item_results: o.itemResults.slice(),
      committed_snapshot_version: o.committedSnapshotVersion,
      retry_after_ms: o.retryAfterMs,
      snapshot_required: o.snapshotRequired,
      extra_info: extraInfo,
    },
  };
}

/** kvcm_report_event_items_total{event_type, code}: one count per item, tallied per (type, code) first. */
function count(deps: ReportEventRpcDeps, events: readonly DecodedEvent[], result: RpcResult): RpcResult {
  const m = deps.metrics;
  if (!m) return result;
  const itemResults = result.fields['item_results'] as ErrorCodeName[];
  const whole: ErrorCodeName = result.code ?? 'OK';
  // Keyed by event type number, then code: no per-item string building on the 100k-event path.
  const tally = new Map<number, Map<ErrorCodeName, number>>();
  for (let i = 0; i < events.length; i++) {
    const t = (events[i] as DecodedEvent).eventType;
    const type = isEnumValue(ReportEventType, t) ? t : ReportEventType.EVENT_UNSPECIFIED;
    const code = itemResults.length > 0 ? (itemResults[i] as ErrorCodeName) : whole;
    let byCode = tally.get(type);
    if (!byCode) tally.set(type, (byCode = new Map()));
    byCode.set(code, (byCode.get(code) ?? 0) + 1);
  }
  for (const [type, byCode] of tally) {
    const event_type = enumName(ReportEventType, type);
    for (const [code, n] of byCode) m.reportEventItemsTotal.inc({ event_type, code }, n);
  }
  return result;
}
