/**
 * A real MetaService for the kvcm-meta data-path suites (§5.2–§5.5, §6): startMetaService over a
 * real SQLite file in a temp dir and a real HTTP port (every part registered by the service
 * itself), with a manual clock so write sessions expire and create times move without sleeping.
 *
 *   test ──POST /api/*──▶ MetaHttpServer ──▶ data path / reportEvent ──▶ SqliteMetaStore (file)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import type { MetaConfig } from '../../meta-svc/config/meta-config.js';
import { startMetaService } from '../../meta-svc/meta-service.js';
import type { MetaServiceHandle } from '../../meta-svc/meta-service.js';
import type { MetaStore } from '../../meta-svc/store/meta-store.js';
import { SqliteMetaStore } from '../../meta-svc/store/sqlite-meta-store.js';
import { RedisMetaStore } from '../../meta-svc/store/redis-meta-store.js';
import type { RedisServer } from './redis-server.js';
import { silentLogger } from '../../shared/log/logger.js';
import { freePort } from './ports.js';

/** Manual clock (the service's injected `nowMs`); `advance` moves it. */
export class ManualTimers {
  constructor(public ms = 1_710_000_000_000) {}
  nowMs = (): number => this.ms;
  advance(ms: number): void {
    this.ms += ms;
  }
}

export interface MetaHarnessOptions {
  /** Data directory to reuse (restart scenarios); a fresh temp dir otherwise. */
  readonly dir?: string;
  /** With `dir`: this harness removes the directory in removeDir (the restarted one owns it). */
  readonly ownDir?: boolean;
  /** Config file text; null/undefined = the §8 built-in default. */
  readonly configJson?: string | null;
  readonly timers?: ManualTimers;
  /** Wraps the store (fault injection). */
  readonly wrapStore?: (s: MetaStore) => MetaStore;
  /** Run on the Redis store (§9.4) of this server instead of SQLite; the key namespace is the data dir's name, so a restart with the same `dir` sees the same data. */
  readonly redis?: RedisServer;
}

// `any` on purpose: responses are loosely typed JSON that tests read field by field.
export type Json = any;

export class MetaHarness {
  private constructor(
    readonly dir: string,
    private readonly ownsDir: boolean,
    readonly timers: ManualTimers,
    readonly handle: MetaServiceHandle,
    readonly url: string,
  ) {}

  static async start(opts: MetaHarnessOptions = {}): Promise<MetaHarness> {
    const ownsDir = opts.dir === undefined || opts.ownDir === true;
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'kvcm-data-'));
    const timers = opts.timers ?? new ManualTimers();
    const port = await freePort();
    const parsed = parseMetaConfig({
      fileText: opts.configJson ?? null,
      httpPortOverride: port,
      dbPathOverride: join(dir, 'kvcm.db'),
      hostname: 'test-host',
      firstIpv4: '127.0.0.1',
    });
    if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
    const config: MetaConfig = { ...parsed.config, http: { ...parsed.config.http, host: '127.0.0.1' } };
    const inner: MetaStore = opts.redis
      ? await RedisMetaStore.open({ host: '127.0.0.1', port: opts.redis.port, db: 0, namespace: basename(dir) })
      : SqliteMetaStore.open(config.store.path);
    const store = opts.wrapStore ? opts.wrapStore(inner) : inner;
    const handle = await startMetaService({ config, store, logger: silentLogger, nowMs: timers.nowMs });
    return new MetaHarness(dir, ownsDir, timers, handle, `http://127.0.0.1:${handle.port}`);
  }

  get metrics(): MetaServiceHandle['deps']['metrics'] {
    return this.handle.deps.metrics;
  }

  get store(): MetaStore {
    return this.handle.deps.store;
  }

  async close(): Promise<void> {
    await this.handle.close();
  }

  removeDir(): void {
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** POST /api/<rpc> with a JSON body (a string is sent as is); returns status and parsed body. */
  async call(rpc: string, body: unknown): Promise<Json> {
    const res = await fetch(`${this.url}/api/${rpc}`, { method: 'POST', body: typeof body === 'string' ? body : JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${rpc}`);
    return (await res.json()) as Json;
  }
}

export const code = (r: Json): string => r.header.status.code as string;
