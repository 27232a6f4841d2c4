/**
 * The report worker (issue 28): a thread that takes a big reportEvent body off the MetaService's
 * event loop. It decodes and parses the body, decodes and plans the request with the same code
 * the event loop uses (report-request.ts, report-plan.ts), keeps the items of its delta and
 * snapshot units, and writes them when the executor asks, through its own handle on the store:
 * - a delta run: one transaction on its SQLite connection, or bounded scripts on Redis;
 * - a snapshot: staged (SQLite: this connection's TEMP table; Redis: a stage list), then landed
 *   by `commit` in one transaction (SQLite) or by the roll-forward on the event loop (Redis).
 * Everything it answers is small (offload-protocol.ts). One request at a time per message; a
 * parse or a SQLite write runs to its end, which is fine here: nothing else waits on this loop.
 */
import { parentPort, workerData } from 'node:worker_threads';
import { isBadRequestError } from '../../meta-errors.js';
import type { MetaStore, StoreMutation } from '../../store/meta-store.js';
import { RedisMetaStore, isStoreUnavailable } from '../../store/redis-meta-store.js';
import { SqliteMetaStore } from '../../store/sqlite-meta-store.js';
import { JsonParseError, parseJson } from '../../wire/json-parse.js';
import { RequestReader } from '../../wire/request-reader.js';
import type { ValidBlock } from '../report-events.js';
import { deltaMutations, snapshotMutations, type DeltaEvent } from '../report-mutations.js';
import { planReport, type ReportPlan, type ReportUnit } from '../report-plan.js';
import { decodeReportRequest } from '../report-request.js';
import { reporterKey } from '../reporter-registry.js';
import type { OffloadReply, OffloadRequest, PreparedReport, ReportWorkerData } from './offload-protocol.js';

/** Snapshot rows built and staged per step (a few MB of strings at a time). */
const STAGE_ROWS = 4096;
/** Longest pause between two staging steps (the pause matches the step, up to this). */
const STAGE_MAX_PAUSE_MS = 50;
/** Ops per Redis script of a big delta: each script stays short for the other clients. */
const REDIS_DELTA_OPS = 2000;
/** A parse job whose request never came back for it is dropped after this long. */
const JOB_TTL_MS = 10 * 60 * 1000;

interface Job {
  /** Per unit index: the delta events or snapshot blocks it kept, undefined for other units. */
  readonly items: (readonly DeltaEvent[] | readonly ValidBlock[] | undefined)[];
  readonly createdAtMs: number;
}

const data = workerData as ReportWorkerData;
const port = parentPort;
const jobs = new Map<number, Job>();
/** Body pieces of parses not yet asked for. */
const bodies = new Map<number, Uint8Array[]>();
let nextJob = 1;
const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false });

function reply(m: OffloadReply, transfer: ArrayBuffer[] = []): void {
  port?.postMessage(m, transfer);
}

async function openStore(): Promise<SqliteMetaStore | RedisMetaStore> {
  const loc = data.store;
  if (loc.kind === 'sqlite') return SqliteMetaStore.open(loc.path, { synchronous: loc.synchronous, blockCacheEntries: 0 });
  return RedisMetaStore.open({ host: loc.host, port: loc.port, db: loc.db, namespace: loc.namespace });
}

/** §1.2/§1.3 and §7.2 steps 3–5 off the event loop; the plan's units refer to the kept items. */
function parse(id: number, body: Uint8Array): void {
  const job = nextJob++;
  let prepared: { traceId: string; report: PreparedReport; items: Job['items'] };
  try {
    const reader = RequestReader.ofBody(parseJson(utf8.decode(body), { maxDepth: 100, maxChars: data.maxBodyBytes }));
    const traceId = reader.str('trace_id');
    const request = decodeReportRequest(reader);
    const eventTypes = new Int32Array(request.events.length);
    for (let i = 0; i < eventTypes.length; i++) eventTypes[i] = (request.events[i] as { eventType: number }).eventType;
    const { plan, items } = keepItems(job, planReport(request.events, data.maxEventsPerRequest));
    prepared = { traceId, report: { instanceId: request.instanceId, hostIpPort: request.hostIpPort, storageType: request.storageType, eventTypes, plan }, items };
  } catch (e) {
    if (e instanceof JsonParseError || isBadRequestError(e)) return reply({ kind: 'bad_request', id, reason: e.message });
    if (e instanceof TypeError) return reply({ kind: 'bad_request', id, reason: 'body is not valid UTF-8' });
    throw e;
  }
  jobs.set(job, { items: prepared.items, createdAtMs: Date.now() });
  reply({ kind: 'parsed', id, job, traceId: prepared.traceId, report: prepared.report }, [prepared.report.eventTypes as Int32Array].map((a) => a.buffer as ArrayBuffer));
}

/** The plan with its delta and snapshot items replaced by references into this job. */
function keepItems(job: number, plan: ReportPlan): { plan: ReportPlan; items: Job['items'] } {
  const items: Job['items'] = [];
  const units = plan.units.map((u, unit): ReportUnit => {
    const indexes = Int32Array.from(u.indexes as ArrayLike<number>);
    if (u.kind === 'delta' && u.work.kind === 'inline') {
      items[unit] = u.work.events;
      return { kind: 'delta', indexes, work: { kind: 'offloaded', job, unit, size: u.work.events.length } };
    }
    if (u.kind === 'snapshot' && u.work.kind === 'inline') {
      items[unit] = u.work.blocks;
      return { kind: 'snapshot', indexes, work: { kind: 'offloaded', job, unit, size: u.work.blocks.length } };
    }
    return { ...u, indexes };
  });
  return { plan: { ...plan, invalid: Int32Array.from(plan.invalid as ArrayLike<number>), units }, items };
}

function itemsOf<T>(job: number, unit: number): readonly T[] {
  const items = jobs.get(job)?.items[unit];
  if (items === undefined) throw new Error(`report worker: job ${job} unit ${unit} is not kept (released or expired)`);
  return items as readonly T[];
}

/** Distinct block keys of `mutations`, or null when more than `max`. */
function touchedKeys(mutations: readonly StoreMutation[], max: number): BigInt64Array | null {
  if (mutations.length > max) return null;
  const keys = new BigInt64Array(mutations.length);
  for (let i = 0; i < mutations.length; i++) keys[i] = (mutations[i] as StoreMutation).blockKey;
  return keys;
}

async function handle(store: SqliteMetaStore | RedisMetaStore, m: OffloadRequest): Promise<void> {
  switch (m.kind) {
    case 'body': {
      const parts = bodies.get(m.id);
      if (parts === undefined) bodies.set(m.id, [m.part]);
      else parts.push(m.part);
      return;
    }
    case 'parse': {
      const parts = bodies.get(m.id) ?? [];
      bodies.delete(m.id);
      return parse(m.id, parts.length === 1 ? (parts[0] as Uint8Array) : Buffer.concat(parts, m.byteCount));
    }
    case 'release':
      jobs.delete(m.job);
      return;
    case 'delta': {
      const mutations = deltaMutations(m.target, m.generation, itemsOf<DeltaEvent>(m.job, m.unit), m.createTimeUs);
      const results = store instanceof RedisMetaStore ? await store.applyInBatches(mutations, REDIS_DELTA_OPS) : await store.apply(mutations);
      let missing = 0;
      for (const r of results) missing += r.missing ?? 0;
      const touched = touchedKeys(mutations, m.maxTouched);
      return reply({ kind: 'done', id: m.id, missing, touched }, touched ? [touched.buffer as ArrayBuffer] : []);
    }
    case 'stage': {
      const blocks = itemsOf<ValidBlock>(m.job, m.unit);
      const owner = reporterKey(m.target.instanceId, m.target.storageType, m.target.hostIpPort);
      for (let from = 0; from < blocks.length; from += STAGE_ROWS) {
        const t0 = performance.now();
        const rows = snapshotMutations(m.target, m.stageId, blocks, m.nowUs, from, Math.min(blocks.length, from + STAGE_ROWS));
        if (store instanceof RedisMetaStore) await store.stageRows(m.stageId, owner, rows);
        else store.stageRows(m.stageId, rows);
        // At most half of a core (and of Redis) for staging: the service's other work comes first.
        await new Promise((resolve) => setTimeout(resolve, Math.min(STAGE_MAX_PAUSE_MS, performance.now() - t0)));
      }
      return reply({ kind: 'done', id: m.id, missing: 0, touched: null });
    }
    case 'commit': {
      if (!(store instanceof SqliteMetaStore)) throw new Error('report worker: commit is the SQLite stage\'s; Redis stages roll forward');
      const { touched } = store.commitStage(m.stageId, m.maxTouched);
      return reply({ kind: 'done', id: m.id, missing: 0, touched }, touched ? [touched.buffer as ArrayBuffer] : []);
    }
    case 'drop':
      await store.dropStage(m.stageId);
      return reply({ kind: 'done', id: m.id, missing: 0, touched: null });
    case 'close':
      jobs.clear();
      await store.close();
      return reply({ kind: 'done', id: m.id, missing: 0, touched: null });
  }
}

function failure(m: OffloadRequest, err: unknown): void {
  if (m.kind === 'release' || m.kind === 'body') return;
  reply({ kind: 'failed', id: m.id, message: err instanceof Error ? err.message : String(err), unavailable: isStoreUnavailable(err) });
}

async function main(): Promise<void> {
  if (port === null) throw new Error('report-worker.ts runs as a worker thread');
  let store: MetaStore & (SqliteMetaStore | RedisMetaStore);
  try {
    store = await openStore();
  } catch (err) {
    reply({ kind: 'open_failed', message: err instanceof Error ? err.message : String(err) });
    return;
  }
  setInterval(() => {
    const now = Date.now();
    for (const [job, j] of jobs) if (now - j.createdAtMs > JOB_TTL_MS) jobs.delete(job);
  }, 60_000).unref();
  port.on('message', (m: OffloadRequest) => {
    handle(store, m).catch((err: unknown) => failure(m, err));
  });
  reply({ kind: 'ready' });
}

void main();
