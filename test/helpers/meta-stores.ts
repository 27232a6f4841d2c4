/**
 * Runs the MetaService suites on both stores (kvcm-meta §9.4: the same suites pass on SQLite
 * and Redis). `storeSuite(kind)` registers, in the calling describe block, one real
 * redis-server for the block when the kind is Redis; `fresh(dir)` then gives each test an empty
 * store: a new SQLite file under `dir`, or the flushed Redis.
 */
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { RedisServer } from './redis-server.js';

export type StoreKind = 'sqlite' | 'redis';
export const STORE_KINDS: readonly StoreKind[] = ['sqlite', 'redis'];

export interface StoreSuite {
  readonly kind: StoreKind;
  /** The redis-server of the block (Redis only; throws for SQLite). */
  readonly redis: RedisServer;
  /** An empty store for one test: the `--meta_store`-style value (SQLite file path or redis:// URL). */
  fresh(dir: string): Promise<string>;
  /** The same store again (restart scenarios). */
  same(dir: string): string;
}

export function storeSuite(kind: StoreKind): StoreSuite {
  let server: RedisServer | null = null;
  if (kind === 'redis') {
    before(async () => {
      server = await RedisServer.start();
    });
    after(async () => {
      await server?.destroy();
    });
  }
  const suite: StoreSuite = {
    kind,
    get redis(): RedisServer {
      if (server === null) throw new Error('no redis-server in a SQLite suite');
      return server;
    },
    async fresh(dir) {
      if (kind === 'sqlite') return join(dir, 'kvcm.db');
      await flushAll(suite.redis.port);
      return suite.redis.url();
    },
    same(dir) {
      return kind === 'sqlite' ? join(dir, 'kvcm.db') : suite.redis.url();
    },
  };
  return suite;
}

export async function flushAll(port: number): Promise<void> {
  const client = new Redis({ host: '127.0.0.1', port, lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await client.connect();
    await client.flushall();
  } finally {
    client.disconnect();
  }
}
