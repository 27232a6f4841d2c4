/**
 * The embedded MetaStore (kvcm-meta §9.1): one SQLite file through better-sqlite3, WAL,
 * `synchronous` NORMAL (default) or FULL, busy_timeout 5000, 64-bit integers as bigint.
 *
 * better-sqlite3 is synchronous, so every method does its work before the returned promise
 * settles: an `apply` has committed (one transaction) when it resolves, which is what lets an
 * RPC answer OK only after its mutations are durable (§9.1). All statements are prepared once
 * and reused; `apply` over thousands of mutations is one transaction with no per-op parsing
 * beyond the specs JSON (the reportEvent hot path, ≥100k ADD/s).
 *
 * Every better-sqlite3 error is converted here into StoreError (style: library errors are
 * converted once, at the edge that called the library).
 */
import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import Database from 'better-sqlite3';
import type BetterSqlite3 from 'better-sqlite3';
import { BlockCache } from './block-cache.js';
import { migrate } from './sqlite-schema.js';
import { mergeSpecList } from './spec-merge.js';
import {
  CLS_SERVING,
  CLS_WRITING,
  StoreConflictError,
  StoreError,
  isWritableStorageType,
  type GetBlocksOptions,
  type InstanceRecord,
  type LocationPage,
  type LocationScanFilter,
  type MetaStore,
  type MutationResult,
  type ScannedLocation,
  type StoreMutation,
  type StoredBlock,
  type StoredLocation,
  type StoredLocationStatus,
  type StoredSpec,
  type WorkerStoreLocation,
} from './meta-store.js';

export interface SqliteMetaStoreOptions {
  /** PRAGMA synchronous: NORMAL (default, §8 `store.synchronous`) or FULL. */
  readonly synchronous?: 'NORMAL' | 'FULL';
  /** Decoded blocks (and known-absent keys) kept in memory for getBlocks; 0 disables. */
  readonly blockCacheEntries?: number;
}

export const DEFAULT_BLOCK_CACHE_ENTRIES = 131072;

/** Raw row of `locations` in column order of LOCATION_COLUMNS (statements run in raw mode). */
type LocationRow = [
  locationId: string,
  storageName: string,
  type: bigint,
  status: bigint,
  createTimeUs: bigint,
  rev: bigint,
  specs: string,
];

type ScanRow = [instanceId: string, blockKey: bigint, ...rest: LocationRow];

/**
 * Row of the batched getBlocks read, read without safe integers (bigint allocation per column
 * was the dominant cost): `index` is the position in the bound JSON key array, small numbers stay
 * numbers, and create_time arrives as a number when exact, else as decimal text.
 */
type BatchLocationRow = [
  index: number,
  locationId: string,
  storageName: string,
  type: number,
  status: number,
  createTimeUs: number | string,
  rev: number,
  specs: string,
];

const LOCATION_COLUMNS = 'location_id, storage_name, type, status, create_time_us, rev, specs';
/**
 * Rows per multi-row insert of new locations (reportEvent ADD, snapshots): one statement step
 * instead of 64 saves ~15% of the store's CPU on a 2000-row batch. 8 parameters a row.
 */
const INSERT_ROWS = 64;
/** Thrown inside the nested insert transaction to roll a partly conflicting chunk back. */
const CHUNK_CONFLICT = Symbol('chunk conflict');

/** The result of every new row (shared: results are readonly values). */
const INSERTED: MutationResult = Object.freeze({ applied: true, rev: 1 });
const MAX_SAFE = Number.MAX_SAFE_INTEGER;

/** Write statements return the row's new rev as a number (revs never approach 2^53). */
type RevStatement = BetterSqlite3.Statement<unknown[], { rev: number }>;

interface Statements {
  getInstance: BetterSqlite3.Statement<[string], { record: string }>;
  putInstance: BetterSqlite3.Statement<[string, string, string]>;
  listInstances: BetterSqlite3.Statement<[], { record: string }>;
  countInstances: BetterSqlite3.Statement<[string], { n: bigint }>;
  blockProperties: BetterSqlite3.Statement<[string, bigint], { properties: string }>;
  batchLocations: BetterSqlite3.Statement<[string, string], BatchLocationRow>;
  batchProperties: BetterSqlite3.Statement<[string, string], [number, string]>;
  insertLocation: BetterSqlite3.Statement<unknown[]>;
  /** insertLocation for INSERT_ROWS rows at once. */
  insertLocations: BetterSqlite3.Statement<unknown[]>;
  replaceLocation: RevStatement;
  /** replaceLocation keeping create_time_us (a snapshot's in-place replace). */
  replaceLocationKeepingCreateTime: RevStatement;
  locationSpecs: BetterSqlite3.Statement<[string, bigint, string], { specs: string; rev: number }>;
  blockLocationHeads: BetterSqlite3.Statement<[string, bigint], [string, string, number, number]>;
  hasLocation: BetterSqlite3.Statement<[string, bigint], [number]>;
  setStatus: RevStatement;
  replaceSpecs: RevStatement;
  deleteLocation: RevStatement;
  deleteBlockLocations: BetterSqlite3.Statement<[string, bigint]>;
  deleteBlockProperties: BetterSqlite3.Statement<[string, bigint]>;
  putProperties: BetterSqlite3.Statement<[string, bigint, string]>;
}

export class SqliteMetaStore implements MetaStore {
  private closed = false;
  /**
   * This store is the database's only writer (one process, §9.1), so invalidating every key an
   * `apply` touches (before it runs, so a rolled-back batch only costs a miss) keeps the cache
   * exact. Returned blocks are shared: callers treat them as the readonly values their types say.
   */
  private readonly blockCache: BlockCache;
  private readonly stmts: Statements;
  private readonly applyTx: BetterSqlite3.Transaction<(mutations: readonly StoreMutation[]) => MutationResult[]>;
  private readonly insertChunkTx: BetterSqlite3.Transaction<(params: unknown[]) => void>;

  /**
   * Set while another handle of this database (the report worker's) writes: this handle's
   * writes wait for it instead of blocking the event loop in SQLite's busy handler.
   */
  private writeBarrier: Promise<void> | null = null;
  /** This connection's TEMP stage of snapshot rows (created on first use, worker handle only). */
  private stage: StageStatements | null = null;

  private constructor(
    private readonly db: BetterSqlite3.Database,
    readonly path: string,
    private readonly synchronous: 'NORMAL' | 'FULL',
    blockCacheEntries: number,
  ) {
    this.blockCache = new BlockCache(blockCacheEntries);
    this.stmts = prepareStatements(db);
    this.applyTx = db.transaction((mutations: readonly StoreMutation[]) => this.applyAll(mutations));
    // Nested in applyTx, so better-sqlite3 runs it under a savepoint: a throw undoes the chunk only.
    this.insertChunkTx = db.transaction((params: unknown[]) => {
      if (this.stmts.insertLocations.run(params).changes !== INSERT_ROWS) throw CHUNK_CONFLICT;
    });
  }

  /**
   * Opens (creating the parent directory and the schema when needed) the database at `path`.
   * Throws StoreError when the file cannot be opened or carries a newer schema version.
   */
  static open(path: string, opts: SqliteMetaStoreOptions = {}): SqliteMetaStore {
    const synchronous = opts.synchronous ?? 'NORMAL';
    if (synchronous !== 'NORMAL' && synchronous !== 'FULL') {
      throw new StoreError(`synchronous must be NORMAL or FULL, got ${String(synchronous)}`);
    }
    let db: BetterSqlite3.Database | undefined;
    try {
      if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
      db = new Database(path);
      db.pragma('journal_mode = WAL');
      db.pragma(`synchronous = ${synchronous}`);
      db.pragma('busy_timeout = 5000');
      // 64 MiB page cache (default 2 MiB): the lookup and reportEvent working set stays in memory.
      db.pragma('cache_size = -65536');
      db.defaultSafeIntegers(true);
      migrate(db, path);
      return new SqliteMetaStore(db, path, synchronous, opts.blockCacheEntries ?? DEFAULT_BLOCK_CACHE_ENTRIES);
    } catch (err) {
      db?.close();
      if (err instanceof StoreError) throw err;
      throw new StoreError(`cannot open ${path}: ${errorText(err)}`, err);
    }
  }

  async getInstance(instanceId: string): Promise<InstanceRecord | null> {
    return this.run('getInstance', () => {
      const row = this.stmts.getInstance.get(instanceId);
      return row === undefined ? null : decodeInstance(row.record);
    });
  }

  async putInstance(rec: InstanceRecord): Promise<void> {
    if (this.writeBarrier !== null) await this.otherWriterDone();
    this.run('putInstance', () => {
      this.stmts.putInstance.run(rec.instanceId, rec.instanceGroup, encodeInstance(rec));
    });
  }

  async listInstances(): Promise<InstanceRecord[]> {
    return this.run('listInstances', () => this.stmts.listInstances.all().map((r) => decodeInstance(r.record)));
  }

  async countInstances(instanceGroup: string): Promise<number> {
    return this.run('countInstances', () => Number(this.stmts.countInstances.get(instanceGroup)?.n ?? 0n));
  }

  /**
   * Cost: two statements for the whole request (locations, properties), each one primary-key
   * probe per distinct key driven by json_each over the bound key array. The hot read of every
   * lookup and of reportEvent; no transaction needed (WAL readers see the last commit).
   */
  async getBlocks(instanceId: string, blockKeys: readonly bigint[], opts?: GetBlocksOptions): Promise<Map<bigint, StoredBlock>> {
    return this.run('getBlocks', () => {
      const out = new Map<bigint, StoredBlock>();
      if (blockKeys.length === 0) return out;
      // A read for a write keeps nothing: apply would delete every entry again at once, and
      // 2000 inserts and deletes per reportEvent on a 100k-entry Map churn its hash table
      // (rehashes) for no hit. Cached blocks still serve it.
      const useCache = this.blockCache.enabled && opts?.forWrite !== true;
      const cache = this.blockCache.entriesOf(instanceId);
      let misses: bigint[] | null = null;
      // Hot path (every looked-up key): one cache probe per key. A repeated key is
      // deduplicated with the misses below.
      for (let i = 0; i < blockKeys.length; i++) {
        const key = blockKeys[i] as bigint;
        const cached = cache === undefined ? undefined : cache.get(key);
        if (cached === undefined) {
          (misses ??= []).push(key);
        } else if (cached !== null) out.set(key, cached);
      }
      if (misses === null) return out;
      const unique = misses.length === 1 ? misses : [...new Set(misses)];
      const read = this.readBlocks(instanceId, unique);
      for (let i = 0; i < unique.length; i++) {
        const b = read[i];
        if (b !== undefined) out.set(unique[i] as bigint, b);
      }
      if (useCache) this.blockCache.remember(instanceId, unique, read);
      return out;
    });
  }

  /**
   * Cost: two statements for all `keys` (distinct), one primary-key probe per key each, driven
   * by json_each over the bound key array. Index i of the result is keys[i]'s block.
   */
  private readBlocks(instanceId: string, keys: readonly bigint[]): (StoredBlock | undefined)[] {
    const keysJson = `[${keys.join(',')}]`;
    const blocks: ({ properties: Record<string, string>; locations: StoredLocation[] } | undefined)[] = new Array(keys.length);
    for (const r of this.stmts.batchLocations.all(keysJson, instanceId)) {
      const i = r[0];
      let b = blocks[i];
      if (b === undefined) {
        b = { properties: {}, locations: [] };
        blocks[i] = b;
      }
      b.locations.push(decodeBatchLocation(r));
    }
    for (const r of this.stmts.batchProperties.all(keysJson, instanceId)) {
      const i = r[0];
      let b = blocks[i];
      if (b === undefined) {
        b = { properties: {}, locations: [] };
        blocks[i] = b;
      }
      b.properties = JSON.parse(r[1]) as Record<string, string>;
    }
    for (const b of blocks) {
      // Rows of one key come in primary-key order already; sort only to be safe for >1.
      if (b !== undefined && b.locations.length > 1) {
        b.locations.sort((x, y) => (x.locationId < y.locationId ? -1 : x.locationId > y.locationId ? 1 : 0));
      }
    }
    return blocks;
  }

  async apply(mutations: readonly StoreMutation[]): Promise<MutationResult[]> {
    if (this.writeBarrier !== null) await this.otherWriterDone();
    return this.run('apply', () => {
      for (let i = 0; i < mutations.length; i++) {
        const m = mutations[i] as StoreMutation;
        this.blockCache.forget(m.instanceId, m.blockKey);
      }
      return this.applyTx.immediate(mutations);
    });
  }

  async scanLocations(
    instanceId: string | null,
    filter: LocationScanFilter,
    cursor: string | null,
    limit: number,
  ): Promise<LocationPage> {
    return this.run('scanLocations', () => {
      if (!Number.isInteger(limit) || limit <= 0) throw new StoreError(`scan limit must be a positive integer, got ${limit}`);
      const where: string[] = [];
      const params: unknown[] = [];
      if (instanceId !== null) {
        where.push('instance_id = ?');
        params.push(instanceId);
      }
      if (filter.locationId !== undefined) {
        where.push('location_id = ?');
        params.push(filter.locationId);
      }
      if (filter.locationIdPrefix !== undefined) {
        // substr, not LIKE: ids contain `_` and `#`, which LIKE would treat specially.
        where.push('substr(location_id, 1, ?) = ?');
        params.push(filter.locationIdPrefix.length, filter.locationIdPrefix);
      }
      if (filter.status !== undefined) {
        where.push('status = ?');
        params.push(filter.status);
      }
      if (filter.createdBeforeUs !== undefined) {
        where.push('create_time_us < ?');
        params.push(filter.createdBeforeUs);
      }
      if (filter.createdFromUs !== undefined) {
        where.push('create_time_us >= ?');
        params.push(filter.createdFromUs);
      }
      if (cursor !== null) {
        const [ci, ck, cl] = decodeCursor(cursor);
        if (instanceId !== null && ci === instanceId) {
          // Keyset within the instance: with `instance_id = ?` SQLite seeks the primary key only
          // for `(block_key, location_id) > (?, ?)`; the three-column form made every page
          // re-read the instance from its first row (a quadratic cleanup, issue 16).
          where.push('(block_key, location_id) > (?, ?)');
          params.push(ck, cl);
        } else {
          where.push('(instance_id, block_key, location_id) > (?, ?, ?)');
          params.push(ci, ck, cl);
        }
      }
      const sql =
        `SELECT instance_id, block_key, ${LOCATION_COLUMNS} FROM locations` +
        (where.length > 0 ? ` WHERE ${where.join(' AND ')}` : '') +
        ' ORDER BY instance_id, block_key, location_id LIMIT ?';
      params.push(limit + 1);
      // Scans serve background jobs (trim, cleanup, startup recovery), not hot paths; the
      // statement cache of better-sqlite3 is not needed for them.
      const rows = this.db.prepare(sql).raw(true).all(...params) as ScanRow[];
      const more = rows.length > limit;
      const page = more ? rows.slice(0, limit) : rows;
      const items: ScannedLocation[] = page.map((r) => ({
        instanceId: r[0],
        blockKey: r[1],
        location: decodeLocation(r.slice(2) as LocationRow),
      }));
      const last = items[items.length - 1];
      return {
        items,
        cursor: more && last !== undefined ? encodeCursor(last.instanceId, last.blockKey, last.location.locationId) : null,
      };
    });
  }

  async close(): Promise<void> {
    if (this.writeBarrier !== null) await this.otherWriterDone();
    if (this.closed) return;
    this.blockCache.clear();
    try {
      this.db.pragma('wal_checkpoint(TRUNCATE)');
    } finally {
      this.closed = true;
      this.db.close();
    }
  }

  workerLocation(): WorkerStoreLocation | null {
    return this.path === ':memory:' ? null : { kind: 'sqlite', path: this.path, synchronous: this.synchronous };
  }

  async externalWrite<T>(instanceId: string, write: () => Promise<T>, touched: (result: T) => ArrayLike<bigint> | null): Promise<T> {
    if (this.closed) throw new StoreError('externalWrite: store is closed');
    // One other writer at a time, and none while this handle writes (its writes are synchronous,
    // so "not inside apply" holds at every await).
    while (this.writeBarrier !== null) await this.writeBarrier;
    let release!: () => void;
    this.writeBarrier = new Promise<void>((resolve) => (release = resolve));
    try {
      const result = await write();
      // Dropped after the commit: a read meanwhile saw (and may have cached) the old rows.
      const keys = touched(result);
      if (keys === null) this.blockCache.forgetInstance(instanceId);
      else for (let i = 0; i < keys.length; i++) this.blockCache.forget(instanceId, keys[i] as bigint);
      return result;
    } catch (err) {
      // A failed write may have committed before its answer was lost: assume it did.
      this.blockCache.forgetInstance(instanceId);
      throw err;
    } finally {
      this.writeBarrier = null;
      release();
    }
  }

  private async otherWriterDone(): Promise<void> {
    while (this.writeBarrier !== null) await this.writeBarrier;
  }

  /**
   * Stages snapshot rows (in-place puts keeping create_time, §7.5) in this connection's TEMP
   * table: invisible to every reader and holding no lock on the database. The report worker's
   * handle only; `commitStage` lands them.
   */
  stageRows(stageId: string, puts: readonly StoreMutation[]): void {
    this.run('stageRows', () => {
      const st = this.stageStatements();
      st.insertMany(stageId, puts);
    });
  }

  /**
   * Lands every row staged under `stageId` in one transaction (§7.5: the SQLite store applies a
   * snapshot's replace in one transaction) and forgets the stage. Returns the landed block keys
   * when few (for the main handle's read cache), else null.
   */
  commitStage(stageId: string, maxKeys: number): { readonly rows: number; readonly touched: BigInt64Array | null } {
    return this.run('commitStage', () => {
      const st = this.stageStatements();
      return st.commit(stageId, maxKeys);
    });
  }

  /** Forgets a stage without landing it. */
  dropStage(stageId: string): void {
    this.run('dropStage', () => {
      if (this.stage !== null) this.stage.drop.run(stageId);
    });
  }

  private stageStatements(): StageStatements {
    if (this.stage === null) this.stage = prepareStage(this.db);
    return this.stage;
  }

  private run<T>(op: string, fn: () => T): T {
    if (this.closed) throw new StoreError(`${op}: store is closed`);
    try {
      return fn();
    } catch (err) {
      if (err instanceof StoreError) throw err;
      throw new StoreError(`${op} failed: ${errorText(err)}`, err);
    }
  }

  /**
   * Inserts the insertable mutations[from, from + INSERT_ROWS) (see `isInsertRun`) as new rows
   * when none exists yet (true); otherwise changes nothing (false).
   */
  private insertNewChunk(mutations: readonly StoreMutation[], from: number): boolean {
    const params: unknown[] = new Array<unknown>(INSERT_ROWS * 8);
    for (let j = 0, p = 0; j < INSERT_ROWS; j++) {
      const m = mutations[from + j] as InsertableMutation;
      const l = m.location;
      params[p++] = m.instanceId;
      params[p++] = m.blockKey;
      params[p++] = l.locationId;
      params[p++] = l.storageName;
      params[p++] = l.type;
      params[p++] = l.status;
      params[p++] = l.createTimeUs;
      params[p++] = encodeSpecs(m.op === 'putLocation' ? m.location.specs : m.put);
    }
    try {
      this.insertChunkTx(params);
      return true;
    } catch (err) {
      if (err === CHUNK_CONFLICT) return false;
      throw err;
    }
  }

  /** putLocation of one row: insert, else replace (create_time kept when asked). */
  private putOne(m: Extract<StoreMutation, { op: 'putLocation' }>): MutationResult {
    const s = this.stmts;
    const l = m.location;
    const specs = encodeSpecs(l.specs);
    const ins = s.insertLocation.run(m.instanceId, m.blockKey, l.locationId, l.storageName, l.type, l.status, l.createTimeUs, specs);
    if (ins.changes === 1) return INSERTED;
    const row = m.keepCreateTime
      ? s.replaceLocationKeepingCreateTime.get(l.storageName, l.type, l.status, specs, m.instanceId, m.blockKey, l.locationId)
      : s.replaceLocation.get(l.storageName, l.type, l.status, l.createTimeUs, specs, m.instanceId, m.blockKey, l.locationId);
    return { applied: true, rev: row?.rev ?? 1 };
  }

  /** mergeSpecs of one row (its read and write inside the batch's transaction). */
  private mergeOne(m: Extract<StoreMutation, { op: 'mergeSpecs' }>): MutationResult {
    const s = this.stmts;
    const l = m.location;
    const row = s.locationSpecs.get(m.instanceId, m.blockKey, l.locationId);
    if (row === undefined) {
      if (m.put.length === 0) return { applied: true, missing: m.remove.length };
      s.insertLocation.run(m.instanceId, m.blockKey, l.locationId, l.storageName, l.type, l.status, l.createTimeUs, encodeSpecs(m.put));
      return m.remove.length === 0 ? INSERTED : { applied: true, rev: 1, missing: m.remove.length };
    }
    const merged = mergeSpecList(decodeSpecs(row.specs), m.put, m.remove);
    const missing = merged.missing > 0 ? { missing: merged.missing } : {};
    if (!merged.changed) return { applied: true, rev: row.rev, ...missing };
    if (merged.specs.length === 0) {
      s.deleteLocation.get(m.instanceId, m.blockKey, l.locationId, null, null);
      return { applied: true, ...missing };
    }
    const updated = s.replaceSpecs.get(encodeSpecs(merged.specs), m.instanceId, m.blockKey, l.locationId, null, null);
    return { applied: true, rev: updated?.rev ?? row.rev + 1, ...missing };
  }

  /** addHits of one block: only while it has a location (never resurrects a removed block). */
  private addHitsOne(m: Extract<StoreMutation, { op: 'addHits' }>): MutationResult {
    const s = this.stmts;
    if (s.hasLocation.get(m.instanceId, m.blockKey) === undefined) return { applied: false };
    const prev = s.blockProperties.get(m.instanceId, m.blockKey);
    const props: Record<string, string> = prev === undefined ? {} : (JSON.parse(prev.properties) as Record<string, string>);
    props['BP#hit_count'] = String(hitCountOf(props['BP#hit_count']) + m.count);
    props['BP#lru_time'] = laterTime(props['BP#lru_time'], m.lastHitUs);
    s.putProperties.run(m.instanceId, m.blockKey, JSON.stringify(props));
    return { applied: true };
  }

  /** The createLocationIf condition over the block's current rows. */
  private mayCreate(m: Extract<StoreMutation, { op: 'createLocationIf' }>): boolean {
    let writable = 0;
    for (const [id, storage, type, status] of this.stmts.blockLocationHeads.all(m.instanceId, m.blockKey)) {
      if (id === m.location.locationId) return false;
      if (!isWritableStorageType(type) || (status !== CLS_WRITING && status !== CLS_SERVING)) continue;
      if (storage === m.location.storageName) return false;
      writable++;
    }
    return writable < m.maxWritable;
  }

  /** Runs inside the transaction; any throw rolls the whole batch back. */
  private applyAll(mutations: readonly StoreMutation[]): MutationResult[] {
    const s = this.stmts;
    const results: MutationResult[] = new Array<MutationResult>(mutations.length);
    /** Rows before this index are not tried as a chunk again (their chunk had an existing row). */
    let singleUntil = 0;
    for (let i = 0; i < mutations.length; i++) {
      const m = mutations[i];
      switch (m.op) {
        case 'putLocation':
        case 'mergeSpecs': {
          // Hot path: a run of new locations goes in INSERT_ROWS at a time; a chunk where any
          // row already exists is rolled back and takes the row-by-row path below.
          if (i >= singleUntil && i + INSERT_ROWS <= mutations.length && isInsertRun(mutations, i, INSERT_ROWS)) {
            if (this.insertNewChunk(mutations, i)) {
              for (let j = 0; j < INSERT_ROWS; j++) results[i + j] = INSERTED;
              i += INSERT_ROWS - 1;
              break;
            }
            // Some row exists: this chunk's rows go one by one, not retried as shifted chunks.
            singleUntil = i + INSERT_ROWS;
          }
          results[i] = m.op === 'putLocation' ? this.putOne(m) : this.mergeOne(m);
          break;
        }
        case 'addHits':
          results[i] = this.addHitsOne(m);
          break;
        case 'createLocationIf': {
          if (!this.mayCreate(m)) throw new StoreConflictError(i);
          const l = m.location;
          s.insertLocation.run(m.instanceId, m.blockKey, l.locationId, l.storageName, l.type, l.status, l.createTimeUs, encodeSpecs(l.specs));
          results[i] = INSERTED;
          break;
        }
        case 'setStatusIf': {
          const expect = m.expectRev === undefined ? null : m.expectRev;
          const row = s.setStatus.get(m.status, m.instanceId, m.blockKey, m.locationId, expect, expect);
          results[i] = row === undefined ? { applied: false } : { applied: true, rev: row.rev };
          break;
        }
        case 'replaceSpecsIf': {
          const expect = m.expectRev === undefined ? null : m.expectRev;
          const row = s.replaceSpecs.get(encodeSpecs(m.specs), m.instanceId, m.blockKey, m.locationId, expect, expect);
          results[i] = row === undefined ? { applied: false } : { applied: true, rev: row.rev };
          break;
        }
        case 'deleteLocationIf': {
          const expect = m.expectRev === undefined ? null : m.expectRev;
          const row = s.deleteLocation.get(m.instanceId, m.blockKey, m.locationId, expect, expect);
          results[i] = { applied: row !== undefined };
          break;
        }
        case 'deleteBlock':
          s.deleteBlockLocations.run(m.instanceId, m.blockKey);
          s.deleteBlockProperties.run(m.instanceId, m.blockKey);
          results[i] = { applied: true };
          break;
        case 'mergeProperties': {
          const prev = s.blockProperties.get(m.instanceId, m.blockKey);
          const merged: Record<string, string> =
            prev === undefined ? {} : (JSON.parse(prev.properties) as Record<string, string>);
          for (const [k, v] of Object.entries(m.properties)) merged[k] = v;
          if (Object.keys(merged).length === 0) s.deleteBlockProperties.run(m.instanceId, m.blockKey);
          else s.putProperties.run(m.instanceId, m.blockKey, JSON.stringify(merged));
          results[i] = { applied: true };
          break;
        }
        default: {
          const never: never = m;
          throw new StoreError(`unknown mutation ${JSON.stringify((never as { op?: unknown }).op)}`);
        }
      }
    }
    return results;
  }
}

/** A mutation that inserts `location` (with `put` as its specs for a merge) when its row is new. */
type InsertableMutation = Extract<StoreMutation, { op: 'putLocation' }> | Extract<StoreMutation, { op: 'mergeSpecs' }>;

/**
 * True when mutations[from, from + n) all insert their row when it is new: puts, and merges
 * that only add specs (a merge into a missing row creates it with exactly `put`).
 */
function isInsertRun(mutations: readonly StoreMutation[], from: number, n: number): boolean {
  for (let j = from; j < from + n; j++) {
    const m = mutations[j] as StoreMutation;
    if (m.op === 'putLocation') continue;
    if (m.op !== 'mergeSpecs' || m.remove.length > 0 || m.put.length === 0) return false;
  }
  return true;
}

function prepareStatements(db: BetterSqlite3.Database): Statements {
  const pk = 'instance_id = ? AND block_key = ? AND location_id = ?';
  // `(? IS NULL OR rev = ?)`: one statement serves both the conditional and unconditional op.
  const revCheck = '(? IS NULL OR rev = ?)';
  return {
    getInstance: db.prepare('SELECT record FROM instances WHERE instance_id = ?'),
    putInstance: db.prepare(
      'INSERT INTO instances(instance_id, instance_group, record) VALUES (?, ?, ?) ' +
        'ON CONFLICT(instance_id) DO UPDATE SET instance_group = excluded.instance_group, record = excluded.record',
    ),
    listInstances: db.prepare('SELECT record FROM instances ORDER BY instance_id'),
    countInstances: db.prepare('SELECT count(*) AS n FROM instances WHERE instance_group = ?'),
    blockProperties: db.prepare('SELECT properties FROM block_properties WHERE instance_id = ? AND block_key = ?'),
    // CROSS JOIN pins json_each as the outer loop (the planner otherwise scans the instance).
    batchLocations: db
      .prepare<[string, string], BatchLocationRow>(
        'SELECT j.key, l.location_id, l.storage_name, l.type, l.status, ' +
          `CASE WHEN l.create_time_us BETWEEN ${-MAX_SAFE} AND ${MAX_SAFE} THEN l.create_time_us ELSE CAST(l.create_time_us AS TEXT) END, ` +
          'l.rev, l.specs FROM json_each(?) j CROSS JOIN locations l ON l.instance_id = ? AND l.block_key = j.value',
      )
      .raw(true)
      .safeIntegers(false),
    batchProperties: db
      .prepare<[string, string], [number, string]>(
        'SELECT j.key, p.properties FROM json_each(?) j CROSS JOIN block_properties p ON p.instance_id = ? AND p.block_key = j.value',
      )
      .raw(true)
      .safeIntegers(false),
    // putLocation is an insert (new row, rev 1, no RETURNING: the reportEvent ADD hot path) with
    // an update fallback for an existing id (rev + 1).
    insertLocation: db.prepare(
      `INSERT INTO locations(instance_id, block_key, ${LOCATION_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?) ` +
        'ON CONFLICT(instance_id, block_key, location_id) DO NOTHING',
    ),
    insertLocations: db.prepare(
      `INSERT INTO locations(instance_id, block_key, ${LOCATION_COLUMNS}) VALUES ` +
        new Array<string>(INSERT_ROWS).fill('(?, ?, ?, ?, ?, ?, ?, 1, ?)').join(', ') +
        ' ON CONFLICT(instance_id, block_key, location_id) DO NOTHING',
    ),
    replaceLocation: db.prepare(
      'UPDATE locations SET storage_name = ?, type = ?, status = ?, create_time_us = ?, specs = ?, rev = rev + 1 ' +
        `WHERE ${pk} RETURNING rev`,
    ).safeIntegers(false) as RevStatement,
    replaceLocationKeepingCreateTime: db.prepare(
      `UPDATE locations SET storage_name = ?, type = ?, status = ?, specs = ?, rev = rev + 1 WHERE ${pk} RETURNING rev`,
    ).safeIntegers(false) as RevStatement,
    locationSpecs: db.prepare<[string, bigint, string], { specs: string; rev: number }>(`SELECT specs, rev FROM locations WHERE ${pk}`).safeIntegers(false),
    blockLocationHeads: db
      .prepare<[string, bigint], [string, string, number, number]>('SELECT location_id, storage_name, type, status FROM locations WHERE instance_id = ? AND block_key = ?')
      .raw(true)
      .safeIntegers(false),
    hasLocation: db.prepare<[string, bigint], [number]>('SELECT 1 FROM locations WHERE instance_id = ? AND block_key = ? LIMIT 1').raw(true).safeIntegers(false),
    setStatus: db.prepare(`UPDATE locations SET status = ?, rev = rev + 1 WHERE ${pk} AND ${revCheck} RETURNING rev`).safeIntegers(false) as RevStatement,
    replaceSpecs: db.prepare(`UPDATE locations SET specs = ?, rev = rev + 1 WHERE ${pk} AND ${revCheck} RETURNING rev`).safeIntegers(false) as RevStatement,
    deleteLocation: db.prepare(`DELETE FROM locations WHERE ${pk} AND ${revCheck} RETURNING rev`).safeIntegers(false) as RevStatement,
    deleteBlockLocations: db.prepare('DELETE FROM locations WHERE instance_id = ? AND block_key = ?'),
    deleteBlockProperties: db.prepare('DELETE FROM block_properties WHERE instance_id = ? AND block_key = ?'),
    putProperties: db.prepare(
      'INSERT INTO block_properties(instance_id, block_key, properties) VALUES (?, ?, ?) ' +
        'ON CONFLICT(instance_id, block_key) DO UPDATE SET properties = excluded.properties',
    ),
  };
}

/** The TEMP stage of one connection (see SqliteMetaStore.stageRows). */
interface StageStatements {
  insertMany(stageId: string, puts: readonly StoreMutation[]): void;
  commit(stageId: string, maxKeys: number): { rows: number; touched: BigInt64Array | null };
  readonly drop: BetterSqlite3.Statement<[string]>;
}

function prepareStage(db: BetterSqlite3.Database): StageStatements {
  // TEMP: per connection, in its own temp database, so staging takes no lock on the main file.
  db.exec(
    'CREATE TEMP TABLE IF NOT EXISTS snapshot_stage (stage_id TEXT NOT NULL, instance_id TEXT NOT NULL, block_key INTEGER NOT NULL, ' +
      'location_id TEXT NOT NULL, storage_name TEXT NOT NULL, type INTEGER NOT NULL, status INTEGER NOT NULL, create_time_us INTEGER NOT NULL, ' +
      'specs TEXT NOT NULL, PRIMARY KEY (stage_id, instance_id, block_key, location_id)) WITHOUT ROWID',
  );
  const insert = db.prepare(
    'INSERT INTO temp.snapshot_stage VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO UPDATE SET storage_name = excluded.storage_name, ' +
      'type = excluded.type, status = excluded.status, create_time_us = excluded.create_time_us, specs = excluded.specs',
  );
  const insertMany = db.transaction((stageId: string, puts: readonly StoreMutation[]) => {
    for (const m of puts) {
      if (m.op !== 'putLocation') throw new StoreError(`stageRows: ${m.op} cannot be staged`);
      const l = m.location;
      insert.run(stageId, m.instanceId, m.blockKey, l.locationId, l.storageName, l.type, l.status, l.createTimeUs, encodeSpecs(l.specs));
    }
  });
  // The stage is ordered by key, so the landing walks the primary key in order. create_time_us
  // of an existing row is kept (§7.5 in place); its rev moves on.
  const land = db.prepare(
    `INSERT INTO main.locations(instance_id, block_key, ${LOCATION_COLUMNS}) ` +
      'SELECT instance_id, block_key, location_id, storage_name, type, status, create_time_us, 1, specs FROM temp.snapshot_stage WHERE stage_id = ? ' +
      'ON CONFLICT(instance_id, block_key, location_id) DO UPDATE SET storage_name = excluded.storage_name, type = excluded.type, ' +
      'status = excluded.status, specs = excluded.specs, rev = rev + 1',
  );
  const count = db.prepare<[string], [number]>('SELECT count(*) FROM temp.snapshot_stage WHERE stage_id = ?').raw(true).safeIntegers(false);
  const keys = db.prepare<[string], [bigint]>('SELECT block_key FROM temp.snapshot_stage WHERE stage_id = ?').raw(true);
  const drop = db.prepare<[string]>('DELETE FROM temp.snapshot_stage WHERE stage_id = ?');
  const commit = db.transaction((stageId: string, maxKeys: number) => {
    const rows = count.get(stageId)?.[0] ?? 0;
    let touched: BigInt64Array | null = null;
    if (rows <= maxKeys) {
      touched = new BigInt64Array(rows);
      let i = 0;
      for (const [k] of keys.iterate(stageId)) touched[i++] = k;
    }
    land.run(stageId);
    drop.run(stageId);
    return { rows, touched };
  });
  return { insertMany, commit: (stageId, maxKeys) => commit.immediate(stageId, maxKeys), drop };
}

/**
 * Specs are stored as `[[name, uri], ...]`: compact, order-preserving; the text equals
 * `JSON.stringify` of the pairs. Hot path (once per row of a reportEvent ADD): a string with
 * nothing JSON escapes is quoted as is, without building the pair arrays.
 */
export function encodeSpecs(specs: readonly StoredSpec[]): string {
  let out = '[';
  for (let i = 0; i < specs.length; i++) out += `${i === 0 ? '' : ','}${encodeSpec(specs[i] as StoredSpec)}`;
  return `${out}]`;
}

/** One element of `encodeSpecs`: `[name,uri]` (the Redis merge compares these texts). */
export function encodeSpec(spec: StoredSpec): string {
  return `[${jsonString(spec.name)},${jsonString(spec.uri)}]`;
}

/** What JSON.stringify escapes in a string: `"`, `\`, control characters, and (lone) surrogates. */
const JSON_ESCAPED = /["\\\u0000-\u001f\ud800-\udfff]/;

/** A string as JSON text, exactly as JSON.stringify writes it (one encoding: equal strings, equal texts). */
export function jsonString(s: string): string {
  return JSON_ESCAPED.test(s) ? JSON.stringify(s) : `"${s}"`;
}

/** The specs column (`encodeSpecs` text) as StoredSpecs. */
export function decodeSpecs(text: string): StoredSpec[] {
  const pairs = JSON.parse(text) as [string, string][];
  const specs: StoredSpec[] = new Array<StoredSpec>(pairs.length);
  for (let i = 0; i < pairs.length; i++) specs[i] = { name: pairs[i][0], uri: pairs[i][1] };
  return specs;
}

/** §5.4 BP#hit_count as stored: a decimal count, anything else counts as 0. */
export function hitCountOf(text: string | undefined): number {
  const n = Number.parseInt(text ?? '0', 10);
  return Number.isFinite(n) ? n : 0;
}

/** §5.4 BP#lru_time: the later of the stored µs (if it is a decimal) and `us`. */
export function laterTime(stored: string | undefined, us: bigint): string {
  if (stored !== undefined && /^\d+$/.test(stored) && BigInt(stored) > us) return stored;
  return us.toString();
}

function decodeLocation(r: LocationRow): StoredLocation {
  const specs = decodeSpecs(r[6]);
  return {
    locationId: r[0],
    storageName: r[1],
    type: Number(r[2]),
    status: Number(r[3]) as StoredLocationStatus,
    createTimeUs: r[4],
    rev: Number(r[5]),
    specs,
  };
}

function decodeBatchLocation(r: BatchLocationRow): StoredLocation {
  const specs = decodeSpecs(r[7]);
  return {
    locationId: r[1],
    storageName: r[2],
    type: r[3],
    status: r[4] as StoredLocationStatus,
    createTimeUs: BigInt(r[5]),
    rev: r[6],
    specs,
  };
}

/** Instance records as JSON; the only 64-bit field (spec size) is written as a decimal string. */
export function encodeInstance(rec: InstanceRecord): string {
  return JSON.stringify({
    ...rec,
    locationSpecInfos: rec.locationSpecInfos.map((s) => ({ name: s.name, size: s.size.toString() })),
  });
}

export function decodeInstance(text: string): InstanceRecord {
  const raw = JSON.parse(text) as Omit<InstanceRecord, 'locationSpecInfos'> & {
    locationSpecInfos: { name: string; size: string }[];
  };
  return { ...raw, locationSpecInfos: raw.locationSpecInfos.map((s) => ({ name: s.name, size: BigInt(s.size) })) };
}

/** Opaque scan cursor: the last returned primary key. */
function encodeCursor(instanceId: string, blockKey: bigint, locationId: string): string {
  return Buffer.from(JSON.stringify([instanceId, blockKey.toString(), locationId])).toString('base64url');
}

function decodeCursor(cursor: string): [string, bigint, string] {
  try {
    const v = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8')) as unknown;
    if (Array.isArray(v) && v.length === 3 && typeof v[0] === 'string' && typeof v[1] === 'string' && typeof v[2] === 'string') {
      return [v[0], BigInt(v[1]), v[2]];
    }
  } catch {
    // fall through to the typed error below
  }
  throw new StoreError(`invalid scan cursor ${JSON.stringify(cursor)}`);
}

function errorText(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}
