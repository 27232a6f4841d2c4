/**
 * Reporter state shared through Redis (kvcm-meta §9.4), the `ReporterSync` of a replica on the
 * Redis store. Keys, beside the store's (same `kvcm:{ns}:` prefix):
 *
 *   <ns>rep              hash  reporter key → ReporterRecord JSON
 *   <ns>rep:changes      zset  reporter key, scored by the version of its last save
 *   <ns>rep:ver          int   version counter, incremented by every save (one Lua script with the two above)
 *   <ns>rep:lock:<key>   str   the reporter's state lock, held for one transition (SET NX PX 3 s)
 *   <ns>rep:snap:<key>   str   the §7.7 gate's snapshot marker across replicas (SET NX PX, renewed)
 *   <ns>rep:leases:<key> zset  delta leases across replicas, scored by expiry (Redis TIME), renewed
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
import type { ClusterGateHold, ReporterSync } from '../report/reporter-sync.js';
import { StoreError } from '../store/meta-store.js';

const SAVE_SCRIPT = `
local v = redis.call('INCR', KEYS[3])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[2], v, ARGV[1])
return v`;
const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;
/** Redis's own clock for lease expiry: replicas' clocks need not agree. */
const NOW = `local t = redis.call('TIME') local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;
/**
 * A delta's cluster lease: refused (0) while a snapshot marker exists; granted with the
 * reporter's record (or false when it has none), so the run checks its epoch on fresh state
 * without another round trip.
 */
const DELTA_SCRIPT = `
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
${NOW}
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
return {1, redis.call('HGET', KEYS[3], ARGV[3])}`;
const RENEW_DELTA_SCRIPT = `${NOW} return redis.call('ZADD', KEYS[1], 'XX', now + tonumber(ARGV[2]), ARGV[1])`;
/** Live delta leases (expired ones, of dead replicas, dropped first). */
const LEASES_SCRIPT = `${NOW} redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now) return redis.call('ZCARD', KEYS[1])`;

/**
 * A dead holder's gate marker or delta lease expires after this; a live holder renews it every
 * second. Big snapshots no longer hold the event loop (issue 28: the report worker parses and
 * stages them), so a live replica renews on time and 8 renewals may be missed before another
 * replica's delta could overtake its snapshot (§7.7); a dead replica holds the reporter's gate
 * for at most 8 s (its deltas answer SNAPSHOT_IN_PROGRESS meanwhile, and land its committed
 * stage first once they get the gate).
 */
export const REPORTER_LOCK_TTL_MS = 8000;
const RENEW_EVERY_MS = 1000;
/**
 * A state transition holds its lock for a few round trips. Its TTL is short, so a dead holder's
 * lock is outwaited by the next transition (wait > TTL); expiring under a live but stalled holder
 * at worst lets two replicas save the same record, unlike an expired gate marker.
 */
const STATE_LOCK_TTL_MS = 3000;
const TRANSITION_WAIT_MS = 5000;
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
  /**
   * Read with the reporter version in the same round trip of every catch-up: the registrations'
   * version key and what to tell when it is read (the instance registry's cache, §9.4).
   */
  readonly alsoWatch?: { readonly key: string; readonly observe: (value: string | null) => void };
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
  private draining = false;
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

  async transition<T>(id: ReporterIdentity, fn: () => T): Promise<T> {
    const key = reporterKey(id.instanceId, id.storageType, id.hostIpPort);
    const lockKey = `${this.opts.prefix}rep:lock:${key}`;
    const token = this.token();
    const redis = this.opts.redis;
    if (!(await this.poll(TRANSITION_WAIT_MS, async () => (await redis.set(lockKey, token, 'PX', STATE_LOCK_TTL_MS, 'NX')) === 'OK'))) {
      throw new StoreError(`reporter ${id.hostIpPort}: state lock not acquired within ${TRANSITION_WAIT_MS} ms`);
    }
    this.held.set(key, (this.held.get(key) ?? 0) + 1);
    try {
      const text = await redis.hget(this.recordsKey, key);
      if (text !== null) this.opts.registry.applyRecord(id, JSON.parse(text) as ReporterRecord);
      const out = fn();
      const r = this.opts.registry.get(id.instanceId, id.storageType, id.hostIpPort);
      if (r) await this.save(r);
      return out;
    } finally {
      const n = (this.held.get(key) ?? 1) - 1;
      if (n <= 0) this.held.delete(key);
      else this.held.set(key, n);
      await redis.eval(RELEASE_SCRIPT, 1, lockKey, token).catch(() => undefined);
    }
  }

  async refresh(id: ReporterIdentity): Promise<void> {
    const key = reporterKey(id.instanceId, id.storageType, id.hostIpPort);
    const text = await this.opts.redis.hget(this.recordsKey, key);
    // A record this replica holds the lock of is newer here than in Redis.
    if (text !== null && !this.held.has(key)) this.opts.registry.applyRecord(id, JSON.parse(text) as ReporterRecord);
  }

  drain(): void {
    this.draining = true;
  }

  async acquireDelta(id: ReporterIdentity, waitMs: number): Promise<ClusterGateHold | 'in_progress' | 'snapshot_required'> {
    const { marker, leases } = this.gateKeys(id);
    const token = this.token();
    const redis = this.opts.redis;
    const ttl = String(REPORTER_LOCK_TTL_MS);
    const key = reporterKey(id.instanceId, id.storageType, id.hostIpPort);
    let record: string | null = null;
    const granted = await this.poll(waitMs, async () => {
      const r = (await redis.eval(DELTA_SCRIPT, 3, marker, leases, this.recordsKey, token, ttl, key)) as number | [number, string | null];
      if (!Array.isArray(r)) return false;
      record = r[1];
      return true;
    });
    if (!granted) return this.draining ? 'snapshot_required' : 'in_progress';
    if (record !== null && !this.held.has(key)) this.opts.registry.applyRecord(id, JSON.parse(record) as ReporterRecord);
    const renew = this.renewing(() => redis.eval(RENEW_DELTA_SCRIPT, 1, leases, token, ttl));
    return {
      refreshed: true,
      release: async () => {
        clearInterval(renew);
        await redis.zrem(leases, token).catch(() => undefined);
      },
    };
  }

  async acquireSnapshot(id: ReporterIdentity, waitMs: number): Promise<ClusterGateHold | 'in_progress' | 'snapshot_required'> {
    const { marker, leases } = this.gateKeys(id);
    const token = this.token();
    const redis = this.opts.redis;
    const ttl = String(REPORTER_LOCK_TTL_MS);
    // §7.7: another snapshot holding the gate refuses this one at once, never queued.
    if ((await redis.set(marker, token, 'PX', REPORTER_LOCK_TTL_MS, 'NX')) !== 'OK') return 'in_progress';
    const renew = this.renewing(() => redis.eval(RENEW_SCRIPT, 1, marker, token, ttl));
    const release = async (): Promise<void> => {
      clearInterval(renew);
      await redis.eval(RELEASE_SCRIPT, 1, marker, token).catch(() => undefined);
    };
    // Deltas leased on other replicas drain first (a snapshot never overtakes a leased delta).
    const drained = await this.poll(waitMs, async () => Number(await redis.eval(LEASES_SCRIPT, 1, leases)) === 0).catch(async (err: unknown) => {
      await release();
      throw err;
    });
    if (!drained) {
      await release();
      return this.draining ? 'snapshot_required' : 'in_progress';
    }
    return { release };
  }

  private gateKeys(id: ReporterIdentity): { marker: string; leases: string } {
    const key = reporterKey(id.instanceId, id.storageType, id.hostIpPort);
    return { marker: `${this.opts.prefix}rep:snap:${key}`, leases: `${this.opts.prefix}rep:leases:${key}` };
  }

  private token(): string {
    return `${this.opts.holder}:${randomBytes(6).toString('hex')}`;
  }

  private renewing(renew: () => Promise<unknown>): ReturnType<typeof setInterval> {
    const t = setInterval(() => void renew().catch(() => undefined), RENEW_EVERY_MS);
    t.unref();
    return t;
  }

  /** Retries `attempt` (1 ms, doubling to 20 ms) until it succeeds (true) or `waitMs` passed (false). */
  private async poll(waitMs: number, attempt: () => Promise<boolean>): Promise<boolean> {
    const deadline = Date.now() + waitMs;
    let pollMs = 1;
    for (;;) {
      if (await attempt()) return true;
      if (Date.now() >= deadline || this.draining) return false;
      await new Promise((resolve) => setTimeout(resolve, Math.min(pollMs, Math.max(1, deadline - Date.now()))));
      pollMs = Math.min(pollMs * 2, MAX_POLL_MS);
    }
  }

  private async save(r: Reporter): Promise<void> {
    const record = JSON.stringify(this.opts.registry.toRecord(r));
    const v = Number(await this.opts.redis.eval(SAVE_SCRIPT, 3, this.recordsKey, this.changesKey, this.versionKey, r.key, record));
    // Our own save needs no re-read; never skip someone else's (a gap means they saved in between).
    if (v === this.seen + 1) this.seen = v;
  }

  private async readChanges(): Promise<void> {
    const watch = this.opts.alsoWatch;
    let version: number;
    if (watch === undefined) version = Number((await this.opts.redis.get(this.versionKey)) ?? 0);
    else {
      const [rep, other] = await this.opts.redis.mget(this.versionKey, watch.key);
      watch.observe(other ?? null);
      version = Number(rep ?? 0);
    }
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
