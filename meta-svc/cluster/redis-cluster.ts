/**
 * What a replica on the Redis store shares with the others beyond the store itself (kvcm-meta
 * §9.4): the background-work lease, the reporter state and the write sessions. Built by startMetaService when its
 * store is a RedisMetaStore; `null` everywhere else (one process, nothing to share).
 */
import { randomBytes } from 'node:crypto';
import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../../shared/log/logger.js';
import type { ReporterRegistry } from '../report/reporter-registry.js';
import type { ReporterSync } from '../report/reporter-sync.js';
import type { RedisMetaStore } from '../store/redis-meta-store.js';
import { BackgroundLease } from './redis-lease.js';
import { RedisReporterSync } from './redis-reporter-sync.js';
import { RedisSessionBook } from './redis-session-book.js';
import type { SessionBook } from '../write/session-book.js';
import type { SnapshotStages } from '../report/offloaded-writes.js';

/** A dead holder's background work moves to another replica within 2 × this (R4). */
export const BACKGROUND_LEASE_TTL_MS = 3000;

export interface MetaCluster {
  readonly holder: string;
  readonly lease: BackgroundLease;
  readonly sessionBook: SessionBook;
  /** Big snapshots staged in Redis and landed by the roll-forward (report/offloaded-writes.ts). */
  readonly stages: SnapshotStages;
  reporterSync(registry: ReporterRegistry): ReporterSync;
  close(): Promise<void>;
}

/** Told the registrations' shared version at every catch-up (InstanceRegistry.observeSharedVersion). */
export interface SharedRegistrations {
  observeSharedVersion(version: string | null): void;
}

export function createRedisCluster(
  store: RedisMetaStore,
  nodeId: string,
  log: Logger,
  registry: Registry,
  registrations: SharedRegistrations,
  leaseTtlMs = BACKGROUND_LEASE_TTL_MS,
): MetaCluster {
  // Unique per process even when two replicas were given the same node_id.
  const holder = `${nodeId}/${randomBytes(4).toString('hex')}`;
  const lease = new BackgroundLease({
    redis: store.redis,
    key: `${store.keyPrefix}lease:background`,
    holder,
    ttlMs: leaseTtlMs,
    onChange: (held) => log.info({ holder, held }, held ? 'background lease taken' : 'background lease lost'),
  });
  lease.start();
  // Which replica does the background work, and whether this one reaches Redis (operators, R4/R5).
  new Gauge({
    name: 'kvcm_background_lease_held',
    help: '1 while this replica holds the background-work lease (kvcm-meta §9.4)',
    registers: [registry],
    collect() {
      this.set(lease.held ? 1 : 0);
    },
  });
  new Gauge({
    name: 'kvcm_store_available',
    help: '1 while the shared store (Redis) is reachable (kvcm-meta §9.4)',
    registers: [registry],
    collect() {
      this.set(store.available ? 1 : 0);
    },
  });
  return {
    holder,
    lease,
    sessionBook: new RedisSessionBook(store.redis, store.keyPrefix),
    stages: store,
    reporterSync: (registry) =>
      new RedisReporterSync({
        redis: store.redis,
        prefix: store.keyPrefix,
        registry,
        holder,
        backgroundHolder: () => lease.held,
        logger: log.child({ component: 'meta-reporter-sync' }),
        alsoWatch: { key: store.instancesVersionKey, observe: (v) => registrations.observeSharedVersion(v) },
      }),
    close: () => lease.stop(),
  };
}
