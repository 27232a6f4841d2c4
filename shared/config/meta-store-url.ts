/**
 * meta-svc's `--meta_store` value (architecture.md "Processes and flags", kvcm-meta §9.4):
 * `sqlite:<path>` (the embedded default, `sqlite:./data/kvcm.db`) or `redis://host:port[/db]`,
 * optionally `?namespace=<name>` (our extension): the `kvcm:{<name>}:` key prefix every replica of
 * one cluster shares, so two clusters can share one Redis database (default `default`).
 * Pure: text in, a store location or null (the caller words the error) out.
 */

export type MetaStoreLocation =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'redis'; readonly host: string; readonly port: number; readonly db: number; readonly namespace: string; readonly url: string };

export const DEFAULT_META_STORE = 'sqlite:./data/kvcm.db';

/** Redis has 16 databases unless configured otherwise; larger numbers are refused by the server anyway. */
const MAX_REDIS_DB = 15;

/** What `--meta_store` accepts, for the error line. */
export const META_STORE_FORMS = 'sqlite:<path> or redis://host:port[/db][?namespace=name]';

/** The namespace of a Redis URL without `?namespace=`. */
export const DEFAULT_REDIS_NAMESPACE = 'default';

export function parseMetaStore(text: string): MetaStoreLocation | null {
  if (text.startsWith('sqlite:')) {
    const path = text.slice('sqlite:'.length);
    return path === '' ? null : { kind: 'sqlite', path };
  }
  if (!text.startsWith('redis://')) return null;
  // A namespace stands inside the key prefix's braces (one Redis Cluster hash slot): no braces,
  // colons or spaces, so it can never reach into another cluster's keys.
  const m = /^redis:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})(?:\/(\d{1,2}))?\/?(?:\?namespace=([A-Za-z0-9._-]{1,64}))?$/.exec(text);
  if (m === null) return null;
  const port = Number(m[2]);
  const db = m[3] === undefined ? 0 : Number(m[3]);
  if (port < 1 || port > 65535 || db > MAX_REDIS_DB) return null;
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : m[1]!;
  return { kind: 'redis', host, port, db, namespace: m[4] ?? DEFAULT_REDIS_NAMESPACE, url: text };
}
