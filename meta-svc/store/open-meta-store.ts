/**
 * The store `--meta_store` names (kvcm-meta §9.1, §9.4): the embedded SQLite file, or a shared
 * Redis. The one place that turns a store location into a `MetaStore`.
 */
import type { MetaStoreLocation } from '../../shared/config/meta-store-url.js';
import type { MetaConfig } from '../config/meta-config.js';
import type { MetaStore } from './meta-store.js';
import { RedisMetaStore } from './redis-meta-store.js';
import { SqliteMetaStore } from './sqlite-meta-store.js';

export async function openMetaStore(location: MetaStoreLocation, config: MetaConfig): Promise<MetaStore> {
  if (location.kind === 'sqlite') return SqliteMetaStore.open(location.path, { synchronous: config.store.synchronous });
  return RedisMetaStore.open({ host: location.host, port: location.port, db: location.db, namespace: location.namespace });
}
