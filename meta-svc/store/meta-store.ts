/**
 * The MetaService's only way to its persistent state (kvcm-meta §9.2). Async so a networked
 * backend (Redis with leader election) can be added later; the SQLite implementation is
 * synchronous underneath. Every method either completes or throws `StoreError`; callers map a
 * StoreError to INTERNAL_ERROR. 64-bit values are bigint throughout.
 */

/** kvcm-meta §2 CacheLocationStatus values that are ever stored (CLS_NEW never is). */
export const CLS_WRITING = 2;
export const CLS_SERVING = 3;
export const CLS_DELETING = 4;
export type StoredLocationStatus = typeof CLS_WRITING | typeof CLS_SERVING | typeof CLS_DELETING;

export interface LocationSpecInfoRecord {
  readonly name: string;
  /** Bytes per block. */
  readonly size: bigint;
}

export interface LocationSpecGroupRecord {
  readonly name: string;
  readonly specNames: readonly string[];
}

export interface ModelDeploymentRecord {
  readonly modelName: string;
  readonly dtype: string;
  readonly useMla: boolean;
  readonly tpSize: number;
  readonly dpSize: number;
  readonly loraName: string;
  readonly ppSize: number;
  readonly extra: string;
  readonly userData: string;
  readonly useEaglePop: boolean;
}

/** A registration (kvcm-meta §4.1). `instanceGroup` is the configured group's name. */
export interface InstanceRecord {
  readonly instanceId: string;
  readonly instanceGroup: string;
  readonly blockSize: number;
  readonly locationSpecInfos: readonly LocationSpecInfoRecord[];
  readonly locationSpecGroups: readonly LocationSpecGroupRecord[];
  /** null when the registration carried none. */
  readonly modelDeployment: ModelDeploymentRecord | null;
  /** QueryType number (0 = unspecified). */
  readonly defaultQueryType: number;
}

export interface StoredSpec {
  readonly name: string;
  readonly uri: string;
}

export interface StoredLocation {
  /** 8 random [A-Za-z0-9] for writable storages; `kvs#<type>#<medium>#<host>` for event reports. */
  readonly locationId: string;
  /** Config `global_unique_name` of the storage. */
  readonly storageName: string;
  /** StorageType number. */
  readonly type: number;
  readonly status: StoredLocationStatus;
  /** µs since epoch of first creation. */
  readonly createTimeUs: bigint;
  /** Row revision: bumped by every write to the location; conditional ops compare it. */
  readonly rev: number;
  readonly specs: readonly StoredSpec[];
}

export interface StoredBlock {
  /** e.g. `BP#prev_key`, `BP#hit_count`, `BP#lru_time`. */
  readonly properties: Readonly<Record<string, string>>;
  readonly locations: readonly StoredLocation[];
}

/** StorageType numbers of the event-report storages (§2); every other type is a writable storage. */
export const ST_EVENT_REPORT_L1P5 = 7;
export const ST_EVENT_REPORT_L2 = 8;

/** True for a location on a writable storage (§6 step 2 counts only these). */
export function isWritableStorageType(type: number): boolean {
  return type !== ST_EVENT_REPORT_L1P5 && type !== ST_EVENT_REPORT_L2;
}

/** A location row without its rev and specs: what `mergeSpecs` creates when the row is new. */
export type LocationHead = Omit<StoredLocation, 'rev' | 'specs'>;

/** One atomic batch element of `apply`. `expectRev` undefined = unconditional. */
export type StoreMutation =
  | {
      readonly op: 'putLocation';
      readonly instanceId: string;
      readonly blockKey: bigint;
      /** Insert, or replace the whole row when the id exists (create_time is the caller's choice). */
      readonly location: Omit<StoredLocation, 'rev'>;
      /**
       * When the id exists, keep its create_time_us instead of `location.createTimeUs` (a
       * snapshot's in-place replace, §7.5: "create_time kept"), so the caller need not read it.
       */
      readonly keepCreateTime?: boolean;
    }
  | {
      /**
       * A reportEvent delta on one location (§7.5 ADD/DELETE), merged inside the transaction so
       * concurrent writers of the same key (two replicas) never lose each other's specs: specs
       * named in `remove` are dropped, each spec of `put` replaces the same-name spec in place
       * or is appended (in `put` order); other specs are kept. A row left without specs is
       * deleted (and its block with it when nothing else remains); a missing row is created from
       * `location` with the `put` specs. Nothing is written when nothing changes.
       * `put` and `remove` names are disjoint.
       */
      readonly op: 'mergeSpecs';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly location: LocationHead;
      readonly put: readonly StoredSpec[];
      readonly remove: readonly string[];
    }
  | {
      /**
       * §5.4 hit statistics, added inside the transaction (replicas flushing the same key never
       * lose each other's increments): BP#hit_count += count, BP#lru_time = max(stored,
       * lastHitUs). Skipped (applied=false) when the block has no location, so a flush never
       * resurrects a removed block.
       */
      readonly op: 'addHits';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly count: number;
      readonly lastHitUs: bigint;
    }
  | {
      /**
       * §6 step 4 allocation, checked inside the transaction: insert `location` only while the
       * block has fewer than `maxWritable` writable-storage locations in CLS_WRITING or
       * CLS_SERVING, none of them on `location.storageName`, and no row with its id. Otherwise the
       * whole batch is refused with StoreConflictError (another replica allocated the key first:
       * C-04 across replicas); the caller plans again.
       */
      readonly op: 'createLocationIf';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly location: Omit<StoredLocation, 'rev'>;
      readonly maxWritable: number;
    }
  | {
      readonly op: 'setStatusIf';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly locationId: string;
      readonly status: StoredLocationStatus;
      readonly expectRev?: number;
    }
  | {
      readonly op: 'replaceSpecsIf';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly locationId: string;
      readonly specs: readonly StoredSpec[];
      readonly expectRev?: number;
    }
  | {
      readonly op: 'deleteLocationIf';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly locationId: string;
      readonly expectRev?: number;
    }
  | { readonly op: 'deleteBlock'; readonly instanceId: string; readonly blockKey: bigint }
  | {
      readonly op: 'mergeProperties';
      readonly instanceId: string;
      readonly blockKey: bigint;
      readonly properties: Readonly<Record<string, string>>;
    };

/**
 * Per-op outcome. Conditional ops report `applied=false` when the row is missing or its rev
 * differs; unconditional ops always report `applied=true`. `rev` is the row's revision after
 * the op (location ops only). A block left with no locations and no properties is deleted.
 */
export interface MutationResult {
  readonly applied: boolean;
  readonly rev?: number;
  /** mergeSpecs: how many `remove` names the row did not hold (§7.5: one aggregated DEBUG log). */
  readonly missing?: number;
}

export interface LocationScanFilter {
  readonly locationId?: string;
  /** e.g. `kvs#event_report_l2#` to scan one reporter family. */
  readonly locationIdPrefix?: string;
  readonly status?: StoredLocationStatus;
  /** create_time_us < this */
  readonly createdBeforeUs?: bigint;
  /** create_time_us >= this */
  readonly createdFromUs?: bigint;
}

export interface ScannedLocation {
  readonly instanceId: string;
  readonly blockKey: bigint;
  readonly location: StoredLocation;
}

export interface LocationPage {
  readonly items: readonly ScannedLocation[];
  /** null when the scan is complete. */
  readonly cursor: string | null;
}

/** Hints for getBlocks; they never change what it returns. */
export interface GetBlocksOptions {
  /**
   * The caller reads these keys to rewrite them at once (a reportEvent delta or snapshot): a
   * read cache should not keep them, since the write invalidates them anyway.
   */
  readonly forWrite?: boolean;
}

/**
 * How another thread opens its own handle on the same store (the report worker, issue 28): the
 * SQLite file, or the Redis server and key namespace.
 */
export type WorkerStoreLocation =
  | { readonly kind: 'sqlite'; readonly path: string; readonly synchronous: 'NORMAL' | 'FULL' }
  | { readonly kind: 'redis'; readonly host: string; readonly port: number; readonly db: number; readonly namespace: string };

export interface MetaStore {
  getInstance(instanceId: string): Promise<InstanceRecord | null>;
  putInstance(rec: InstanceRecord): Promise<void>;
  listInstances(): Promise<InstanceRecord[]>;
  countInstances(instanceGroup: string): Promise<number>;

  /** Only keys that exist appear in the map. */
  getBlocks(instanceId: string, blockKeys: readonly bigint[], opts?: GetBlocksOptions): Promise<Map<bigint, StoredBlock>>;
  /** One transaction: all ops commit (durably, before resolving) or none (StoreError). */
  apply(mutations: readonly StoreMutation[]): Promise<MutationResult[]>;
  /** instanceId null = every instance. Pages in a stable order. */
  scanLocations(instanceId: string | null, filter: LocationScanFilter, cursor: string | null, limit: number): Promise<LocationPage>;
  /** Checkpoint and close; later calls throw StoreError. */
  close(): Promise<void>;

  /** Where another thread opens its own handle on this store; null when it cannot (an in-memory database). */
  workerLocation(): WorkerStoreLocation | null;
  /**
   * Runs `write`, a write by another handle of this store (the report worker), with this
   * handle's own writes held back until it ends (SQLite has one writer at a time; a held-back
   * write waits without blocking the event loop), then drops this handle's cached reads of the
   * keys `touched` names (of all of `instanceId` when it gives null).
   */
  externalWrite<T>(instanceId: string, write: () => Promise<T>, touched: (result: T) => ArrayLike<bigint> | null): Promise<T>;
}

export class StoreError extends Error {
  readonly class = 'store' as const;
  constructor(message: string, override readonly cause?: unknown) {
    super(`store: ${message}`);
  }
}

/** A `createLocationIf` condition did not hold: nothing of the batch was written. */
export class StoreConflictError extends StoreError {
  readonly conflict = true as const;
  constructor(
    /** Index of the refused op in the batch. */
    readonly index: number,
  ) {
    super(`apply refused: the condition of op ${index} no longer holds (another writer got there first)`);
  }
}
