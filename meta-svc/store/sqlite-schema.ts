/**
 * SQLite schema of the MetaStore and its migrations (kvcm-meta §9.1: schema version in
 * `user_version`, migrated at startup, an unknown newer version refuses to start).
 * Private to store/: only sqlite-meta-store.ts imports it.
 *
 * Layout:
 * - `instances`: one row per registration, the record as JSON (never scanned on a hot path).
 * - `locations`: one row per (instance, block key, location id). The primary key serves
 *   getBlocks and the stable scan order (per-instance trim and cleanup scans); one secondary
 *   index serves the status scans of startup recovery and quota accounting.
 * - `block_properties`: one row per block that has properties; the row is deleted instead of
 *   holding `{}`, so "a block with no locations and no properties" simply has no rows (§9.2).
 */
import type BetterSqlite3 from 'better-sqlite3';
import { StoreError } from './meta-store.js';

export const SCHEMA_VERSION = 2;

const MIGRATIONS: ReadonlyArray<{ readonly to: number; readonly sql: string }> = [
  {
    to: 1,
    sql: `
      CREATE TABLE instances (
        instance_id    TEXT PRIMARY KEY NOT NULL,
        instance_group TEXT NOT NULL,
        record         TEXT NOT NULL
      ) WITHOUT ROWID;
      CREATE INDEX instances_by_group ON instances(instance_group);

      CREATE TABLE locations (
        instance_id    TEXT    NOT NULL,
        block_key      INTEGER NOT NULL,
        location_id    TEXT    NOT NULL,
        storage_name   TEXT    NOT NULL,
        type           INTEGER NOT NULL,
        status         INTEGER NOT NULL,
        create_time_us INTEGER NOT NULL,
        rev            INTEGER NOT NULL,
        specs          TEXT    NOT NULL,
        PRIMARY KEY (instance_id, block_key, location_id)
      ) WITHOUT ROWID;
      CREATE INDEX locations_by_status ON locations(status, instance_id, block_key, location_id);
      CREATE INDEX locations_by_id ON locations(location_id, instance_id, block_key);
      CREATE INDEX locations_by_create_time ON locations(instance_id, create_time_us);

      CREATE TABLE block_properties (
        instance_id TEXT    NOT NULL,
        block_key   INTEGER NOT NULL,
        properties  TEXT    NOT NULL,
        PRIMARY KEY (instance_id, block_key)
      ) WITHOUT ROWID;
    `,
  },
  {
    // Every secondary index costs each reportEvent ADD a B-tree insert. The id and create-time
    // indexes served no query (prefix scans are per instance in primary-key order, trims are
    // rare background scans), so only the status index stays (startup cleanup, quota).
    to: 2,
    sql: `
      DROP INDEX IF EXISTS locations_by_id;
      DROP INDEX IF EXISTS locations_by_create_time;
    `,
  },
];

/** Brings the database to SCHEMA_VERSION in one transaction, or refuses a newer schema. */
export function migrate(db: BetterSqlite3.Database, path: string): void {
  const current = Number(db.pragma('user_version', { simple: true }));
  if (current > SCHEMA_VERSION) {
    throw new StoreError(
      `database ${path} has schema version ${current}, newer than supported version ${SCHEMA_VERSION}; refusing to open`,
    );
  }
  if (current === SCHEMA_VERSION) return;
  const step = db.transaction(() => {
    for (const m of MIGRATIONS) {
      if (m.to <= current) continue;
      db.exec(m.sql);
      db.pragma(`user_version = ${m.to}`);
    }
  });
  step.immediate();
}
