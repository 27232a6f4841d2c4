/**
 * The router's gRPC edge to the directory (architecture.md "The view stream"): one WatchView call
 * at a time, feeding the ViewCache.
 *
 * - Fresh watch (empty epoch) until a snapshot is applied; after a broken stream, resume with the
 *   (epoch, version) last applied — a directory that no longer has it (or a restarted one, with
 *   another epoch) answers with a snapshot, which replaces everything.
 * - A gap or an update that cannot be applied: resubscribe fresh at once for a snapshot.
 * - Failure (error, end, or silence for `staleAfterMs`): the next `--directory_addr` entry,
 *   round robin, after a capped exponential backoff with jitter (none after a stream that was
 *   working, at most once per backoff cap).
 * - Silence for `staleAfterMs` also marks the view stale: no cache credit until a message lands.
 * Updates are applied strictly in arrival order; an update introducing a new hash seed waits for
 * its hasher (async) and holds back the ones behind it.
 * grpc-js errors are converted to ViewStreamError here and nowhere else.
 */
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import { channelCredentials, type GrpcClientTls } from '../../shared/security/grpc-tls.js';
import { kvDirectoryServiceConstructor } from '../../shared/view/kvdirectory-proto.js';
import type { WireInflightReport, WireViewUpdate, WireWatchViewRequest } from '../../shared/view/view-wire.js';
import { ViewCache } from './view-cache.js';
import { ViewClientClosedError, ViewGapError, ViewStreamError } from './view-errors.js';
import { decodeViewUpdate } from './view-update.js';

export interface DirectoryAddress {
  readonly host: string;
  readonly port: number;
}

export interface ViewClientOptions {
  /** `--directory_addr`, in failover order. */
  readonly directoryAddrs: readonly DirectoryAddress[];
  /** Sent as WatchViewRequest.router_id (the directory's diagnostics name watchers by it). */
  readonly routerId: string;
  /** `--view_stale_after_ms`. */
  readonly staleAfterMs: number;
  /** `--internal_api_token`: sent as `x-internal-token` metadata when non-empty. */
  readonly internalApiToken?: string;
  /** `--grpc_tls_*` contents (CA verifying the directory, optional client certificate); absent or null = plaintext. */
  readonly tls?: GrpcClientTls | null;
  readonly logger?: Logger;
  /** Clock, ms since the Unix epoch (tests may pin it). */
  readonly nowMs?: () => number;
  /** First retry delay after a failed attempt (default 100 ms). */
  readonly backoffBaseMs?: number;
  /** Retry delay cap (default 2000 ms). */
  readonly backoffMaxMs?: number;
}

interface KvDirectoryViewClient extends grpc.Client {
  WatchView(req: WireWatchViewRequest, metadata: grpc.Metadata): grpc.ClientReadableStream<WireViewUpdate>;
  ReportInflight(metadata: grpc.Metadata, callback: (err: grpc.ServiceError | null) => void): grpc.ClientWritableStream<WireInflightReport>;
}

/** A `ReportInflight` call open to the directory the view is watched from. */
export interface InflightReportCall {
  readonly address: string;
  readonly stream: grpc.ClientWritableStream<WireInflightReport>;
}

interface Pending {
  readonly callId: number;
  readonly wire: WireViewUpdate;
  /** When it was received (monotonic ms): the ages it carries count from then, not from its turn in the queue. */
  readonly receivedAtMs: number;
}

/** Keys of a snapshot part applied per event-loop turn: a few ms of index updates. */
export const APPLY_STEP_KEYS = 8192;
/** Updates received but not applied at which the call stops reading until the queue drains. */
const QUEUE_PAUSE = 4;
const DEFAULT_BACKOFF_BASE_MS = 100;
const DEFAULT_BACKOFF_MAX_MS = 2000;

function addressText(a: DirectoryAddress): string {
  return a.host.includes(':') ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

/** grpc-js error → ViewStreamError; the only place that reads grpc-js error shapes. */
function toViewStreamError(address: string, e: unknown): ViewStreamError {
  if (e !== null && typeof e === 'object' && 'code' in e && typeof (e as { code: unknown }).code === 'number') {
    const code = (e as grpc.ServiceError).code;
    const name = grpc.status[code] ?? String(code);
    const se = e as grpc.ServiceError;
    return new ViewStreamError(address, name, se.details || se.message);
  }
  return new ViewStreamError(address, 'UNKNOWN', e instanceof Error ? e.message : String(e));
}

export class ViewClient extends EventEmitter {
  readonly cache: ViewCache;
  private readonly addrs: readonly string[];
  private readonly clients: (KvDirectoryViewClient | null)[];
  private readonly log: Logger;
  private readonly now: () => number;
  private readonly ctor: grpc.ServiceClientConstructor;
  private addrIndex = 0;
  private call: grpc.ClientReadableStream<WireViewUpdate> | null = null;
  private callId = 0;
  /** When the current call started or last delivered a message (silence detection). */
  private callActivityMs = 0;
  private callHeard = false;
  private failures = 0;
  private lastImmediateRetryMs = Number.NEGATIVE_INFINITY;
  private readonly queue: Pending[] = [];
  private draining = false;
  private retryTimer: NodeJS.Timeout | null = null;
  private readonly staleTimer: NodeJS.Timeout;
  private staleAnnounced = false;
  private closed = false;
  private readonly ready: Promise<void>;
  private resolveReady!: () => void;
  private rejectReady!: (e: Error) => void;

  private constructor(private readonly opts: ViewClientOptions) {
    super();
    if (opts.directoryAddrs.length === 0) throw new RangeError('ViewClient needs at least one directory address');
    this.cache = new ViewCache({ staleAfterMs: opts.staleAfterMs });
    this.addrs = opts.directoryAddrs.map(addressText);
    this.clients = this.addrs.map(() => null);
    this.log = opts.logger ?? silentLogger;
    this.now = opts.nowMs ?? Date.now;
    this.ctor = kvDirectoryServiceConstructor();
    this.ready = new Promise<void>((resolve, reject) => {
      this.resolveReady = resolve;
      this.rejectReady = reject;
    });
    // Marked handled: a client closed before anyone awaited readiness is not an error.
    this.ready.catch(() => undefined);
    const tick = Math.max(10, Math.min(250, Math.floor(opts.staleAfterMs / 4)));
    this.staleTimer = setInterval(() => this.checkSilence(), tick);
    this.staleTimer.unref();
  }

  /** Starts watching `directoryAddrs[0]` at once. */
  static start(opts: ViewClientOptions): ViewClient {
    const c = new ViewClient(opts);
    c.connect();
    return c;
  }

  /** Resolves once the first snapshot has been applied; rejects if closed before. */
  whenReady(): Promise<void> {
    return this.ready;
  }

  /** The address of the call currently open; null between attempts. */
  get currentAddress(): string | null {
    return this.call === null ? null : this.addrs[this.addrIndex]!;
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    clearInterval(this.staleTimer);
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = null;
    this.endCall();
    this.queue.length = 0;
    for (const c of this.clients) c?.close();
    this.rejectReady(new ViewClientClosedError());
  }

  /**
   * Opens `ReportInflight` on the channel of the directory the view is currently watched from
   * (same credentials and token); null while no watch is open. `onEnd` runs once when the call
   * ends, with the reason (the caller reopens later).
   */
  openInflightReport(onEnd: (reason: string) => void): InflightReportCall | null {
    if (this.closed || this.call === null) return null;
    const address = this.addrs[this.addrIndex]!;
    const stream = this.clientFor(this.addrIndex).ReportInflight(this.metadata(), (err) => onEnd(err === null ? 'ended by the directory' : toViewStreamError(address, err).message));
    return { address, stream };
  }

  private metadata(): grpc.Metadata {
    const md = new grpc.Metadata();
    if (this.opts.internalApiToken) md.set('x-internal-token', this.opts.internalApiToken);
    return md;
  }

  private clientFor(i: number): KvDirectoryViewClient {
    let c = this.clients[i] ?? null;
    if (c === null) {
      c = new this.ctor(this.addrs[i]!, channelCredentials(this.opts.tls ?? null), {
        // Snapshots carry every stream's residency: far beyond grpc-js's 4 MiB default.
        'grpc.max_receive_message_length': -1,
        // Our own failover paces attempts; keep the channel's reconnect backoff short under it.
        'grpc.initial_reconnect_backoff_ms': 100,
        'grpc.max_reconnect_backoff_ms': 2000,
      }) as unknown as KvDirectoryViewClient;
      this.clients[i] = c;
    }
    return c;
  }

  private connect(): void {
    if (this.closed) return;
    this.retryTimer = null;
    const i = this.addrIndex;
    const fresh = this.cache.needsSnapshot;
    const req: WireWatchViewRequest = {
      router_id: this.opts.routerId,
      epoch: fresh ? '' : this.cache.epoch,
      version: fresh ? '0' : this.cache.version.toString(),
    };
    const id = ++this.callId;
    const call = this.clientFor(i).WatchView(req, this.metadata());
    this.call = call;
    this.callActivityMs = this.now();
    this.callHeard = false;
    this.log.debug({ address: this.addrs[i], epoch: req.epoch, version: req.version }, 'view: watching');
    call.on('data', (w: WireViewUpdate) => this.onMessage(id, w));
    call.on('error', (e: unknown) => this.onCallEnd(id, e));
    call.on('end', () => this.onCallEnd(id, null));
  }

  /** Cancels the current call (if any); its late events are ignored by id. */
  private endCall(): void {
    const call = this.call;
    this.call = null;
    this.callId++;
    if (call !== null) {
      call.removeAllListeners('data');
      // A cancelled call still emits 'error' (CANCELLED): swallowed here, it was our doing.
      call.on('error', () => undefined);
      call.cancel();
    }
  }

  private onMessage(id: number, wire: WireViewUpdate): void {
    if (id !== this.callId || this.closed) return;
    this.callActivityMs = this.now();
    if (!this.callHeard) {
      this.callHeard = true;
      this.emit('connected', this.addrs[this.addrIndex]);
    }
    this.queue.push({ callId: id, wire, receivedAtMs: performance.now() });
    // Messages (snapshot parts) arriving faster than they are applied: stop reading, so the
    // transport's flow control holds the rest at the directory instead of here.
    if (this.queue.length >= QUEUE_PAUSE) this.call?.pause();
    if (!this.draining) void this.drain();
  }

  private async drain(): Promise<void> {
    this.draining = true;
    try {
      while (this.queue.length > 0 && !this.closed) {
        const p = this.queue.shift()!;
        if (this.queue.length < QUEUE_PAUSE && this.call?.isPaused() === true) this.call.resume();
        if (p.callId !== this.callId) continue;
        await this.applyOne(p);
      }
    } finally {
      this.draining = false;
    }
  }

  private async applyOne(p: Pending): Promise<void> {
    try {
      const u = decodeViewUpdate(p.wire, p.receivedAtMs);
      const missing = this.cache.missingSeeds(u);
      if (missing.length > 0) {
        await this.cache.hashers.ensure(missing);
        if (p.callId !== this.callId || this.closed) return;
      }
      // A snapshot part is applied in steps, a turn each, so requests are served in between.
      while (!this.cache.applyStep(u, this.now(), APPLY_STEP_KEYS)) {
        await new Promise((r) => setImmediate(r));
        if (p.callId !== this.callId || this.closed) return;
      }
      // A heartbeat ignored while waiting for a snapshot is no sign of health.
      if (!this.cache.needsSnapshot) this.failures = 0;
      this.staleAnnounced = false;
      if (u.kind === 'snapshot' || (u.kind === 'snapshot_chunk' && u.last)) {
        this.log.info({ address: this.addrs[this.addrIndex], epoch: u.epoch, version: u.version.toString() }, 'view: snapshot applied');
        this.emit('snapshot', u.epoch);
        this.resolveReady();
      }
      if (u.kind !== 'heartbeat' && !(u.kind === 'snapshot_chunk' && !u.last)) this.emit('update', u.version);
    } catch (e) {
      const detail = e instanceof Error ? e.message : String(e);
      const gap = e instanceof ViewGapError;
      if (gap) this.log.warn({ address: this.addrs[this.addrIndex], err: detail }, 'view: gap, resubscribing for a snapshot');
      else {
        this.cache.requireSnapshot(detail);
        this.log.error({ address: this.addrs[this.addrIndex], err: detail }, 'view: update not applicable, resubscribing for a snapshot');
      }
      this.announceStale();
      this.endCall();
      // A gap: the directory is alive, only our continuity is lost — same address, fresh watch,
      // at once. An update we cannot apply would come again from the same directory: next address.
      // Repeats back off, so a directory that keeps sending the same thing is not hammered.
      this.failures++;
      if (!gap) this.addrIndex = (this.addrIndex + 1) % this.addrs.length;
      this.scheduleConnect(this.retryDelayMs(this.failures === 1));
    }
  }

  private onCallEnd(id: number, e: unknown): void {
    if (id !== this.callId || this.closed) return;
    const err = e === null ? new ViewStreamError(this.addrs[this.addrIndex]!, 'OK', 'stream ended by the directory') : toViewStreamError(this.addrs[this.addrIndex]!, e);
    this.failover(err);
  }

  private failover(err: ViewStreamError): void {
    this.endCall();
    const healthy = this.callHeard;
    if (!healthy) this.failures++;
    this.log.warn({ address: err.address, code: err.grpcCode, err: err.message, failures: this.failures }, 'view: stream lost');
    this.addrIndex = (this.addrIndex + 1) % this.addrs.length;
    this.scheduleConnect(this.retryDelayMs(healthy));
  }

  /**
   * No wait after a stream that was working (or a first failure), but at most once per backoff
   * cap: a directory that keeps accepting and dropping the watch is then retried with backoff.
   */
  private retryDelayMs(immediate: boolean): number {
    const now = this.now();
    if (immediate && now - this.lastImmediateRetryMs >= (this.opts.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS)) {
      this.lastImmediateRetryMs = now;
      return 0;
    }
    return this.backoffMs();
  }

  private scheduleConnect(delayMs: number): void {
    if (this.closed) return;
    if (this.retryTimer !== null) clearTimeout(this.retryTimer);
    this.retryTimer = setTimeout(() => this.connect(), delayMs);
    this.retryTimer.unref();
  }

  /** Capped exponential backoff with jitter in [½, 1] of the step. */
  private backoffMs(): number {
    const base = this.opts.backoffBaseMs ?? DEFAULT_BACKOFF_BASE_MS;
    const max = this.opts.backoffMaxMs ?? DEFAULT_BACKOFF_MAX_MS;
    const step = Math.min(max, base * 2 ** Math.min(30, Math.max(0, this.failures - 1)));
    return Math.round(step * (0.5 + Math.random() / 2));
  }

  private announceStale(): void {
    if (this.staleAnnounced) return;
    this.staleAnnounced = true;
    this.emit('stale', this.cache.staleReason ?? 'directory view stale');
  }

  /** Periodic: marks the view stale after `staleAfterMs` of silence and drops a silent call. */
  private checkSilence(): void {
    if (this.closed) return;
    const now = this.now();
    const staleAfter = this.opts.staleAfterMs;
    if (this.cache.hasSnapshot && now - this.cache.lastHeardMs >= staleAfter && this.cache.staleReason === null) {
      this.cache.markStale(`no view message for ${staleAfter} ms`);
      this.log.warn({ staleAfterMs: staleAfter }, 'view: stale, no cache credit until the directory is heard again');
      this.announceStale();
    }
    if (this.call !== null && now - this.callActivityMs >= staleAfter) {
      this.failover(new ViewStreamError(this.addrs[this.addrIndex]!, 'DEADLINE_EXCEEDED', `no view message for ${staleAfter} ms`));
    }
  }
}
