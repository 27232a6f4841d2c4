/**
 * The router's in-process copy of the directory's versioned residency view (architecture.md "The
 * view stream"; routing.md: the request path reads only this). Pure: no I/O, no timers, no clock
 * reads — time comes in as `nowMs`.
 *
 * Atomicity: a snapshot builds a whole new ViewState beside the live one (a snapshot in parts,
 * one part at a time as they arrive) and swaps one reference; a delta is fully
 * validated first (unknown streams, hashers), then applied synchronously in the proto's order
 * (instance removals, instance upserts, stream removals, stream upserts, stream resets,
 * residency), so a request — which also runs synchronously — sees the old view or the new one.
 *
 * Continuity: a delta must carry (same epoch, version + 1) and a heartbeat the current version;
 * anything else is a gap: never applied, the cache stops claiming freshness until a snapshot
 * replaces it (ViewGapError tells the client to resubscribe fresh).
 *
 * Residency: one shared ResidencyIndex per (block_size, hash_seed) group (shared/index), each
 * stream a slot in it. Query cost: one walk per group for all its streams, about one key lookup
 * per prompt block, hashing lazily (a block only while some stream still matches).
 */
import type { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { commonBlockSize, streamMatch } from '../../shared/view/query-result.js';
import type { QueryResult, StreamMatch } from '../../shared/view/query-result.js';
import { HasherPool } from './hasher-pool.js';
import { ResidencyGroups, residencyGroupKey, type GroupSlot } from '../../shared/index/residency-groups.js';
import { MAX_SLOTS } from '../../shared/index/holder-sets.js';
import type { ResidencyIndex } from '../../shared/index/residency-index.js';
import { HasherNotReadyError, ViewGapError, ViewProtocolError } from './view-errors.js';
import { SnapshotAssembly } from './snapshot-assembly.js';
import type { DecodedDelta, DecodedSnapshot, DecodedSnapshotChunk, DecodedViewStream, DecodedViewUpdate, RouterInstance, StreamId, ViewStreamState } from './view-update.js';
import { byNameThenRank } from '../../shared/keys/stream-key.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { PLAIN_IDENTITY, type KeyIdentity } from '../../shared/keys/cache-identity.js';
import { sameModelLists } from '../../shared/view/served-models.js';

export type { RouterInstance } from './view-update.js';

/** architecture.md: the `error` of every stream while the view is stale. */
export const VIEW_STALE_ERROR = 'directory view stale';

/** One stream as the router sees it; block counts are those of its view residency. */
export interface RouterStream extends ViewStreamState {
  readonly deviceBlocks: number;
  readonly hostBlocks: number;
  /** Device blocks it held when it last set a high mark evicting one; 0 = never evicted (ResidencyIndex.deviceEvictionBlocks). */
  readonly deviceEvictionBlocks: number;
}

/**
 * Per-stream prefix hits of one request, in `streams` order (instance name, then dp rank). Owned
 * by the cache and overwritten by the next matchStreams call: read it before calling again.
 */
export interface StreamHits {
  /** The view was stale: no stream gets credit. */
  readonly stale: boolean;
  readonly inputTokens: number;
  readonly count: number;
  readonly streams: readonly RouterStream[];
  readonly deviceHitTokens: Uint32Array;
  readonly hostOnlyHitTokens: Uint32Array;
  /** 1 when the stream gives credit: synchronized in a fresh view. */
  readonly credited: Uint8Array;
}

class CachedStream implements RouterStream, GroupSlot {
  readonly streamId: StreamId;
  readonly instanceName: string;
  readonly dpRank: number;
  readonly blockSize: number;
  readonly hashSeed: bigint;
  readonly incarnationId: string;
  readonly generation: bigint;
  readonly synchronized: boolean;
  readonly sequence: bigint;
  readonly error: string;
  readonly engineKind: EngineKind;

  constructor(
    d: DecodedViewStream,
    /** The stream's (block_size, hash_seed) group and its slot there. */
    readonly group: ResidencyIndex,
    readonly slot: number,
  ) {
    this.streamId = d.streamId;
    this.instanceName = d.instanceName;
    this.dpRank = d.dpRank;
    this.blockSize = d.blockSize;
    this.hashSeed = d.hashSeed;
    this.incarnationId = d.incarnationId;
    this.generation = d.generation;
    this.synchronized = d.synchronized;
    this.sequence = d.sequence;
    this.error = d.error;
    this.engineKind = d.engineKind;
  }

  get deviceBlocks(): number {
    return this.group.deviceBlocks(this.slot);
  }

  get hostBlocks(): number {
    return this.group.hostBlocks(this.slot);
  }

  get deviceEvictionBlocks(): number {
    return this.group.deviceEvictionBlocks(this.slot);
  }
}



/** The candidates of a DP-minimum match, in order: group, slot and rank-group leader (−1: none). */
interface RankPlan {
  state: ViewState | null;
  streamsRev: number;
  instancesRev: number;
  stale: boolean;
  count: number;
  groups: ResidencyIndex[];
  slots: Int32Array;
  leaders: Int32Array;
}

/** Everything one snapshot (plus the deltas after it) describes; sorted lists built lazily. */
class ViewState {
  readonly instances = new Map<string, RouterInstance>();
  readonly streams = new Map<number, CachedStream>();
  /** One residency index per (block_size, hash_seed); dropped once its last stream leaves. */
  readonly groups = new ResidencyGroups();
  private instanceList: RouterInstance[] | null = null;
  private streamList: CachedStream[] | null = null;
  private byInstance: Map<string, CachedStream[]> | null = null;

  invalidateInstances(): void {
    this.instanceList = null;
  }

  invalidateStreams(): void {
    this.streamList = null;
    this.byInstance = null;
  }

  sortedInstances(): readonly RouterInstance[] {
    if (this.instanceList === null) {
      this.instanceList = [...this.instances.values()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    }
    return this.instanceList;
  }

  sortedStreams(): readonly CachedStream[] {
    if (this.streamList === null) this.streamList = [...this.streams.values()].sort(byNameThenRank);
    return this.streamList;
  }

  streamsOf(name: string): readonly CachedStream[] {
    if (this.byInstance === null) {
      const m = new Map<string, CachedStream[]>();
      for (const s of this.sortedStreams()) {
        let l = m.get(s.instanceName);
        if (l === undefined) m.set(s.instanceName, (l = []));
        l.push(s);
      }
      this.byInstance = m;
    }
    return this.byInstance.get(name) ?? NO_STREAMS;
  }
}

const NO_STREAMS: readonly CachedStream[] = Object.freeze([]);

export interface ViewCacheOptions {
  /** `--view_stale_after_ms`: the bound query() and matchStreams() use. */
  readonly staleAfterMs: number;
  /** Hashers by seed; the view client loads an update's new seeds into it before applying. */
  readonly hashers?: HasherPool;
}

export class ViewCache {
  readonly hashers: HasherPool;
  private readonly staleAfterMs: number;
  private state = new ViewState();
  private epochValue = '';
  private versionValue = 0n;
  private hasSnapshotValue = false;
  /** A gap (or no snapshot yet): only a snapshot makes the view usable again. */
  private awaitingSnapshot = true;
  private staleReasonValue: string | null = 'no snapshot yet';
  private lastHeard = Number.NEGATIVE_INFINITY;
  /** A multi-message snapshot being received (null: none). */
  private assembly: SnapshotAssembly<ViewState> | null = null;
  private instancesRev = 0;
  private streamsRev = 0;
  private modelsRev = 0;
  /** CAR's rank groups for the current revisions (rankPlanFor). */
  private readonly rankPlan: RankPlan = { state: null, streamsRev: -1, instancesRev: -1, stale: false, count: 0, groups: [], slots: new Int32Array(0), leaders: new Int32Array(0) };
  private hashedBlocks = 0;
  // Scratch of matchStreams, grown as needed and reused between requests.
  private hits: { -readonly [K in keyof StreamHits]: StreamHits[K] } = {
    stale: true,
    inputTokens: 0,
    count: 0,
    streams: NO_STREAMS,
    deviceHitTokens: new Uint32Array(16),
    hostOnlyHitTokens: new Uint32Array(16),
    credited: new Uint8Array(16),
  };

  constructor(opts: ViewCacheOptions) {
    if (!(opts.staleAfterMs > 0)) throw new RangeError(`staleAfterMs must be positive, got ${opts.staleAfterMs}`);
    this.staleAfterMs = opts.staleAfterMs;
    this.hashers = opts.hashers ?? new HasherPool();
  }

  /** The directory process lifetime the view belongs to; '' before the first snapshot. */
  get epoch(): string {
    return this.epochValue;
  }

  /** The last version applied. */
  get version(): bigint {
    return this.versionValue;
  }

  /** nowMs of the last message accepted (heartbeats count); −Infinity before any. */
  get lastHeardMs(): number {
    return this.lastHeard;
  }

  get hasSnapshot(): boolean {
    return this.hasSnapshotValue;
  }

  /** True after a gap until a snapshot: the client must watch fresh (empty epoch). */
  get needsSnapshot(): boolean {
    return this.awaitingSnapshot;
  }

  /** Why the view was marked stale; null when it was not (time-based staleness aside). */
  get staleReason(): string | null {
    return this.staleReasonValue;
  }

  /** Bumped whenever an instance changes (load reports included): policies cache candidates by it. */
  get instancesRevision(): number {
    return this.instancesRev;
  }

  /**
   * Bumped whenever the served models of the view may have changed (cache-identity §1): an
   * instance added or removed, or one whose model list changed — not on load reports, so what is
   * derived from the lists (request identities, the models index) is rebuilt only when they move.
   */
  get modelsRevision(): number {
    return this.modelsRev;
  }

  /** Bumped whenever the stream set or a stream's state changes (not on residency changes). */
  get streamsRevision(): number {
    return this.streamsRev;
  }

  /** Hash seeds of `u` with no loaded hasher: `await hashers.ensure(...)` them before applyUpdate. */
  missingSeeds(u: DecodedViewUpdate): bigint[] {
    const out: bigint[] = [];
    const visit = (streams: readonly DecodedViewStream[]): void => {
      for (const s of streams) if (!this.hashers.has(s.hashSeed) && !out.includes(s.hashSeed)) out.push(s.hashSeed);
    };
    if (u.kind === 'snapshot' || u.kind === 'snapshot_chunk') visit(u.streams);
    else if (u.kind === 'delta') {
      visit(u.streamUpserts);
      visit(u.streamResets);
    }
    return out;
  }

  /**
   * Applies one update whole or not at all. Throws ViewGapError (out of order: nothing applied,
   * freshness withdrawn until a snapshot), ViewProtocolError or HasherNotReadyError (nothing
   * applied).
   */
  applyUpdate(u: DecodedViewUpdate, nowMs: number): void {
    this.applyStep(u, nowMs, Number.POSITIVE_INFINITY);
  }

  /**
   * applyUpdate, except that a snapshot part is applied at most `maxKeys` keys at a time: false
   * means call again with the same `u` (on a later turn, so requests are served meanwhile from
   * the live view, which a part never touches). Any other update is applied whole (true).
   */
  applyStep(u: DecodedViewUpdate, nowMs: number, maxKeys: number): boolean {
    // A part left half applied is abandoned by anything but itself (the directory sends parts back to back).
    if (this.assembly !== null && this.assembly.part !== null && this.assembly.part !== u) this.assembly = null;
    switch (u.kind) {
      case 'snapshot':
        this.assembly = null;
        this.applySnapshot(u);
        break;
      case 'snapshot_chunk': {
        // Each part is applied as it arrives to a state beside the live view, which serves
        // unchanged until the last one swaps it in.
        let assembly: SnapshotAssembly<ViewState>;
        try {
          if (this.assembly !== null && this.assembly.part === u) assembly = this.assembly;
          else {
            if (u.index === 0) assembly = this.assembly = new SnapshotAssembly(u, new ViewState());
            else if (this.assembly === null) throw new ViewProtocolError(`snapshot part ${u.index} of ${u.epoch}/${u.version} without part 0`);
            else {
              assembly = this.assembly;
              assembly.next(u);
            }
            for (const inst of u.instances) assembly.state.instances.set(inst.name, inst);
          }
          if (!this.applyPartKeys(assembly, u, maxKeys)) return false;
        } catch (e) {
          this.assembly = null;
          throw e;
        }
        assembly.part = null;
        if (!u.last) return true;
        this.assembly = null;
        this.swapIn(assembly.state, u.epoch, u.version);
        break;
      }
      case 'delta':
        // A delta ends any snapshot being assembled (the directory sends parts back to back).
        this.assembly = null;
        this.checkContinuity(u.epoch, u.version, this.versionValue + 1n, 'delta');
        this.applyDelta(u);
        this.versionValue = u.version;
        break;
      case 'heartbeat':
        // Waiting for the snapshot a resubscription asked for: a heartbeat proves nothing.
        if (this.awaitingSnapshot) return true;
        this.checkContinuity(u.epoch, u.version, this.versionValue, 'heartbeat');
        break;
      default: {
        const never: never = u;
        throw new ViewProtocolError(`unknown update kind ${JSON.stringify(never)}`);
      }
    }
    this.lastHeard = nowMs;
    this.staleReasonValue = null;
    return true;
  }

  /** Withdraws cache credit until the next accepted message (or snapshot, after a gap). */
  markStale(reason: string): void {
    this.staleReasonValue = reason;
  }

  /**
   * Withdraws cache credit until a snapshot replaces the view (a message that could not be
   * applied: continuity is lost even though the view itself is intact).
   */
  requireSnapshot(reason: string): void {
    this.awaitingSnapshot = true;
    this.staleReasonValue = reason;
  }

  /** architecture.md: stale after `staleAfterMs` without any message, or when marked. */
  isStale(nowMs: number, staleAfterMs: number = this.staleAfterMs): boolean {
    return this.awaitingSnapshot || this.staleReasonValue !== null || nowMs - this.lastHeard >= staleAfterMs;
  }

  /** Instances sorted by name. */
  instances(): readonly RouterInstance[] {
    return this.state.sortedInstances();
  }

  instance(name: string): RouterInstance | null {
    return this.state.instances.get(name) ?? null;
  }

  /** Every stream, sorted by instance name then dp rank. */
  streams(): readonly RouterStream[] {
    return this.state.sortedStreams();
  }

  /** The streams of one instance, sorted by dp rank. */
  streamsOf(instanceName: string): readonly RouterStream[] {
    return this.state.streamsOf(instanceName);
  }

  /** Blocks the last matchStreams hashed over all groups (lazy hashing; benchmarks, tests). */
  get lastHashedBlocks(): number {
    return this.hashedBlocks;
  }

  /** Tier bits of one key in one stream (tests and diagnostics); 0 when absent. */
  tiersOf(streamId: number, key: Uint8Array, offset = 0): number {
    const s = this.state.streams.get(streamId);
    return s === undefined ? 0 : s.group.tiersOf(s.slot, key, offset);
  }

  /**
   * Prefix hits of `tokenIds` (ints in [0, 2^31), validated by the caller) on every stream, into
   * buffers reused by the next call. A stale view or an unsynchronized stream gets no credit.
   *
   * With `dpMinimumHostWeight` (CAR, routing.md): the caller reads, per instance, only the minimum
   * over its DP ranks (0..dp_size−1, first stream per rank) of device + w · host_only hit tokens.
   * That rank's counts are exact; another rank may stop walking once it is above the minimum for
   * good, so its counts are then a lower bound still above the minimum (the walk ends sooner).
   *
   * Keys are derived under `identity` (cache-identity §3: the request's LoRA name and salt).
   */
  matchStreams(tokenIds: ArrayLike<number>, nowMs: number, dpMinimumHostWeight?: number, identity: KeyIdentity = PLAIN_IDENTITY): StreamHits {
    const list = this.state.sortedStreams();
    const n = list.length;
    const h = this.hits;
    if (h.credited.length < n) {
      const cap = Math.max(n, h.credited.length * 2);
      h.deviceHitTokens = new Uint32Array(cap);
      h.hostOnlyHitTokens = new Uint32Array(cap);
      h.credited = new Uint8Array(cap);
    }
    const stale = this.isStale(nowMs);
    const groups = this.state.groups.all;
    for (let g = 0; g < groups.length; g++) groups[g]!.clearCandidates();
    if (dpMinimumHostWeight === undefined) {
      for (let i = 0; i < n; i++) {
        const s = list[i]!;
        if (!stale && s.synchronized) s.group.addCandidate(s.slot);
      }
    } else {
      const plan = this.rankPlanFor(list, stale);
      for (let i = 0; i < plan.count; i++) plan.groups[i]!.addCandidate(plan.slots[i]!, plan.leaders[i]!);
      for (let g = 0; g < groups.length; g++) groups[g]!.keepMinimumOnly(dpMinimumHostWeight);
    }
    let hashed = 0;
    for (let g = 0; g < groups.length; g++) {
      groups[g]!.match(tokenIds, identity);
      hashed += groups[g]!.lastHashedBlocks;
    }
    this.hashedBlocks = hashed;
    for (let i = 0; i < n; i++) {
      const s = list[i]!;
      const credited = !stale && s.synchronized;
      h.deviceHitTokens[i] = credited ? s.group.deviceHitBlocks(s.slot) * s.blockSize : 0;
      h.hostOnlyHitTokens[i] = credited ? s.group.hostOnlyHitBlocks(s.slot) * s.blockSize : 0;
      h.credited[i] = credited ? 1 : 0;
    }
    h.stale = stale;
    h.inputTokens = tokenIds.length;
    h.count = n;
    h.streams = list;
    return h;
  }

  /**
   * Candidates of a DP-minimum match: the ranks CAR counts (0..dp_size−1 of a registered instance,
   * the first stream of each rank) of one instance and one group form a rank group, led by the
   * first of them; other streams are candidates on their own (exact hits). The plan depends only
   * on the stream list, the instances' dp sizes and staleness, so it is kept until the view's
   * revisions change: a decision replays it instead of looking every stream's instance up.
   */
  private rankPlanFor(list: readonly CachedStream[], stale: boolean): RankPlan {
    const p = this.rankPlan;
    if (p.state === this.state && p.streamsRev === this.streamsRev && p.instancesRev === this.instancesRev && p.stale === stale) return p;
    p.state = this.state;
    p.streamsRev = this.streamsRev;
    p.instancesRev = this.instancesRev;
    p.stale = stale;
    p.count = 0;
    if (p.slots.length < list.length) {
      p.slots = new Int32Array(list.length);
      p.leaders = new Int32Array(list.length);
    }
    p.groups.length = 0;
    let runStart = 0;
    for (let i = 0; i < list.length; i++) {
      const s = list[i]!;
      if (i === 0 || list[i - 1]!.instanceName !== s.instanceName) runStart = i;
      if (stale || !s.synchronized) continue;
      const inst = this.state.instances.get(s.instanceName);
      const counted = inst !== undefined && s.dpRank < inst.dpSize && (i === runStart || list[i - 1]!.dpRank !== s.dpRank);
      let leader = -1;
      if (counted) {
        leader = s.slot;
        for (let j = runStart; j < i; j++) {
          const o = list[j]!;
          if (o.group === s.group && o.synchronized && o.dpRank < inst.dpSize && (j === runStart || list[j - 1]!.dpRank !== o.dpRank)) {
            leader = o.slot;
            break;
          }
        }
      }
      p.groups.push(s.group);
      p.slots[p.count] = s.slot;
      p.leaders[p.count++] = leader;
    }
    return p;
  }

  /**
   * routing.md `POST /v1/internal/kv-cache/query`, the same answer as the directory's Query for
   * the same view; a stale view reports every stream unsynchronized with VIEW_STALE_ERROR. With
   * `includeInstance` (a request's model, cache-identity §2), only the streams of the instances it
   * accepts are listed.
   */
  query(tokenIds: ArrayLike<number>, nowMs: number, identity: KeyIdentity = PLAIN_IDENTITY, includeInstance: ((name: string) => boolean) | null = null): QueryResult {
    const hits = this.matchStreams(tokenIds, nowMs, undefined, identity);
    const matches: StreamMatch[] = [];
    const listed: RouterStream[] = [];
    for (let i = 0; i < hits.count; i++) {
      const s = hits.streams[i]!;
      if (includeInstance !== null && !includeInstance(s.instanceName)) continue;
      const credited = hits.credited[i] === 1;
      const error = hits.stale ? VIEW_STALE_ERROR : s.error;
      matches.push(streamMatch(s, credited, hits.deviceHitTokens[i]!, hits.hostOnlyHitTokens[i]!, credited ? s.deviceBlocks : 0, credited ? s.hostBlocks : 0, error));
      listed.push(s);
    }
    return { input_tokens: tokenIds.length, block_size: commonBlockSize(listed, listed.length), matches };
  }

  private checkContinuity(epoch: string, version: bigint, want: bigint, what: string): void {
    let detail: string | null = null;
    if (this.awaitingSnapshot) detail = `${what} ${epoch}/${version} while waiting for a snapshot`;
    else if (epoch !== this.epochValue) detail = `${what} of epoch ${JSON.stringify(epoch)} on a view of epoch ${JSON.stringify(this.epochValue)}`;
    else if (version !== want) detail = `${what} version ${version} where ${want} was due`;
    if (detail === null) return;
    this.awaitingSnapshot = true;
    this.staleReasonValue = `view_gap: ${detail}`;
    throw new ViewGapError(detail);
  }

  private requireHasher(seed: bigint): ContentKeyHasher {
    const h = this.hashers.get(seed);
    if (h === null) throw new HasherNotReadyError(seed);
    return h;
  }

  private applySnapshot(u: DecodedSnapshot): void {
    // Built beside the current state: a throw leaves the old view in place, untouched.
    const next = new ViewState();
    this.fillState(next, u.instances, u.streams);
    this.swapIn(next, u.epoch, u.version);
  }

  /** Adds a one-message snapshot's instances and streams to `state`, which is not live. */
  private fillState(state: ViewState, instances: readonly RouterInstance[], streams: readonly DecodedViewStream[]): void {
    for (const inst of instances) state.instances.set(inst.name, inst);
    for (const s of streams) {
      if (state.streams.has(s.streamId)) throw new ViewProtocolError(`snapshot repeats stream_id ${s.streamId}`);
      const cached = this.addStream(state, s);
      cached.group.setTiers(cached.slot, s.keys, s.tiers);
    }
  }

  /**
   * Applies up to `maxKeys` more keys of part `u` to the assembly's state, from where the last
   * step stopped; true when the part is done. A stream split over parts is in each with the same
   * identity and state and the next run of its keys.
   */
  private applyPartKeys(a: SnapshotAssembly<ViewState>, u: DecodedSnapshotChunk, maxKeys: number): boolean {
    const state = a.state;
    let budget = maxKeys;
    for (; a.stream < u.streams.length; a.stream++, a.key = 0) {
      const s = u.streams[a.stream]!;
      let cached = state.streams.get(s.streamId);
      if (cached === undefined) {
        cached = this.addStream(state, s);
      } else if (a.key === 0 && (cached.blockSize !== s.blockSize || cached.hashSeed !== s.hashSeed)) {
        throw new ViewProtocolError(`snapshot parts disagree on stream_id ${s.streamId}'s block_size/hash_seed`);
      }
      const n = s.tiers.length;
      const take = Math.min(n - a.key, budget);
      cached.group.setTiers(cached.slot, s.keys.subarray(a.key << 4, (a.key + take) << 4), s.tiers.subarray(a.key, a.key + take));
      a.key += take;
      budget -= take;
      if (a.key < n) return false;
    }
    return true;
  }

  /** `next` becomes the live view (one reference): a request sees the old view or this one. */
  private swapIn(next: ViewState, epoch: string, version: bigint): void {
    this.state = next;
    this.epochValue = epoch;
    this.versionValue = version;
    this.hasSnapshotValue = true;
    this.awaitingSnapshot = false;
    this.instancesRev++;
    this.streamsRev++;
    this.modelsRev++;
  }

  /** A slot in the stream's group of `state`; a group beyond MAX_SLOTS streams is a protocol error. */
  /** A stream new to `state`: it joins its group (a slot) and is listed; its keys are the caller's to set. */
  private addStream(state: ViewState, s: DecodedViewStream): CachedStream {
    const { group, slot } = this.joinGroup(state, s);
    const cached = new CachedStream(s, group, slot);
    state.streams.set(s.streamId, cached);
    return cached;
  }

  private joinGroup(state: ViewState, s: DecodedViewStream): GroupSlot {
    const hasher = this.requireHasher(s.hashSeed);
    if (state.groups.isFull(s.blockSize, s.hashSeed)) throw new ViewProtocolError(`more than ${MAX_SLOTS} streams of block_size ${s.blockSize}, hash_seed ${s.hashSeed}`);
    return state.groups.join(s.blockSize, hasher);
  }

  /** Validates everything that could fail, so the mutation below runs to the end. */
  private validateDelta(u: DecodedDelta): void {
    for (const s of u.streamUpserts) this.requireHasher(s.hashSeed);
    for (const s of u.streamResets) this.requireHasher(s.hashSeed);
    if (u.streamUpserts.length + u.streamResets.length > 0) this.checkGroupSizes(u);
    if (u.residency.length === 0) return;
    const removed = u.streamRemovals.length > 0 ? new Set<number>(u.streamRemovals) : null;
    let added: Set<number> | null = null;
    if (u.streamUpserts.length + u.streamResets.length > 0) {
      added = new Set<number>();
      for (const s of u.streamUpserts) added.add(s.streamId);
      for (const s of u.streamResets) added.add(s.streamId);
    }
    for (const r of u.residency) {
      const exists = (added !== null && added.has(r.streamId)) || (this.state.streams.has(r.streamId) && !(removed !== null && removed.has(r.streamId)));
      if (!exists) throw new ViewProtocolError(`residency for unknown stream_id ${r.streamId} at version ${u.version}`);
    }
  }

  /** Every (block_size, hash_seed) group keeps at most MAX_SLOTS streams after the delta. */
  private checkGroupSizes(u: DecodedDelta): void {
    const after = new Map<number, string>();
    for (const [id, s] of this.state.streams) after.set(id, residencyGroupKey(s.blockSize, s.hashSeed));
    for (const id of u.streamRemovals) after.delete(id);
    for (const s of u.streamUpserts) after.set(s.streamId, residencyGroupKey(s.blockSize, s.hashSeed));
    for (const s of u.streamResets) after.set(s.streamId, residencyGroupKey(s.blockSize, s.hashSeed));
    const counts = new Map<string, number>();
    for (const key of after.values()) {
      const c = (counts.get(key) ?? 0) + 1;
      if (c > MAX_SLOTS) throw new ViewProtocolError(`delta ${u.version} puts more than ${MAX_SLOTS} streams in group block_size/hash_seed ${key}`);
      counts.set(key, c);
    }
  }

  private applyDelta(u: DecodedDelta): void {
    this.validateDelta(u);
    const state = this.state;
    let modelsChanged = false;
    for (const name of u.instanceRemovals) if (state.instances.delete(name)) modelsChanged = true;
    for (const inst of u.instanceUpserts) {
      const prev = state.instances.get(inst.name);
      if (prev === undefined || !sameModelLists(prev.models, inst.models)) modelsChanged = true;
      state.instances.set(inst.name, inst);
    }
    if (modelsChanged) this.modelsRev++;
    if (u.instanceRemovals.length + u.instanceUpserts.length > 0) {
      state.invalidateInstances();
      this.instancesRev++;
    }
    for (const id of u.streamRemovals) {
      const prev = state.streams.get(id);
      if (prev === undefined) continue;
      state.groups.leave(prev);
      state.streams.delete(id);
    }
    // Streams whose keys change meaning (block size or seed) leave their group first, so the
    // group sizes checked in validateDelta hold at every step.
    for (const list of [u.streamUpserts, u.streamResets]) {
      for (const s of list) {
        const prev = state.streams.get(s.streamId);
        if (prev === undefined || (prev.blockSize === s.blockSize && prev.hashSeed === s.hashSeed)) continue;
        state.groups.leave(prev);
        state.streams.delete(s.streamId);
      }
    }
    for (const s of u.streamUpserts) {
      // State only, residency kept.
      const prev = state.streams.get(s.streamId);
      if (prev !== undefined && prev.blockSize === s.blockSize && prev.hashSeed === s.hashSeed) {
        state.streams.set(s.streamId, new CachedStream(s, prev.group, prev.slot));
        continue;
      }
      const { group, slot } = state.groups.join(s.blockSize, this.requireHasher(s.hashSeed));
      state.streams.set(s.streamId, new CachedStream(s, group, slot));
    }
    for (const s of u.streamResets) {
      const prev = state.streams.get(s.streamId);
      let joined: GroupSlot;
      if (prev !== undefined) {
        // Same group here: a stream with other keys left it above.
        prev.group.clearStream(prev.slot);
        joined = { group: prev.group, slot: prev.slot };
      } else {
        joined = state.groups.join(s.blockSize, this.requireHasher(s.hashSeed));
      }
      joined.group.setTiers(joined.slot, s.keys, s.tiers);
      state.streams.set(s.streamId, new CachedStream(s, joined.group, joined.slot));
    }
    if (u.streamRemovals.length + u.streamUpserts.length + u.streamResets.length > 0) {
      state.invalidateStreams();
      this.streamsRev++;
    }
    for (const r of u.residency) {
      const s = state.streams.get(r.streamId)!;
      s.group.setTiers(s.slot, r.keys, r.tiers);
    }
  }
}
