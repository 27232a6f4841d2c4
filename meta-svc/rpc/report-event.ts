/**
 * `POST /api/reportEvent` (kvcm-meta §7): decodes the ReportEventRequest (§7.1), applies the
 * common-field checks and instance resolution of §7.2 steps 1–2, hands the planned events to the
 * executor and prints the ReportEventResponse (§7.12). JSON type errors are the reader's
 * BadRequestErrors (HTTP 400); everything else is a business outcome. A body of at least the
 * offload size is decoded and planned by the report worker instead (issue 28), with the same code.
 */
import type { MetaHttpServer, OffloadedBody, RpcContext, RpcResult } from '../http/meta-http-server.js';
import type { MetaMetrics } from '../http/meta-metrics.js';
import { ReportEventType, StorageType, enumName, isEnumValue, type ErrorCodeName } from '../meta-enums.js';
import { invalidFieldEntry, isMetaError, missingFieldsMessage } from '../meta-errors.js';
import type { MetaServiceDeps } from '../meta-service.js';
import type { RequestReader } from '../wire/request-reader.js';
import { wholeRequestError, type ReportEventOutcome } from '../report/report-event-executor.js';
import { createEventReporting, type EventReporting } from '../report/event-reporting.js';
import { planReport } from '../report/report-plan.js';
import { decodeReportRequest } from '../report/report-request.js';
import type { PreparedReport } from '../report/offload/offload-protocol.js';
import { ReportOffload } from '../report/offload/report-offload.js';
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

/**
 * startMetaService's registration call: builds the reportEvent subsystem over the service deps
 * (with the report worker when the store can be opened from another thread), registers the RPC,
 * wakes gate waiters on drain (§9.3) and stops the checker, cleanup and worker on close. The
 * returned `visibility` is what the lookups filter event-report locations with.
 */
export function registerReportEventRpc(server: MetaHttpServer, deps: MetaServiceDeps): EventReporting {
  const eventStorages = deps.config.storages.filter((s) => s.eventReport);
  const cluster = deps.cluster;
  const location = deps.reportOffloadMinBytes === null ? null : deps.store.workerLocation();
  const offload =
    location === null
      ? undefined
      : new ReportOffload({
          store: deps.store,
          location,
          logger: deps.logger.child({ component: 'meta-report-worker' }),
          maxBodyBytes: deps.config.http.maxBodyBytes,
          maxEventsPerRequest: deps.config.limits.maxEventsPerRequest,
          minBodyBytes: deps.reportOffloadMinBytes ?? undefined,
        });
  const reporting = createEventReporting({
    store: deps.store,
    logger: deps.logger.child({ component: 'meta-report-event' }),
    nowMs: deps.nowMs,
    timingsFor: (name) => deps.instances.storage(name)?.eventReportTimings ?? deps.config.eventReport,
    allTimings: eventStorages.length > 0 ? eventStorages.map((s) => s.eventReportTimings) : [deps.config.eventReport],
    maxEventsPerRequest: deps.config.limits.maxEventsPerRequest,
    metrics: deps.metrics,
    sync: cluster ? (registry) => cluster.reporterSync(registry) : undefined,
    offload,
    stages: cluster?.stages,
  });
  const rpcDeps: ReportEventRpcDeps = {
    reporting,
    metrics: deps.metrics,
    resolveInstance: (id) => resolveReportInstance(deps, id),
  };
  registerReportEventHandler(server, rpcDeps, offload);
  server.onDrain(() => reporting.drain());
  deps.onClose(async () => {
    await reporting.close();
    await offload?.close();
  });
  return reporting;
}

/** Registers the handler over an already built subsystem (tests build their own), and the worker's parse for big bodies. */
export function registerReportEventHandler(server: MetaHttpServer, deps: ReportEventRpcDeps, offload?: ReportOffload): void {
  server.registerRpc('reportEvent', (req, ctx) => handleReportEvent(req, ctx, deps));
  if (offload === undefined) return;
  server.offloadBodies('reportEvent', {
    minBytes: offload.minBodyBytes,
    prepare: async (chunks, byteCount): Promise<OffloadedBody | null> => {
      const parsed = await offload.prepare(chunks, byteCount);
      if (parsed === null || parsed.kind === 'bad_request') return parsed;
      return {
        kind: 'parsed',
        traceId: parsed.traceId,
        run: async (ctx) => {
          try {
            return await respondToReport(parsed.report, ctx, deps);
          } finally {
            offload.release(parsed.job);
          }
        },
        discard: () => offload.release(parsed.job),
      };
    },
  });
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
  const request = decodeReportRequest(req);
  const eventTypes = new Array<number>(request.events.length);
  for (let i = 0; i < eventTypes.length; i++) eventTypes[i] = (request.events[i] as { eventType: number }).eventType;
  const plan = planReport(request.events, deps.reporting.executor.maxEventsPerRequest);
  return respondToReport({ instanceId: request.instanceId, hostIpPort: request.hostIpPort, storageType: request.storageType, eventTypes, plan }, ctx, deps);
}

/** §7.2 steps 1–2 and the executor, for a request decoded and planned on the loop or by the worker. */
async function respondToReport(report: PreparedReport, ctx: RpcContext, deps: ReportEventRpcDeps): Promise<RpcResult> {
  const { instanceId, hostIpPort, storageType, eventTypes } = report;
  // §7.2 step 1: empty → OK, no validation or liveness refresh; only the group's extra_info is
  // looked up (KVCM parity), "" when the instance is unknown.
  if (eventTypes.length === 0) {
    const known = instanceId === '' ? null : await deps.resolveInstance(instanceId);
    return toResult(wholeRequestError('OK', ''), known?.extraInfo ?? '');
  }

  // §7.2 step 2: common fields, whole request, no side effects.
  // §1.4: a missing field by name, a present but invalid one with its value (KVCM parity).
  const bad: string[] = [];
  if (instanceId === '') bad.push('instance_id');
  if (hostIpPort === '') bad.push('host_ip_port');
  else if (!isValidHost(hostIpPort)) bad.push(invalidFieldEntry('host_ip_port', hostIpPort));
  if (storageType === StorageType.ST_UNSPECIFIED) bad.push('storage_type');
  else if (!isEventReportStorageType(storageType)) bad.push(invalidFieldEntry('storage_type', enumName(StorageType, storageType)));
  if (bad.length > 0) return count(deps, eventTypes, toResult(wholeRequestError('INVALID_ARGUMENT', missingFieldsMessage('ReportEvent', bad)), ''));

  const instance = await deps.resolveInstance(instanceId);
  if (!instance) return count(deps, eventTypes, toResult(wholeRequestError('INSTANCE_NOT_EXIST', `instance ${instanceId} does not exist`), ''));
  const storageName = instance.eventReportStorages.get(storageType);
  if (storageName === undefined) {
    const outcome = wholeRequestError('INSTANCE_NOT_EXIST', `instance ${instanceId} has no ${enumName(StorageType, storageType)} storage`);
    return count(deps, eventTypes, toResult(outcome, instance.extraInfo));
  }
  const outcome = await deps.reporting.executor.execute(
    { instanceId, storageType: storageType as EventReportStorageType, hostIpPort, storageName },
    report.plan,
  );
  if (outcome.code !== 'OK') ctx.log.debug({ code: outcome.code, host: hostIpPort }, 'reportEvent not fully applied');
  return count(deps, eventTypes, toResult(outcome, instance.extraInfo));
}

/** §7.2 step 2: non-empty, ≤ 255 bytes, no whitespace, no `#`. */
function isValidHost(host: string): boolean {
  return host !== '' && Buffer.byteLength(host, 'utf8') <= MAX_HOST_BYTES && !HOST_FORBIDDEN.test(host);
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
function count(deps: ReportEventRpcDeps, eventTypes: ArrayLike<number>, result: RpcResult): RpcResult {
  const m = deps.metrics;
  if (!m) return result;
  const itemResults = result.fields['item_results'] as ErrorCodeName[];
  const whole: ErrorCodeName = result.code ?? 'OK';
  // Keyed by event type number, then code: no per-item string building on the 100k-event path.
  const tally = new Map<number, Map<ErrorCodeName, number>>();
  for (let i = 0; i < eventTypes.length; i++) {
    const t = eventTypes[i] as number;
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
