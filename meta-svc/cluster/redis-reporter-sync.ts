/**
 * Reporter state shared through Redis (kvcm-meta §9.4), the `ReporterSync` of a replica on the
 * Redis store. Keys, beside the store's (same `kvcm:{ns}:` prefix):
 *
 *   <ns>rep              hash  reporter key → ReporterRecord JSON
 *   <ns>rep:changes      zset  reporter key, scored by the version of its last save
 *   <ns>rep:ver          int   version counter, incremented by every save (one Lua script with the two above)
 *   <ns>rep:lock:<key>   str   the reporter's lock `<kind>:<holder>`, SET NX PX, renewed while held
 *
 * `catchUp` (before every RPC) reads the counter and, when it moved, only the records saved since
 * the version this replica last saw: one GET per RPC when nothing changed. A counter below that
 * version means Redis lost its data (restart without persistence): everything is read again and
 * this replica's own records are written back as they are saved.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import type { Logger } from '../../shared/log/logger.js';
import { parseReporterKey, reporterKey, type Reporter, type ReporterIdentity, type ReporterRecord, type ReporterRegistry } from '../report/reporter-registry.js';
import type { ReporterLockKind, ReporterLockRefusal, ReporterSync } from '../report/reporter-sync.js';

const SAVE_SCRIPT = `
local v = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], v, ARGV[1])
return v`;
const TRY_LOCK_SCRIPT = `
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return '' end
return redis.call('GET', KEYS[1]) or '-'`;
const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

/** A dead holder's reporter lock expires after this; a live holder renews it every third of it. */
export const REPORTER_LOCK_TTL_MS = 3000;
const MAX_POLL_MS = 20;

export interface RedisReporterSyncOptions {
  readonly redis: Redis;
  /** The store's `kvcm:{ns}:` prefix. */
  readonly prefix: string;
  readonly registry: ReporterRegistry;
  /** This replica, for lock values (diagnostics). */
  readonly holder: string;
  readonly backgroundHolder: () => boolean;
  readonly logger: Logger;
}

export class RedisReporterSync implements ReporterSync {
  private readonly recordsKey: string;
  private readonly changesKey: string;
  private readonly versionKey: string;
  /** Highest version applied from Redis. */
  private seen = 0;
  private catching: Promise<void> | null = null;
  /** Reporter keys whose lock this replica holds: their local state is newer than Redis's. */
  private readonly held = new Map<string, number>();
  readonly backgroundHolder: () => boolean;

  constructor(private readonly opts: RedisReporterSyncOptions) {
    this.recordsKey = `${opts.prefix}rep`;
    this.changesKey = `${opts.prefix}rep:changes`;
    this.versionKey = `${opts.prefix}rep:ver`;
    this.backgroundHolder = opts.backgroundHolder;
  }

  catchUp(): Promise<void> {
    // Concurrent RPCs share one catch-up; a second one right after may still find news.
    this.catching ??= this.readChanges().finally(() => (this.catching = null));
    return this.catching;
  }

  async withReporter<T>(id: ReporterIdentity, kind: ReporterLockKind, waitMs: number, fn: () => Promise<T>): Promise<T | ReporterLockRefusal> {
    const key = reporterKey(id.instanceId, id.storageType, id.hostIpPort);
    const lockKey = `${this.opts.prefix}rep:lock:${key}`;
    const token = `${kind}:${this.opts.holder}:${randomBytes(6).toString('hex')}`;
    const refusal = await this.acquire(lockKey, token, kind, waitMs);
    if (refusal !== null) return refusal;
    this.held.set(key, (this.held.get(key) ?? 0) + 1);
    const renew = setInterval(() => {
      void this.opts.redis.eval(RENEW_SCRIPT, 1, lockKey, token, String(REPORTER_LOCK_TTL_MS)).catch(() => undefined);
    }, Math.floor(REPORTER_LOCK_TTL_MS / 3));
    renew.unref();
    try {
      const text = await this.opts.redis.hget(this.recordsKey, key);
      if (text !== null) this.opts.registry.applyRecord(id, JSON.parse(text) as ReporterRecord);
      return await fn();
    } finally {
      clearInterval(renew);
      try {
        const r = this.opts.registry.get(id.instanceId, id.storageType, id.hostIpPort);
        if (r) await this.save(r);
      } finally {
        const n = (this.held.get(key) ?? 1) - 1;
        if (n <= 0) this.held.delete(key);
        else this.held.set(key, n);
        await this.opts.redis.eval(RELEASE_SCRIPT, 1, lockKey, token).catch(() => undefined);
      }
    }
  }

  async saveNow(reporter: Reporter): Promise<void> {
    await this.save(reporter);
  }

  private async save(r: Reporter): Promise<void> {
    const record = JSON.stringify(this.opts.registry.toRecord(r));
    const v = Number(await this.opts.redis.eval(SAVE_SCRIPT, 3, this.recordsKey, this.changesKey, this.versionKey, r.key, record));
    // Our own save needs no re-read; never skip someone else's (a gap means they saved in between).
    if (v === this.seen + 1) this.seen = v;
  }

  private async acquire(lockKey: string, token: string, kind: ReporterLockKind, waitMs: number): Promise<ReporterLockRefusal | null> {
    const deadline = Date.now() + waitMs;
    let pollMs = 1;
    for (;;) {
      const holder = String(await this.opts.redis.eval(TRY_LOCK_SCRIPT, 1, lockKey, token, String(REPORTER_LOCK_TTL_MS)));
      if (holder === '') return null;
      // §7.7: a snapshot meeting a snapshot is refused at once, never queued.
      if (kind === 'snapshot' && holder.startsWith('snapshot:')) return 'snapshot_busy';
      if (Date.now() >= deadline) return 'timeout';
      await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(1, deadline - Date.now()))));
      pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
    }
  }

  private async readChanges(): Promise<void> {
    const version = Number((await this.opts.redis.get(this.versionKey)) ?? 0);
    if (version === this.seen) return;
    if (version < this.seen) {
      // Redis lost its data (R5): read everything there is again.
      this.opts.logger.warn({ version, seen: this.seen }, 'shared reporter state was reset; reloading');
      this.seen = 0;
    }
    const keys = await this.opts.redis.zrangebyscore(this.changesKey, `(${this.seen}`, version);
    const texts = keys.length === 0 ? [] : await this.opts.redis.hmget(this.recordsKey, ...keys);
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i]!;
      const text = texts[i];
      if (text === null || text === undefined || this.held.has(key)) continue;
      const id = parseReporterKey(key);
      if (id !== null) this.opts.registry.applyRecord(id, JSON.parse(text) as ReporterRecord);
    }
    this.seen = Math.max(this.seen, version);
  }
}
