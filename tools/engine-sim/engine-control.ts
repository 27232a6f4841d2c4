/**
 * The simulated engine's control side (discovery.md): it registers `XLLM:<TYPE>:<host:port>` in
 * etcd bound to a lease (TTL ~3 s, kept alive) with a fresh `incarnation_id`, heartbeats its load
 * to the directory every 500 ms, and serves `GET /health` on its HTTP port (the port in its
 * instance name). The KV event side is EngineSimulator / RankPublisher; this class is only
 * lifecycle, so tests can drive the instance states:
 *
 *   kill()        a crash: heartbeats and /health stop, the lease is left to expire (→ SUSPECT)
 *   loseLease()   the lease is revoked while /health and heartbeats go on (→ LEASE_LOST)
 *   restart()     a new process on the same address: new incarnation, new lease (→ replacement)
 *   reregister()  the same process writes its key again (same incarnation: a refresh)
 *   pauseHeartbeats() heartbeats stop while everything else goes on (a hung engine)
 *
 * A lease etcd ends on its own (it expired while the process was stopped or etcd unreachable, or
 * someone revoked it) is re-granted and the key written again under the same incarnation, every
 * LEASE_RETRY_MS until it takes, as a long-running engine must: otherwise the instance stays
 * LEASE_LOST in the directory that saw it and a directory started later never learns it.
 * loseLease() revokes on purpose and does not come back.
 */
import { randomUUID } from 'node:crypto';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { Socket } from 'node:net';
import { Etcd3, type Lease } from 'etcd3';
import { silentLogger, type Logger } from '../../shared/log/logger.js';

export type EngineType = 'DEFAULT' | 'PREFILL' | 'DECODE' | 'MIX';
export type EngineRole = 'PREFILL' | 'DECODE';

/**
 * More routes on the engine's one HTTP port (e.g. the simulator's OpenAI endpoint): `handle`
 * answers and returns true for its own paths, false to leave the request to /health and 404.
 */
export interface EngineHttpRoutes {
  handle(req: IncomingMessage, res: ServerResponse): boolean;
}

/** Pause between attempts to register again after etcd ended the lease. */
const LEASE_RETRY_MS = 500;

const TYPE_NUMBER: Readonly<Record<EngineType, number>> = { DEFAULT: 0, PREFILL: 1, DECODE: 2, MIX: 3 };

/** Load fields as the heartbeat carries them (discovery.md "Heartbeats"). */
export interface EngineLoad {
  waiting_requests_num: number;
  gpu_cache_usage_perc: number;
}

export interface EngineControlOptions {
  /** etcd endpoints, `host:port` each. */
  readonly etcdHosts: readonly string[];
  /** `--etcd_namespace` of the directory (normalised the same way: `ns` → `/ns/`). */
  readonly etcdNamespace?: string;
  /** Host of the instance name and of the /health listener; default 127.0.0.1. */
  readonly host?: string;
  /** The engine's business HTTP port: the instance name is `host:httpPort`. */
  readonly httpPort: number;
  readonly type: EngineType;
  readonly dpSize?: number;
  readonly backendType?: string;
  /** The directory's heartbeat base URL (`http://127.0.0.1:8889`); null sends none. */
  readonly directoryUrl: string | null;
  readonly internalApiToken?: string;
  readonly heartbeatIntervalMs?: number;
  /** Lease TTL in seconds (etcd rounds very small TTLs up to its minimum, ~2 s). */
  readonly leaseTtlS?: number;
  /** MIX only; default PREFILL. */
  readonly currentRole?: EngineRole;
  /** First incarnation id; default a random UUID. */
  readonly incarnationId?: string;
  /** Served on the same port as /health (one HTTP server per simulated engine). */
  readonly httpRoutes?: EngineHttpRoutes;
  /**
   * cache-identity §1: the registration's `models` (first the base model, the rest its adapters),
   * read at every (re)registration; absent or null leaves the field out (an unknown list).
   */
  readonly servedModels?: () => readonly string[] | null;
  readonly logger?: Logger;
}

export class EngineControl {
  private readonly log: Logger;
  private readonly sockets = new Set<Socket>();
  private client: Etcd3 | null = null;
  private lease: Lease | null = null;
  private healthServer: Server | null = null;
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private incarnation: string;
  private role: EngineRole;
  private load: EngineLoad = { waiting_requests_num: 0, gpu_cache_usage_perc: 0 };
  private healthy = true;
  private heartbeatsSent = 0;
  private lastStatus: number | null = null;
  private closed = false;
  private leaseRetryTimer: NodeJS.Timeout | null = null;

  private constructor(private readonly opts: EngineControlOptions) {
    this.log = opts.logger ?? silentLogger;
    this.incarnation = opts.incarnationId ?? randomUUID();
    this.role = opts.currentRole ?? 'PREFILL';
  }

  /** Serves /health, registers in etcd and starts heartbeating. */
  static async start(opts: EngineControlOptions): Promise<EngineControl> {
    const ctl = new EngineControl(opts);
    try {
      await ctl.boot();
    } catch (e) {
      await ctl.close();
      throw e;
    }
    return ctl;
  }

  /** `host:port`, the etcd key suffix and the directory's instance name. */
  get name(): string {
    return `${this.opts.host ?? '127.0.0.1'}:${this.opts.httpPort}`;
  }

  get incarnationId(): string {
    return this.incarnation;
  }

  /** The etcd key this engine writes (with the namespace). */
  get key(): string {
    return `${namespacePrefix(this.opts.etcdNamespace ?? '')}XLLM:${this.opts.type}:${this.name}`;
  }

  /** Status of the last heartbeat answer (null before the first, 0 when unreachable). */
  get lastHeartbeatStatus(): number | null {
    return this.lastStatus;
  }

  get heartbeatCount(): number {
    return this.heartbeatsSent;
  }

  setLoad(load: EngineLoad): void {
    this.load = { ...load };
  }

  /** MIX role switch; the next heartbeat carries it. */
  setRole(role: EngineRole): void {
    this.role = role;
  }

  /** Makes `/health` answer 503 (or 200 again) without stopping anything else. */
  setHealthy(healthy: boolean): void {
    this.healthy = healthy;
  }

  /** Stops the periodic heartbeats (a hung engine): `heartbeatNow` still sends one on demand. */
  pauseHeartbeats(): void {
    this.stopHeartbeats();
  }

  /** Sends one heartbeat now and resolves with the HTTP status (0 when unreachable). */
  async heartbeatNow(): Promise<number> {
    if (this.opts.directoryUrl === null) return 0;
    this.heartbeatsSent++;
    const headers: Record<string, string> = { 'content-type': 'application/json' };
    if (this.opts.internalApiToken !== undefined && this.opts.internalApiToken !== '') headers['x-internal-token'] = this.opts.internalApiToken;
    const body = {
      name: this.name,
      incarnation_id: this.incarnation,
      ...(this.opts.type === 'MIX' ? { current_role: this.role } : {}),
      load_metrics: this.load,
      latency_metrics: { recent_max_ttft: 0, recent_max_tbt: 0 },
    };
    try {
      const res = await fetch(`${this.opts.directoryUrl}/v1/internal/heartbeat`, {
        method: 'POST',
        headers,
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(1000),
      });
      await res.arrayBuffer().catch(() => undefined);
      this.lastStatus = res.status;
    } catch {
      this.lastStatus = 0;
    }
    return this.lastStatus;
  }

  /** The lease is revoked (key deleted) while /health and heartbeats carry on. */
  async loseLease(): Promise<void> {
    await this.dropLease()?.revoke();
  }

  /** Writes the key again under the current incarnation (a new lease if the old one is gone). */
  async reregister(): Promise<void> {
    await this.register();
  }

  /**
   * A crash: heartbeats and /health stop at once; the lease's keep-alive stops without a revoke,
   * so etcd deletes the key when the TTL runs out.
   */
  async kill(): Promise<void> {
    this.stopHeartbeats();
    this.stopLeaseRetry();
    this.dropLease()?.release();
    this.client?.close();
    this.client = null;
    await this.stopHealth();
  }

  /** A new process on the same address: kill (if running), then boot with a new incarnation. */
  async restart(opts: { incarnationId?: string } = {}): Promise<void> {
    await this.kill();
    this.incarnation = opts.incarnationId ?? randomUUID();
    this.lastStatus = null;
    await this.boot();
  }

  /** A clean stop: revoke the lease (the key goes at once) and stop everything. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    this.stopHeartbeats();
    this.stopLeaseRetry();
    await this.dropLease()?.revoke().catch(() => undefined);
    this.client?.close();
    this.client = null;
    await this.stopHealth();
  }

  private async boot(): Promise<void> {
    await this.startHealth();
    this.client = new Etcd3({ hosts: this.opts.etcdHosts.map((h) => `http://${h}`), dialTimeout: 3000 });
    await this.register();
    this.startHeartbeats();
  }

  private async register(): Promise<void> {
    if (this.client === null) throw new Error('engine control is not running');
    if (this.lease === null) {
      const lease = this.client.lease(this.opts.leaseTtlS ?? 3);
      lease.on('lost', (err) => this.onLeaseLost(lease, err));
      this.lease = lease;
    }
    // rpc_address is required by the schema but unused by the directory; the simulator has no
    // brpc port, so it names the next port up as a placeholder.
    const value = {
      name: this.name,
      rpc_address: `${this.opts.host ?? '127.0.0.1'}:${this.opts.httpPort + 1}`,
      type: TYPE_NUMBER[this.opts.type],
      incarnation_id: this.incarnation,
      register_ts_ms: Date.now(),
      dp_size: this.opts.dpSize ?? 1,
      backend_type: this.opts.backendType ?? 'xllm',
      ...modelsField(this.opts.servedModels?.() ?? null),
    };
    const lease = this.lease;
    try {
      await lease.put(this.key).value(JSON.stringify(value));
    } catch (e) {
      // The next attempt starts from a fresh lease: this one may have died with etcd.
      if (this.lease === lease) this.dropLease()!.release();
      throw e;
    }
  }

  /** The current lease, no longer this engine's and deaf to its events (the caller releases or revokes it); null when none. */
  private dropLease(): Lease | null {
    const lease = this.lease;
    this.lease = null;
    lease?.removeAllListeners();
    return lease;
  }

  /** etcd ended the current lease (not loseLease's revoke, which drops it first): register again. */
  private onLeaseLost(lease: Lease, err: Error): void {
    if (lease !== this.lease) return;
    this.log.warn({ err: err.message, instance: this.name }, 'engine lease lost; registering again');
    this.dropLease();
    this.retryRegister();
  }

  private retryRegister(): void {
    if (this.closed || this.client === null || this.leaseRetryTimer !== null) return;
    this.register().catch((e: unknown) => {
      this.log.warn({ err: e instanceof Error ? e.message : String(e), instance: this.name }, 'engine registration failed; retrying');
      this.leaseRetryTimer = setTimeout(() => {
        this.leaseRetryTimer = null;
        this.retryRegister();
      }, LEASE_RETRY_MS);
    });
  }

  private stopLeaseRetry(): void {
    if (this.leaseRetryTimer !== null) clearTimeout(this.leaseRetryTimer);
    this.leaseRetryTimer = null;
  }

  private startHeartbeats(): void {
    if (this.opts.directoryUrl === null || this.heartbeatTimer !== null) return;
    void this.heartbeatNow();
    this.heartbeatTimer = setInterval(() => void this.heartbeatNow(), this.opts.heartbeatIntervalMs ?? 500);
  }

  private stopHeartbeats(): void {
    if (this.heartbeatTimer !== null) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
  }

  private async startHealth(): Promise<void> {
    const server = createServer((req, res) => {
      if (this.opts.httpRoutes?.handle(req, res) === true) return;
      if (req.url === '/health' && (req.method === 'GET' || req.method === 'HEAD')) {
        res.writeHead(this.healthy ? 200 : 503, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ status: this.healthy ? 'ok' : 'unhealthy' }));
        return;
      }
      res.writeHead(404).end();
    });
    server.on('connection', (s: Socket) => {
      this.sockets.add(s);
      s.once('close', () => this.sockets.delete(s));
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.opts.httpPort, this.opts.host ?? '127.0.0.1', () => {
        server.off('error', reject);
        resolve();
      });
    });
    this.healthServer = server;
  }

  private async stopHealth(): Promise<void> {
    const server = this.healthServer;
    this.healthServer = null;
    if (server === null) return;
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      for (const s of this.sockets) s.destroy();
    });
  }
}

/** The directory's namespace rule (discovery.md "etcd keys"), repeated so tools need no service code. */
function namespacePrefix(namespace: string): string {
  const trimmed = namespace.replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed === '' ? '' : `/${trimmed}/`;
}

/** The registration's optional `models` field: left out for an unknown list. */
function modelsField(models: readonly string[] | null): { models?: readonly string[] } {
  return models === null ? {} : { models };
}
