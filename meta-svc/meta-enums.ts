/**
 * The kvcm-meta §2 enum tables, name ↔ number. Wire input accepts a name (exact case) or a
 * number and maps anything unknown to 0 (§1.3); wire output always prints the name.
 */

/** A §2 enum: value names mapped to their protobuf numbers. */
export type EnumTable = Readonly<Record<string, number>>;
export type EnumName<T extends EnumTable> = keyof T & string;

/** §2 ErrorCode. 12 is reserved and must never be reused. */
export const ErrorCode = {
  UNSPECIFIED: 0,
  OK: 1,
  UNSUPPORTED: 2,
  INTERNAL_ERROR: 3,
  SERVICE_NOT_READY: 4,
  INVALID_ARGUMENT: 5,
  DUPLICATE_ENTITY: 6,
  REACH_MAX_ENTITY_CAPACITY: 7,
  INSTANCE_NOT_EXIST: 8,
  SERVER_NOT_LEADER: 9,
  NODE_NOT_REGISTERED: 10,
  SNAPSHOT_IN_PROGRESS: 11,
  SNAPSHOT_RATE_LIMITED: 13,
  SNAPSHOT_REQUIRED: 14,
  IO_ERROR: 20,
  UNKNOWN_ERROR: 100,
  ERROR_MAX: 65535,
} as const;
export type ErrorCodeName = EnumName<typeof ErrorCode>;

/** §2 StorageType; the config `type` ↔ StorageType mapping is §4.5. */
export const StorageType = {
  ST_UNSPECIFIED: 0,
  ST_3FS: 1,
  ST_MOONCAKE: 2,
  ST_TAIRMEMPOOL: 3,
  ST_NFS: 4,
  ST_VCNS_3FS: 5,
  ST_DUMMY: 6,
  ST_EVENT_REPORT_L1P5: 7,
  ST_EVENT_REPORT_L2: 8,
  ST_TAIRMEMPOOL_SSD: 9,
} as const;
export type StorageTypeName = EnumName<typeof StorageType>;

/** §2 QueryType; QT_PREFIX_MATCH_WITH_MAMBA answers UNSUPPORTED everywhere. */
export const QueryType = {
  QT_UNSPECIFIED: 0,
  QT_BATCH_GET: 1,
  QT_PREFIX_MATCH: 2,
  QT_REVERSE_ROLL_SW_MATCH: 3,
  QT_PREFIX_MATCH_WITH_MAMBA: 4,
} as const;
export type QueryTypeName = EnumName<typeof QueryType>;

/** §2 LocationSelectStrategy of getCacheLocationsByBackend (§5.6; KVCM parity). */
export const LocationSelectStrategy = {
  LSS_UNSPECIFIED: 0,
  LSS_V6D_PREFIX: 1,
  LSS_V6D_COVERAGE: 2,
  LSS_WEIGHTED_RANDOM: 3,
} as const;
export type LocationSelectStrategyName = EnumName<typeof LocationSelectStrategy>;

/** §2 TrimStrategy. */
export const TrimStrategy = {
  TS_UNSPECIFIED: 0,
  TS_REMOVE_ALL_CACHE: 1,
  TS_REMOVE_ALL_META: 2,
  TS_TIMESTAMP: 3,
} as const;
export type TrimStrategyName = EnumName<typeof TrimStrategy>;

/** §2 CacheLocationStatus; CLS_NEW is never stored. */
export const CacheLocationStatus = {
  CLS_NOT_FOUND: 0,
  CLS_NEW: 1,
  CLS_WRITING: 2,
  CLS_SERVING: 3,
  CLS_DELETING: 4,
} as const;
export type CacheLocationStatusName = EnumName<typeof CacheLocationStatus>;

/** §2 ReportEventType; §7.1 names the params member each one requires. */
export const ReportEventType = {
  EVENT_UNSPECIFIED: 0,
  EVENT_NODE_REGISTER: 1,
  EVENT_BLOCK_ADD: 2,
  EVENT_BLOCK_DELETE: 3,
  EVENT_HOST_DOWN: 4,
  EVENT_HEARTBEAT: 5,
  EVENT_BLOCK_SNAPSHOT: 6,
} as const;
export type ReportEventTypeName = EnumName<typeof ReportEventType>;

export class UnknownEnumValueError extends Error {
  readonly class = 'unknown_enum_value' as const;
  constructor(readonly value: number) {
    super(`unknown_enum_value: ${value}`);
  }
}

const reverseByTable = new WeakMap<EnumTable, Map<number, string>>();

function reverseOf(table: EnumTable): Map<number, string> {
  let rev = reverseByTable.get(table);
  if (!rev) {
    rev = new Map();
    for (const [name, n] of Object.entries(table)) if (!rev.has(n)) rev.set(n, name);
    reverseByTable.set(table, rev);
  }
  return rev;
}

/**
 * Name of value `n` for output (§1.3: enums print as names). Internal values are always known
 * (unknown input parses as 0), so an unknown number is a bug: it throws, which the HTTP layer
 * turns into INTERNAL_ERROR.
 */
export function enumName<T extends EnumTable>(table: T, n: number): EnumName<T> {
  const name = reverseOf(table).get(n);
  if (name === undefined) throw new UnknownEnumValueError(n);
  return name as EnumName<T>;
}

/** True when `n` is a value of `table`. */
export function isEnumValue(table: EnumTable, n: number): boolean {
  return reverseOf(table).has(n);
}

/** Number of `name` (exact case), or 0 when unknown (§1.3 input rule). */
export function enumNumberOf(table: EnumTable, name: string): number {
  return Object.prototype.hasOwnProperty.call(table, name) ? (table[name] as number) : 0;
}
