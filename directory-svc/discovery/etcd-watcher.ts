/**
 * The etcd edge of discovery (discovery.md "etcd keys"): list the `XLLM:` prefix under the
 * namespace once, then watch it from the next revision with previous values on delete. After a
 * watch error or a lost connection it drops the whole client and starts over with a fresh list
 * (etcd3's own reconnect would replay from a revision that may be compacted, and its circuit
 * breaker and watch backoff would delay recovery by up to 30 s).
 *
 * Parsing is the pure `instance-json` / `load-report` code; a bad key or value is reported via
 * `rejected` (the caller logs and counts it) and never stops the watch. etcd being unreachable
 * stops nothing: the caller keeps its last table and marks it stale on `connection`.
 */
import { Etcd3, type IKeyValue } from 'etcd3';
import type { HostPort } from '../../shared/config/flags.js';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import { DiscoveryError, isDiscoveryError } from './discovery-errors.js';
import {
  discoveryPrefix,
  normalizeNamespace,
  parseDiscoveryKey,
  parseInstanceValue,
  type InstanceRegistration,
  type InstanceType,
} from './instance-json.js';
import { instanceKeyId, type InstanceListing } from './instance-table.js';
import { parseLoadMetrics } from './load-report.js';
import type { InstanceLoad } from '../load/instance-load.js';

/** What the watcher reports, already parsed. Called synchronously from etcd callbacks. */
export interface DiscoveryEventSink {
  /** A full listing (start and every reconnect). `loads` holds the valid LOADMETRICS values. */
  listing(listing: InstanceListing, loads: ReadonlyMap<string, InstanceLoad>): void;
  put(registration: InstanceRegistration): void;
  /** `previous` is the deleted value when etcd sent one and it was valid. */
  delete(type: InstanceType, name: string, previous: InstanceRegistration | null): void;
  load(name: string, load: InstanceLoad): void;
  /** A key or value rejected on its own (`bad_key`, `invalid_instance`, `invalid_load`). */
  rejected(key: string, error: DiscoveryError): void;
  /** Connected after a listing, or disconnected (with why). */
  connection(connected: boolean, detail: string): void;
}

export interface EtcdWatcherOptions {
  /** `--etcd_addr` */
  readonly hosts: readonly HostPort[];
  /** `--etcd_namespace` (normalised here). */
  readonly namespace: string;
  readonly sink: DiscoveryEventSink;
  readonly logger?: Logger;
  /** First retry delay after a failure; doubles up to `maxRetryMs`. */
  readonly minRetryMs?: number;
  readonly maxRetryMs?: number;
  /** Bound on the listing request and on connecting (etcd3's own default dial timeout is 30 s). */
  readonly requestTimeoutMs?: number;
}

const DEFAULT_MIN_RETRY_MS = 200;
const DEFAULT_MAX_RETRY_MS = 5000;
const DEFAULT_REQUEST_TIMEOUT_MS = 3000;

export class EtcdWatcher {
  private readonly log: Logger;
  private readonly prefix: string;
  private readonly namespacePrefix: string;
  private closed = false;
  private isConnected = false;
  private endSession: ((reason: string) => void) | null = null;
  private client: Etcd3 | null = null;
  private wakeRetry: (() => void) | null = null;
  private loopDone: Promise<void> | null = null;
  private listingsTotal = 0;

  constructor(private readonly opts: EtcdWatcherOptions) {
    this.log = opts.logger ?? silentLogger;
    this.namespacePrefix = normalizeNamespace(opts.namespace);
    this.prefix = discoveryPrefix(opts.namespace);
  }

  get connected(): boolean {
    return this.isConnected;
  }

  /** Full listings done so far (1 after start, +1 per reconnect). */
  get listings(): number {
    return this.listingsTotal;
  }

  /** Starts the list-then-watch loop in the background. */
  start(): void {
    if (this.loopDone !== null) return;
    this.loopDone = this.loop();
  }

  async close(): Promise<void> {
    this.closed = true;
    this.endSession?.('closed');
    // Closing the client fails a listing still waiting on an unreachable etcd at once.
    this.client?.close();
    this.wakeRetry?.();
    await this.loopDone;
  }

  private async loop(): Promise<void> {
    const minRetry = this.opts.minRetryMs ?? DEFAULT_MIN_RETRY_MS;
    const maxRetry = this.opts.maxRetryMs ?? DEFAULT_MAX_RETRY_MS;
    let retryMs = minRetry;
    while (!this.closed) {
      const hosts = this.opts.hosts.map((h) => `http://${h.host}:${h.port}`);
      const client = new Etcd3({ hosts, dialTimeout: this.opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS });
      this.client = client;
      let reason: string;
      try {
        reason = await this.session(client);
        retryMs = minRetry; // a session that got as far as a listing resets the backoff
      } catch (e) {
        reason = errorText(e);
      } finally {
        this.endSession = null;
        this.client = null;
        client.close();
      }
      if (this.isConnected) {
        this.isConnected = false;
        if (!this.closed) this.opts.sink.connection(false, reason);
      }
      if (this.closed) break;
      this.log.warn({ reason, retry_ms: retryMs }, 'etcd watch lost; keeping the last instance table and listing again');
      await this.pause(retryMs);
      retryMs = Math.min(retryMs * 2, maxRetry);
    }
  }

  /** One client lifetime: list, then watch until the watch fails; resolves with why it ended. */
  private async session(client: Etcd3): Promise<string> {
    const timeoutMs = this.opts.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
    const res = await withTimeout(client.getAll().prefix(this.prefix).exec(), timeoutMs, 'etcd listing');
    if (this.closed) return 'closed';
    const revision = BigInt(res.header.revision);
    this.emitListing(res.kvs);
    this.isConnected = true;
    this.opts.sink.connection(true, `listed revision ${revision}`);

    // Built with `watcher()` so the handlers are attached before the first event can arrive.
    const watcher = client.watch().prefix(this.prefix).withPreviousKV().startRevision(String(revision + 1n)).watcher();
    return new Promise<string>((resolve) => {
      let ended = false;
      const end = (reason: string): void => {
        if (ended) return;
        ended = true;
        watcher.removeAllListeners();
        // A cancel on a broken stream only detaches locally; never wait on it.
        watcher.on('error', () => undefined);
        watcher.cancel().catch(() => undefined);
        resolve(reason);
      };
      this.endSession = end;
      watcher.on('put', (kv) => this.onPut(kv));
      watcher.on('delete', (kv, previous) => this.onDelete(kv, previous ?? null));
      watcher.on('disconnected', (err) => end(`watch disconnected: ${errorText(err)}`));
      watcher.on('error', (err) => end(`watch error: ${errorText(err)}`));
      watcher.on('end', () => end('watch ended'));
      if (this.closed) end('closed');
    });
  }

  private emitListing(kvs: readonly IKeyValue[]): void {
    this.listingsTotal++;
    const registrations: InstanceRegistration[] = [];
    const presentKeys = new Set<string>();
    const loads = new Map<string, InstanceLoad>();
    for (const kv of kvs) {
      const key = this.relativeKey(kv.key);
      if (key === null) continue;
      try {
        const parsed = parseDiscoveryKey(key);
        if (parsed.kind === 'instance') {
          presentKeys.add(instanceKeyId(parsed.type, parsed.name));
          registrations.push(parseInstanceValue(parsed.type, parsed.name, kv.value.toString('utf8')));
        } else {
          loads.set(parsed.name, parseLoadMetrics(parseJson(kv.value)));
        }
      } catch (e) {
        this.reject(key, e);
      }
    }
    this.opts.sink.listing({ registrations, presentKeys }, loads);
  }

  private onPut(kv: IKeyValue): void {
    const key = this.relativeKey(kv.key);
    if (key === null) return;
    try {
      const parsed = parseDiscoveryKey(key);
      if (parsed.kind === 'instance') this.opts.sink.put(parseInstanceValue(parsed.type, parsed.name, kv.value.toString('utf8')));
      else this.opts.sink.load(parsed.name, parseLoadMetrics(parseJson(kv.value)));
    } catch (e) {
      this.reject(key, e);
    }
  }

  private onDelete(kv: IKeyValue, previous: IKeyValue | null): void {
    const key = this.relativeKey(kv.key);
    if (key === null) return;
    try {
      const parsed = parseDiscoveryKey(key);
      if (parsed.kind !== 'instance') return; // a LOADMETRICS delete changes nothing: load is optional
      let prev: InstanceRegistration | null = null;
      if (previous !== null && previous.value.length > 0) {
        try {
          prev = parseInstanceValue(parsed.type, parsed.name, previous.value.toString('utf8'));
        } catch {
          // An invalid previous value tells nothing about its incarnation: apply the delete.
          prev = null;
        }
      }
      this.opts.sink.delete(parsed.type, parsed.name, prev);
    } catch (e) {
      this.reject(key, e);
    }
  }

  private reject(key: string, e: unknown): void {
    if (isDiscoveryError(e)) {
      this.opts.sink.rejected(key, e);
      return;
    }
    throw e;
  }

  /** The key without the namespace; null for keys outside it (never expected from a prefix watch). */
  private relativeKey(raw: Buffer): string | null {
    const key = raw.toString('utf8');
    return key.startsWith(this.namespacePrefix) ? key.slice(this.namespacePrefix.length) : null;
  }

  private pause(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.wakeRetry = null;
        resolve();
      }, ms);
      this.wakeRetry = () => {
        clearTimeout(t);
        this.wakeRetry = null;
        resolve();
      };
    });
  }
}

function parseJson(value: Buffer): unknown {
  try {
    return JSON.parse(value.toString('utf8'));
  } catch {
    throw new DiscoveryError('invalid_load', 'LOADMETRICS value is not JSON');
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what} timed out after ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(t);
        reject(e instanceof Error ? e : new Error(String(e)));
      },
    );
  });
}

function errorText(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
