/**
 * The event loop's side of the report worker (issue 28): a reportEvent body of at least
 * `minBodyBytes` is parsed, planned and written by the worker thread (report-worker.ts), so no
 * request, however big, holds the MetaService's event loop for more than a few milliseconds.
 * The executor keeps every rule (gate, fence, rate limit, epochs) on the loop and asks the
 * worker only for the store work of the units whose items the worker kept (`OffloadedWrites`).
 *
 * SQLite: the worker has its own connection; its writes run inside the main handle's
 * `externalWrite`, so the loop's own writes wait (without blocking) and its read cache forgets
 * what the worker wrote. Redis: the worker has its own connection; nothing to coordinate.
 *
 * The worker starts with the first big request (a service that never gets one never pays for
 * it) and is unref'd. If it cannot start, that request and the next ones are parsed on the event
 * loop as before (`prepare` answers null); if it dies, the next big request starts a new one.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../../../shared/log/logger.js';
import { StoreError, type MetaStore, type WorkerStoreLocation } from '../../store/meta-store.js';
import { StoreUnavailableError } from '../../store/redis-meta-store.js';
import type { OffloadedWrites, StagedCommitMode } from '../offloaded-writes.js';
import type { OffloadedWork } from '../report-plan.js';
import type { ReporterIdentity } from '../reporter-registry.js';
import type { OffloadReply, OffloadRequest, PreparedReport, ReportWorkerData } from './offload-protocol.js';

/**
 * Default `minBodyBytes`: ~1,000 ADD events. Parsing and applying a body this size on the loop
 * takes a few ms; everything bigger goes to the worker.
 */
export const DEFAULT_OFFLOAD_MIN_BODY_BYTES = 128 * 1024;

/** Body bytes posted to the worker between two turns of the event loop. */
const BODY_YIELD_BYTES = 1024 * 1024;

/** Keys the SQLite read cache forgets one by one after a worker write; beyond, the instance's whole cache. */
const MAX_TOUCHED_KEYS = 16384;

export interface ReportOffloadOptions {
  /** The service's store (the main handle): the worker opens its own on the same location. */
  readonly store: MetaStore;
  readonly location: WorkerStoreLocation;
  readonly logger: Logger;
  readonly maxBodyBytes: number;
  readonly maxEventsPerRequest: number;
  readonly minBodyBytes?: number;
}

/** A body the worker parsed: a §1.2 400, or the request ready to run (its items kept in the worker as `job`). */
export type OffloadedParse =
  | { readonly kind: 'bad_request'; readonly reason: string }
  | { readonly kind: 'parsed'; readonly job: number; readonly traceId: string; readonly report: PreparedReport };

type Pending = { resolve(reply: OffloadReply): void; reject(err: Error): void };

/**
 * Built, the worker is the .js beside this file. Under tsx (tests, `node --import tsx`) it is the
 * .ts source, and a worker thread does not inherit tsx's module hooks: a bootstrap registers them
 * in the thread first (production never takes it).
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');

function spawnWorker(data: ReportWorkerData): Worker {
  if (!FROM_SOURCE) return new Worker(new URL('./report-worker.js', import.meta.url), { workerData: data });
  const entry = new URL('./report-worker.ts', import.meta.url).href;
  const api = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href;
  return new Worker(`import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`, { eval: true, workerData: data });
}

export class ReportOffload implements OffloadedWrites {
  readonly commitMode: StagedCommitMode;
  readonly minBodyBytes: number;
  private worker: Worker | null = null;
  private ready: Promise<boolean> | null = null;
  private readonly pending = new Map<number, Pending>();
  private nextId = 1;
  private closed = false;

  constructor(private readonly opts: ReportOffloadOptions) {
    this.commitMode = opts.location.kind === 'sqlite' ? 'atomic' : 'roll_forward';
    this.minBodyBytes = opts.minBodyBytes ?? DEFAULT_OFFLOAD_MIN_BODY_BYTES;
  }

  /**
   * Parses a body in the worker. null: the worker is not running (the caller parses on the
   * loop). The chunks go over as they arrived, cloned (each a few µs: a fresh buffer to transfer
   * instead costs its page faults, ~4 ms per MiB on a cold process), with a turn of the event
   * loop after each MiB; the worker joins them. Throws when the worker dies with the body.
   */
  async prepare(chunks: readonly Buffer[], byteCount: number): Promise<OffloadedParse | null> {
    if (!(await this.start()) || this.worker === null) return null;
    const worker = this.worker;
    const id = this.nextId++;
    let sinceYield = 0;
    for (let i = 0; i < chunks.length; i++) {
      const part = chunks[i] as Buffer;
      worker.postMessage({ kind: 'body', id, part } satisfies OffloadRequest);
      sinceYield += part.length;
      if (sinceYield >= BODY_YIELD_BYTES && i < chunks.length - 1) {
        sinceYield = 0;
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
    }
    // The worker that got the pieces must parse them: one that died meanwhile took them along.
    const reply = await this.call({ kind: 'parse', id, byteCount }, worker);
    if (reply.kind === 'bad_request') return { kind: 'bad_request', reason: reply.reason };
    if (reply.kind !== 'parsed') throw new Error(`report worker answered a parse with ${reply.kind}`);
    return { kind: 'parsed', job: reply.job, traceId: reply.traceId, report: reply.report };
  }

  /** The worker may forget the job's items. */
  release(job: number): void {
    this.worker?.postMessage({ kind: 'release', job } satisfies OffloadRequest);
  }

  async writeDelta(work: OffloadedWork, target: ReporterIdentity, generation: string, createTimeUs: bigint): Promise<{ readonly missing: number }> {
    const reply = await this.opts.store.externalWrite(
      target.instanceId,
      () => this.done({ kind: 'delta', id: this.nextId++, job: work.job, unit: work.unit, target: plain(target), generation, createTimeUs, maxTouched: MAX_TOUCHED_KEYS }),
      (r) => r.touched,
    );
    return { missing: reply.missing };
  }

  async stageSnapshot(work: OffloadedWork, target: ReporterIdentity, stageId: string, nowUs: bigint): Promise<void> {
    await this.done({ kind: 'stage', id: this.nextId++, job: work.job, unit: work.unit, target: plain(target), stageId, nowUs });
  }

  async commitStage(stageId: string, instanceId: string): Promise<void> {
    await this.opts.store.externalWrite(instanceId, () => this.done({ kind: 'commit', id: this.nextId++, stageId, maxTouched: MAX_TOUCHED_KEYS }), (r) => r.touched);
  }

  async dropStage(stageId: string): Promise<void> {
    await this.done({ kind: 'drop', id: this.nextId++, stageId });
  }

  /** Stops the worker after it closed its store handle (before the service closes its own). */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const worker = this.worker;
    if (worker === null) return;
    if (await this.ready) await this.call({ kind: 'close', id: this.nextId++ }).catch(() => undefined);
    await worker.terminate();
  }

  /** Starts the worker if it is not running; resolves true once it serves. */
  private start(): Promise<boolean> {
    if (this.closed) return Promise.resolve(false);
    if (this.ready !== null) return this.ready;
    const data: ReportWorkerData = { store: this.opts.location, maxBodyBytes: this.opts.maxBodyBytes, maxEventsPerRequest: this.opts.maxEventsPerRequest };
    const worker = spawnWorker(data);
    worker.unref();
    this.worker = worker;
    this.ready = new Promise<boolean>((resolve) => {
      const onStart = (m: OffloadReply): void => {
        if (m.kind !== 'ready' && m.kind !== 'open_failed') return;
        worker.off('message', onStart);
        if (m.kind === 'open_failed') this.opts.logger.warn({ reason: m.message }, 'report worker could not open the store; big reportEvents are parsed on the event loop');
        resolve(m.kind === 'ready');
      };
      worker.on('message', onStart);
      worker.once('exit', () => resolve(false));
    });
    worker.on('message', (m: OffloadReply) => this.answer(m));
    worker.on('error', (err) => this.opts.logger.error({ err }, 'report worker failed'));
    worker.once('exit', (code) => {
      if (this.worker === worker) {
        this.worker = null;
        this.ready = null;
      }
      const err = new StoreError(`report worker exited (code ${code})`);
      for (const p of this.pending.values()) p.reject(err);
      this.pending.clear();
      if (!this.closed) this.opts.logger.warn({ code }, 'report worker exited; restarted on the next big reportEvent');
    });
    return this.ready;
  }

  private answer(m: OffloadReply): void {
    if (m.kind === 'ready' || m.kind === 'open_failed') return;
    const p = this.pending.get(m.id);
    if (p === undefined) return;
    this.pending.delete(m.id);
    p.resolve(m);
  }

  private async call(req: Exclude<OffloadRequest, { kind: 'release' | 'body' }>, expected?: Worker): Promise<OffloadReply> {
    if (!(await this.start()) || this.worker === null) throw new StoreError('report worker is not running');
    const worker = this.worker;
    if (expected !== undefined && worker !== expected) throw new StoreError('report worker restarted during the request');
    return new Promise<OffloadReply>((resolve, reject) => {
      this.pending.set(req.id, { resolve, reject });
      worker.postMessage(req);
    });
  }

  /** A write's answer; a worker-side failure as the store error it was. */
  private async done(req: Exclude<OffloadRequest, { kind: 'release' | 'parse' | 'body' }>): Promise<Extract<OffloadReply, { kind: 'done' }>> {
    const reply = await this.call(req);
    if (reply.kind === 'done') return reply;
    if (reply.kind === 'failed') throw reply.unavailable ? new StoreUnavailableError(`report worker: ${reply.message}`) : new StoreError(`report worker: ${reply.message}`);
    throw new StoreError(`report worker answered ${req.kind} with ${reply.kind}`);
  }
}

/** The identity fields only (a Reporter carries a gate and timers that must not be cloned). */
function plain(t: ReporterIdentity): ReporterIdentity {
  return { instanceId: t.instanceId, storageType: t.storageType, hostIpPort: t.hostIpPort, storageName: t.storageName };
}
