/**
 * The whole MetaService as meta-svc runs it — startMetaService over a real SQLite file (or Redis) in a
 * temp dir and a real HTTP port — for the kvcm-meta transport, instance and config suites.
 * `configText` null = the §8 built-in default; the port always comes from freePort().
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import type { Logger } from '../../shared/log/logger.js';
import { silentLogger } from '../../shared/log/logger.js';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import type { MetaConfig } from '../../meta-svc/config/meta-config.js';
import { startMetaService } from '../../meta-svc/meta-service.js';
import type { MetaServiceHandle } from '../../meta-svc/meta-service.js';
import { SqliteMetaStore } from '../../meta-svc/store/sqlite-meta-store.js';
import { RedisMetaStore } from '../../meta-svc/store/redis-meta-store.js';
import type { RedisServer } from './redis-server.js';
import { freePort } from './ports.js';

export interface MetaHarnessOptions {
  readonly configText?: string | null;
  /** Reuse a data dir (restart scenarios); a fresh temp dir otherwise. */
  readonly dir?: string;
  readonly logger?: Logger;
  /** Run on the Redis store (§9.4) of this server instead of SQLite; the key namespace is the data dir's name, so a restart with the same `dir` sees the same data. */
  readonly redis?: RedisServer;
}

// `any` on purpose: test assertions walk arbitrary response JSON.
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyJson = Record<string, any>;

export interface MetaReply {
  readonly status: number;
  readonly contentType: string | null;
  readonly text: string;
  /** Parsed body (JSON.parse is fine for assertions: int64 outputs are strings). */
  readonly body: AnyJson;
}

export class MetaHarness {
  private constructor(
    readonly dir: string,
    private readonly ownsDir: boolean,
    readonly config: MetaConfig,
    readonly service: MetaServiceHandle,
    readonly url: string,
  ) {}

  static async start(opts: MetaHarnessOptions = {}): Promise<MetaHarness> {
    const ownsDir = opts.dir === undefined;
    const dir = opts.dir ?? mkdtempSync(join(tmpdir(), 'kvcm-meta-'));
    const port = await freePort();
    const parsed = parseMetaConfig({
      fileText: opts.configText ?? null,
      httpPortOverride: port,
      dbPathOverride: join(dir, 'kvcm.db'),
      hostname: 'test-host',
      firstIpv4: '127.0.0.1',
    });
    if (!parsed.ok) throw new Error(`test config invalid:\n${parsed.errors.join('\n')}`);
    const config = { ...parsed.config, http: { ...parsed.config.http, host: '127.0.0.1' } };
    const store = opts.redis
      ? await RedisMetaStore.open({ host: '127.0.0.1', port: opts.redis.port, db: 0, namespace: basename(dir) })
      : SqliteMetaStore.open(config.store.path);
    const service = await startMetaService({ config, store, logger: opts.logger ?? silentLogger });
    return new MetaHarness(dir, ownsDir, config, service, `http://127.0.0.1:${service.port}`);
  }

  async close(): Promise<void> {
    await this.service.close();
  }

  removeDir(): void {
    if (this.ownsDir) rmSync(this.dir, { recursive: true, force: true });
  }

  /** POST a body (a string is sent as is) to /api/<rpc>. */
  async rpc(rpc: string, body: unknown): Promise<MetaReply> {
    return this.request('POST', `/api/${rpc}`, typeof body === 'string' ? body : JSON.stringify(body));
  }

  async request(method: string, path: string, body?: string | Buffer): Promise<MetaReply> {
    const res = await fetch(`${this.url}${path}`, { method, body });
    const text = await res.text();
    let parsed: AnyJson = {};
    try {
      parsed = JSON.parse(text) as AnyJson;
    } catch {
      // /metrics is text; leave body empty.
    }
    return { status: res.status, contentType: res.headers.get('content-type'), text, body: parsed };
  }
}

/** A pino logger at `level` whose lines land in `lines` (parsed), for "WARN logged" assertions. */
export function capturingLogger(level: 'info' | 'debug' = 'info'): { logger: Logger; lines: AnyJson[] } {
  const lines: AnyJson[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const l of chunk.toString('utf8').split('\n')) if (l.trim() !== '') lines.push(JSON.parse(l) as AnyJson);
      done();
    },
  });
  return { logger: pino({ level }, sink), lines };
}

/** A valid registerInstance body for `test_group`, with overrides. */
export function registration(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    instance_group: 'test_group',
    instance_id: 'inst_a',
    block_size: 16,
    default_query_type: 'QT_BATCH_GET',
    location_spec_infos: [
      { name: 'tp0', size: 1024 },
      { name: 'tp1', size: 2048 },
    ],
    location_spec_groups: [{ name: 'g0', spec_names: ['tp0'] }],
    model_deployment: { model_name: 'm', dtype: 'bf16', tp_size: 2, dp_size: 1, pp_size: 1, lora_name: '', extra: 'e', user_data: 'u1' },
    ...overrides,
  };
}
