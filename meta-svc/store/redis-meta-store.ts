/**
 * The shared MetaStore (kvcm-meta §9.4): Redis through ioredis, so several meta-svc replicas
 * serve one cluster's metadata and a replica can die without losing an acknowledged write.
 * `apply` is one Lua script (atomic, rev conditions inside); an `OK` is sent only after Redis
 * answered it. Reads are pipelined: one round trip per getBlocks however many keys.
 *
 * Reachability: commands are never queued while disconnected (`enableOfflineQueue: false`), so
 * a call during an outage fails at once with StoreUnavailableError and `available` is false
 * until the client is ready again (it reconnects on its own); the service answers
 * SERVICE_NOT_READY meanwhile. No read cache: another replica may have written any key.
 */
import { Redis } from 'ioredis';
import {
  StoreConflictError,
  StoreError,
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
  type WorkerStoreLocation,
} from './meta-store.js';
import { APPLY_SCRIPT, LAND_STAGE_SCRIPT } from './redis-apply-script.js';
import {
  blockHashKey,
  decodeLocationValue,
  isInt64,
  locationBody,
  namespacePrefix,
  parseScanMember,
  scanMember,
  sortableKey,
  stagedRow,
} from './redis-layout.js';
// Same specs and instance JSON as the SQLite rows: one codec for both stores.
import { decodeInstance, encodeInstance, encodeSpec, encodeSpecs, jsonString } from './sqlite-meta-store.js';

export interface RedisMetaStoreOptions {
  readonly host: string;
  readonly port: number;
  readonly db: number;
  /** Key namespace (`kvcm:{namespace}:…`): two clusters can share one Redis. */
  readonly namespace: string;
  /** How long `open` waits for the first connection (then StoreError). */
  readonly connectTimeoutMs?: number;
}

/** A call that failed because Redis is unreachable (retryable: SERVICE_NOT_READY, not INTERNAL_ERROR). */
export class StoreUnavailableError extends StoreError {
  readonly unavailable = true as const;
}

export function isStoreUnavailable(e: unknown): e is StoreUnavailableError {
  return e instanceof StoreUnavailableError;
}

/** Members read per ZRANGEBYLEX while a filtered scan looks for `limit` matches. */
const SCAN_CHUNK = 512;

/** Block hashes read per script call of getBlocks. */
const READ_CHUNK = 1024;

/** Every field of each named block hash, in one reply (flat `[field, value, …]` per hash). */
const READ_BLOCKS_SCRIPT = `local out = {} for i = 1, #ARGV do out[i] = redis.call('HGETALL', ARGV[i]) end return out`;

// ioredis flattens an array argument: no spread, which overflows the stack at ~100k arguments.
type ApplyCommand = (args: string[]) => Promise<(number | string)[]>;

/** One script result (see redis-apply-script.ts) as a MutationResult. */
function resultOf(op: StoreMutation['op'], code: number | string): MutationResult {
  if (typeof code === 'string') {
    // A merge that named missing specs: `<rev>:<missing>`.
    const [rev, missing] = code.split(':').map(Number) as [number, number];
    return rev > 0 ? { applied: true, rev, missing } : { applied: true, missing };
  }
  if (code < 0) return { applied: false };
  // Unconditional ops always apply; location ops report the row's new rev.
  return code > 0 && op !== 'deleteLocationIf' ? { applied: true, rev: code } : { applied: true };
}

export class RedisMetaStore implements MetaStore {
  private closed = false;
  private readonly ns: string;
  private readonly index: string;
  private readonly instancesKey: string;

  private readonly stagesKey: string;
  private readonly decoded = new DecodedLocations(DECODED_LOCATIONS);

  private constructor(
    /** The one connection; also used by the shared reporter state and leases (same namespace). */
    readonly redis: Redis,
    private readonly location: WorkerStoreLocation,
    namespace: string,
  ) {
    this.ns = namespacePrefix(namespace);
    this.index = `${this.ns}locs`;
    this.instancesKey = `${this.ns}instances`;
    this.stagesKey = `${this.ns}stages`;
    redis.defineCommand('kvcmApply', { numberOfKeys: 0, lua: APPLY_SCRIPT });
    redis.defineCommand('kvcmBlocks', { numberOfKeys: 0, lua: READ_BLOCKS_SCRIPT });
    redis.defineCommand('kvcmLandStage', { numberOfKeys: 0, lua: LAND_STAGE_SCRIPT });
  }

  /** Connects (retrying until `connectTimeoutMs`, default 10 s); StoreError when Redis never answers. */
  static async open(opts: RedisMetaStoreOptions): Promise<RedisMetaStore> {
    const redis = new Redis({
      host: opts.host,
      port: opts.port,
      db: opts.db,
      lazyConnect: true,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Reconnect for ever, at most once a second: an outage ends when Redis is back (R5).
      retryStrategy: (times) => Math.min(times * 100, 1000),
      connectTimeout: 2000,
    });
    // Connection errors are reported through `available` and per-call errors; an unhandled
    // 'error' event would crash the process.
    redis.on('error', () => undefined);
    const deadline = Date.now() + (opts.connectTimeoutMs ?? 10000);
    const ready = new Promise<void>((resolve) => redis.once('ready', () => resolve()));
    redis.connect().catch(() => undefined);
    const timedOut = await Promise.race([ready.then(() => false), waitUntil(deadline).then(() => true)]);
    if (timedOut) {
      redis.disconnect();
      throw new StoreError(`cannot reach redis://${opts.host}:${opts.port}/${opts.db} within ${opts.connectTimeoutMs ?? 10000} ms`);
    }
    return new RedisMetaStore(redis, { kind: 'redis', host: opts.host, port: opts.port, db: opts.db, namespace: opts.namespace }, opts.namespace);
  }

  /** The key prefix of this store's namespace (for the shared state that lives beside it). */
  get keyPrefix(): string {
    return this.ns;
  }

  /** False while Redis is unreachable (§9.4: SERVICE_NOT_READY meanwhile). */
  get available(): boolean {
    return !this.closed && this.redis.status === 'ready';
  }

  async getInstance(instanceId: string): Promise<InstanceRecord | null> {
    const text = await this.run('getInstance', () => this.redis.hget(this.instancesKey, instanceId));
    return text === null ? null : decodeInstance(text);
  }

  async putInstance(rec: InstanceRecord): Promise<void> {
    // The version tells every replica's registration cache that something changed (§9.4).
    const replies = await this.run('putInstance', () => this.redis.multi().hset(this.instancesKey, rec.instanceId, encodeInstance(rec)).incr(this.instancesVersionKey).exec());
    for (const [err] of replies ?? []) if (err) throw this.wrap('putInstance', err);
  }

  /** A counter every putInstance increments: a replica's cached registrations are valid while it stands. */
  get instancesVersionKey(): string {
    return `${this.instancesKey}:ver`;
  }

  async listInstances(): Promise<InstanceRecord[]> {
    const all = await this.run('listInstances', () => this.redis.hgetall(this.instancesKey));
    return Object.keys(all)
      .sort()
      .map((id) => decodeInstance(all[id]!));
  }

  async countInstances(instanceGroup: string): Promise<number> {
    // Registrations are few (one per engine deployment); counting them client-side is cheap.
    return (await this.listInstances()).filter((r) => r.instanceGroup === instanceGroup).length;
  }

  async getBlocks(instanceId: string, blockKeys: readonly bigint[], _opts?: GetBlocksOptions): Promise<Map<bigint, StoredBlock>> {
    const out = new Map<bigint, StoredBlock>();
    if (blockKeys.length === 0) return out;
    const unique = blockKeys.length === 1 ? blockKeys : [...new Set(blockKeys)];
    for (const k of unique) if (!isInt64(k)) throw new StoreError(`getBlocks: block key ${k} is outside int64`);
    // One script call per READ_CHUNK keys, all in one round trip: a single reply per chunk costs
    // the client a fraction of one pipelined HGETALL per key, and no chunk holds Redis long.
    const replies = await this.run('getBlocks', () => {
      const p = this.redis.pipeline();
      for (let from = 0; from < unique.length; from += READ_CHUNK) {
        const names = new Array<string>(Math.min(READ_CHUNK, unique.length - from));
        for (let j = 0; j < names.length; j++) names[j] = blockHashKey(this.ns, instanceId, unique[from + j] as bigint);
        (p as unknown as { kvcmBlocks: (names: string[]) => void }).kvcmBlocks(names);
      }
      return p.exec();
    });
    for (let c = 0; c < (replies?.length ?? 0); c++) {
      const [err, chunk] = replies?.[c] ?? [new Error('no reply'), null];
      if (err) throw this.wrap('getBlocks', err);
      const rows = chunk as string[][];
      for (let j = 0; j < rows.length; j++) {
        const block = decodeBlock(rows[j] as string[], this.decoded);
        if (block !== null) out.set(unique[c * READ_CHUNK + j] as bigint, block);
      }
    }
    return out;
  }

  async apply(mutations: readonly StoreMutation[]): Promise<MutationResult[]> {
    if (mutations.length === 0) return [];
    const args = encodeMutations(this.ns, mutations);
    const codes = await this.run('apply', () => (this.redis as unknown as { kvcmApply: ApplyCommand }).kvcmApply(args));
    const results: MutationResult[] = new Array<MutationResult>(mutations.length);
    for (let i = 0; i < mutations.length; i++) results[i] = resultOf((mutations[i] as StoreMutation).op, codes[i] as number | string);
    return results;
  }

  async scanLocations(instanceId: string | null, filter: LocationScanFilter, cursor: string | null, limit: number): Promise<LocationPage> {
    if (!Number.isInteger(limit) || limit <= 0) throw new StoreError(`scan limit must be a positive integer, got ${limit}`);
    let start = cursor !== null ? `(${decodeCursor(cursor)}` : instanceId !== null ? `[${instanceId}\u0000` : '-';
    const end = instanceId !== null ? `(${instanceId}\u0001` : '+';
    const items: ScannedLocation[] = [];
    let lastMember = '';
    for (;;) {
      const members = await this.run('scanLocations', () => this.redis.zrangebylex(this.index, start, end, 'LIMIT', 0, SCAN_CHUNK));
      if (members.length === 0) return { items, cursor: null };
      const candidates: { member: string; instanceId: string; blockKey: bigint; locationId: string }[] = [];
      for (const m of members) {
        const parts = parseScanMember(m);
        if (parts === null) continue;
        if (filter.locationId !== undefined && parts.locationId !== filter.locationId) continue;
        if (filter.locationIdPrefix !== undefined && !parts.locationId.startsWith(filter.locationIdPrefix)) continue;
        candidates.push({ member: m, ...parts });
      }
      const values = candidates.length === 0 ? [] : await this.run('scanLocations', () => {
        const p = this.redis.pipeline();
        for (const c of candidates) p.hget(blockHashKey(this.ns, c.instanceId, c.blockKey), `l:${c.locationId}`);
        return p.exec();
      });
      for (let i = 0; i < candidates.length; i++) {
        const c = candidates[i]!;
        const [err, value] = values?.[i] ?? [null, null];
        if (err) throw this.wrap('scanLocations', err);
        if (typeof value !== 'string') continue; // deleted since the index was read
        const location = decodeLocationValue(c.locationId, value);
        if (location === null || !matches(location, filter)) continue;
        items.push({ instanceId: c.instanceId, blockKey: c.blockKey, location });
        lastMember = c.member;
        if (items.length === limit) return { items, cursor: encodeCursor(lastMember) };
      }
      if (members.length < SCAN_CHUNK) return { items, cursor: null };
      start = `(${members[members.length - 1]}`;
    }
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.redis.quit().catch(() => this.redis.disconnect());
  }

  workerLocation(): WorkerStoreLocation {
    return this.location;
  }

  /** No cache and no single-writer rule here: another handle's write needs no coordination. */
  externalWrite<T>(_instanceId: string, write: () => Promise<T>): Promise<T> {
    return write();
  }

  /**
   * Applies a batch too big for one script as consecutive scripts of at most `maxOps` ops (each
   * atomic, other clients' commands between them): a big reportEvent delta (issue 28).
   */
  async applyInBatches(mutations: readonly StoreMutation[], maxOps: number): Promise<MutationResult[]> {
    if (mutations.length <= maxOps) return this.apply(mutations);
    const out: MutationResult[] = [];
    for (let from = 0; from < mutations.length; from += maxOps) out.push(...(await this.apply(mutations.slice(from, from + maxOps))));
    return out;
  }

  /**
   * Stages snapshot rows (in-place puts keeping create_time, §7.5) under `stageId`, invisible
   * to every reader until landed (`applyStaged`). `owner` (the reporter key) is recorded in the
   * stage registry so the background-lease holder can tell a stage to land from one to drop.
   * Callers pass a few thousand rows per call (one RPUSH of them).
   */
  async stageRows(stageId: string, owner: string, puts: readonly StoreMutation[]): Promise<void> {
    const rows = new Array<string>(puts.length);
    for (let i = 0; i < puts.length; i++) {
      const m = puts[i] as StoreMutation;
      if (m.op !== 'putLocation') throw new StoreError(`stageRows: ${m.op} cannot be staged`);
      if (!isInt64(m.blockKey) || !isInt64(m.location.createTimeUs)) throw new StoreError(`stageRows: block key ${m.blockKey} or its create time is outside int64`);
      rows[i] = stagedRow(m.instanceId, m.blockKey, m.location);
    }
    const replies = await this.run('stageRows', () => this.redis.multi().hset(this.stagesKey, stageId, owner).rpush(`${this.ns}stage:${stageId}`, ...rows).exec());
    for (const [err] of replies ?? []) if (err) throw this.wrap('stageRows', err);
  }

  /** Lands up to `max` staged rows in one script; resolves with how many remain. */
  async applyStaged(stageId: string, max: number): Promise<number> {
    const left = await this.run('applyStaged', () => (this.redis as unknown as { kvcmLandStage: (args: string[]) => Promise<number> }).kvcmLandStage([this.ns, stageId, String(max)]));
    return Number(left);
  }

  async dropStage(stageId: string): Promise<void> {
    await this.run('dropStage', () => this.redis.multi().del(`${this.ns}stage:${stageId}`).hdel(this.stagesKey, stageId).exec());
  }

  /** Every stage: id → owner (reporter key). */
  async stages(): Promise<Map<string, string>> {
    const all = await this.run('stages', () => this.redis.hgetall(this.stagesKey));
    return new Map(Object.entries(all));
  }

  private async run<T>(op: string, fn: () => Promise<T>): Promise<T> {
    if (this.closed) throw new StoreError(`${op}: store is closed`);
    if (this.redis.status !== 'ready') throw new StoreUnavailableError(`${op}: redis is unreachable (${this.redis.status})`);
    try {
      return await fn();
    } catch (err) {
      throw this.wrap(op, err);
    }
  }

  private wrap(op: string, err: unknown): StoreError {
    if (err instanceof StoreError) return err;
    const text = err instanceof Error ? err.message : String(err);
    const conflict = /^KVCM_CONFLICT (\d+)$/.exec(text);
    if (conflict !== null) return new StoreConflictError(Number(conflict[1]));
    if (this.redis.status !== 'ready' || /Connection is closed|Stream isn't writeable|ECONNREFUSED|ECONNRESET/.test(text)) {
      return new StoreUnavailableError(`${op}: redis is unreachable: ${text}`, err);
    }
    return new StoreError(`${op} failed: ${text}`, err);
  }
}

function waitUntil(deadlineMs: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, deadlineMs - Date.now())).unref());
}

/**
 * ARGV of the apply script: the namespace, then one NUL-joined argument per op, location id last
 * (layouts in redis-apply-script.ts); throws StoreError before anything is sent (atomicity).
 */
function encodeMutations(ns: string, mutations: readonly StoreMutation[]): string[] {
  const args = new Array<string>(mutations.length + 1);
  args[0] = ns;
  for (let i = 0; i < mutations.length; i++) {
    const m = mutations[i] as StoreMutation;
    if (!isInt64(m.blockKey)) throw new StoreError(`apply: block key ${m.blockKey} is outside int64`);
    const head = `${m.instanceId}\u0000${m.blockKey}\u0000${sortableKey(m.blockKey)}\u0000`;
    let arg: string;
    switch (m.op) {
      case 'putLocation': {
        const l = m.location;
        if (!isInt64(l.createTimeUs)) throw new StoreError(`apply: create_time_us ${l.createTimeUs} is outside int64`);
        arg = m.keepCreateTime
          ? `K\u0000${head}${l.status}\u0000${l.type}\u0000${l.createTimeUs}\u0000${l.storageName}\u0000${encodeSpecs(l.specs)}\u0000${l.locationId}`
          : `P\u0000${head}${locationBody(l)}\u0000${l.locationId}`;
        break;
      }
      case 'mergeSpecs': {
        const l = m.location;
        if (!isInt64(l.createTimeUs)) throw new StoreError(`apply: create_time_us ${l.createTimeUs} is outside int64`);
        arg = `G\u0000${head}${l.status}\u0000${l.type}\u0000${l.createTimeUs}\u0000${l.storageName}\u0000${m.put.length}\u0000`;
        for (const spec of m.put) arg += `${jsonString(spec.name)}\u0000${encodeSpec(spec)}\u0000`;
        arg += `${m.remove.length}\u0000`;
        for (const name of m.remove) arg += `${jsonString(name)}\u0000`;
        arg += l.locationId;
        break;
      }
      case 'addHits':
        if (!isInt64(m.lastHitUs) || m.lastHitUs < 0n) throw new StoreError(`apply: last hit time ${m.lastHitUs} is not a time`);
        arg = `H\u0000${head}${m.count}\u0000${m.lastHitUs}`;
        break;
      case 'createLocationIf': {
        const l = m.location;
        if (!isInt64(l.createTimeUs)) throw new StoreError(`apply: create_time_us ${l.createTimeUs} is outside int64`);
        arg = `C\u0000${head}${locationBody(l)}\u0000${m.maxWritable}\u0000${l.storageName}\u0000${l.locationId}`;
        break;
      }
      case 'setStatusIf':
        arg = `S\u0000${head}${m.status}\u0000${m.expectRev ?? ''}\u0000${m.locationId}`;
        break;
      case 'replaceSpecsIf':
        arg = `R\u0000${head}${encodeSpecs(m.specs)}\u0000${m.expectRev ?? ''}\u0000${m.locationId}`;
        break;
      case 'deleteLocationIf':
        arg = `D\u0000${head}${m.expectRev ?? ''}\u0000${m.locationId}`;
        break;
      case 'deleteBlock':
        arg = `B\u0000${head}`;
        break;
      case 'mergeProperties': {
        const entries = Object.entries(m.properties);
        arg = `M\u0000${head}${entries.length}`;
        for (const [k, v] of entries) {
          // Property names and values are the MetaService's own (BP#…, decimals): never a NUL.
          if (k.includes('\u0000') || v.includes('\u0000')) throw new StoreError(`apply: property ${JSON.stringify(k)} holds a NUL`);
          arg += `\u0000${k}\u0000${v}`;
        }
        break;
      }
      default: {
        const never: never = m;
        throw new StoreError(`unknown mutation ${JSON.stringify((never as { op?: unknown }).op)}`);
      }
    }
    args[i + 1] = arg;
  }
  return args;
}

/** A block hash as `[field, value, …]` (HGETALL); null when the hash does not exist. */
function decodeBlock(fields: readonly string[], decoded: DecodedLocations): StoredBlock | null {
  if (fields.length === 0) return null;
  const properties: Record<string, string> = {};
  const locations: StoredLocation[] = [];
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const f = fields[i] as string;
    if (f.startsWith('p:')) properties[f.slice(2)] = fields[i + 1] as string;
    else if (f.startsWith('l:')) {
      const l = decoded.decode(f.slice(2), fields[i + 1] as string);
      if (l !== null) locations.push(l);
    }
  }
  if (locations.length > 1) locations.sort((x, y) => (x.locationId < y.locationId ? -1 : x.locationId > y.locationId ? 1 : 0));
  return { properties, locations };
}

/**
 * Recently decoded location values, keyed by the stored value itself. A value carries the row's
 * rev, so an equal value is the same row state and its decoding can be shared (StoredLocations
 * are readonly values): a lookup of hot keys then skips the split and JSON.parse of every row,
 * which was most of the client's CPU of a Redis lookup. Bounded; the oldest quarter goes first.
 */
class DecodedLocations {
  private readonly byValue = new Map<string, StoredLocation>();

  constructor(private readonly capacity: number) {}

  decode(locationId: string, value: string): StoredLocation | null {
    const hit = this.byValue.get(value);
    // Two rows may hold equal values under different ids; the id is not part of the value.
    if (hit !== undefined && hit.locationId === locationId) return hit;
    const l = decodeLocationValue(locationId, value);
    if (l === null) return null;
    if (this.byValue.size >= this.capacity) {
      let drop = this.capacity >> 2;
      for (const k of this.byValue.keys()) {
        if (drop-- <= 0) break;
        this.byValue.delete(k);
      }
    }
    this.byValue.set(value, l);
    return l;
  }
}

/** Entries of DecodedLocations (a few hundred bytes each). */
const DECODED_LOCATIONS = 32768;

function matches(l: StoredLocation, f: LocationScanFilter): boolean {
  if (f.status !== undefined && l.status !== f.status) return false;
  if (f.createdBeforeUs !== undefined && !(l.createTimeUs < f.createdBeforeUs)) return false;
  if (f.createdFromUs !== undefined && !(l.createTimeUs >= f.createdFromUs)) return false;
  return true;
}

/** Opaque cursor: the last returned index member. */
function encodeCursor(member: string): string {
  return Buffer.from(member, 'utf8').toString('base64url');
}

function decodeCursor(cursor: string): string {
  const member = Buffer.from(cursor, 'base64url').toString('utf8');
  if (parseScanMember(member) === null) throw new StoreError(`invalid scan cursor ${JSON.stringify(cursor)}`);
  return member;
}
