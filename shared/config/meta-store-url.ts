/**
 * meta-svc's `--meta_store` value (architecture.md "Processes and flags", kvcm-meta §9.4):
 * `sqlite:<path>` (the embedded default, `sqlite:./data/kvcm.db`) or `redis://host:port[/db]`.
 * Pure: text in, a store location or null (the caller words the error) out.
 */

export type MetaStoreLocation =
  | { readonly kind: 'sqlite'; readonly path: string }
  | { readonly kind: 'redis'; readonly host: string; readonly port: number; readonly db: number; readonly url: string };

export const DEFAULT_META_STORE = 'sqlite:./data/kvcm.db';

/** Redis has 16 databases unless configured otherwise; larger numbers are refused by the server anyway. */
const MAX_REDIS_DB = 15;

/** What `--meta_store` accepts, for the error line. */
export const META_STORE_FORMS = 'sqlite:<path> or redis://host:port[/db]';

export function parseMetaStore(text: string): MetaStoreLocation | null {
  if (text.startsWith('sqlite:')) {
    const path = text.slice('sqlite:'.length);
    return path === '' ? null : { kind: 'sqlite', path };
  }
  if (!text.startsWith('redis://')) return null;
  const m = /^redis:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):(\d{1,5})(?:\/(\d{1,2}))?\/?$/.exec(text);
  if (m === null) return null;
  const port = Number(m[2]);
  const db = m[3] === undefined ? 0 : Number(m[3]);
  if (port < 1 || port > 65535 || db > MAX_REDIS_DB) return null;
  const host = m[1]!.startsWith('[') ? m[1]!.slice(1, -1) : m[1]!;
  return { kind: 'redis', host, port, db, url: text };
}
