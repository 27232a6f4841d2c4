/**
 * The directory: the set of stream subscribers and the answers built from them (kv-events §8
 * query view, §10 counters). Thin on purpose: each subscriber owns its sockets, state machine and
 * index; this class only adds, removes and reads them. Static streams come from the kv-events
 * config at start; discovery calls `addStream` / `removeStream` at run time.
 *
 * Who hears about a stream is decided here and nowhere else: every `StreamTracker` in
 * `trackers` (main.ts: the view publisher, the stream metrics) is told when a stream opens and
 * gets back its part of the stream's one observer (subscription/stream-observer.ts); from then
 * on the subscriber pushes every change, and its close, to all of them in that order.
 */
import type { Logger } from '../shared/log/logger.js';
import { silentLogger } from '../shared/log/logger.js';
import type { StaticStreamConfig, StreamLimits } from '../shared/config/kv-events-config.js';
import { DEFAULT_ENGINE_KIND, type EngineKind } from '../shared/config/engine-kind.js';
import { StreamQuery, type QueryableStream, type QueryScope } from './index/stream-query.js';
import { PLAIN_IDENTITY } from '../shared/keys/cache-identity.js';
import type { QueryResult } from '../shared/view/query-result.js';
import { byNameThenRank, streamKey } from '../shared/keys/stream-key.js';
import { DomainError } from '../shared/errors/domain-error.js';
import type { StreamState } from './subscription/stream-state.js';
import type { StreamCounters } from './subscription/stream-counters.js';
import type { StreamConfig, StreamSpec, SubscriberStreamConfig } from './subscription/stream-config.js';
import { StreamObservers, type StreamListener, type StreamObserver } from './subscription/stream-observer.js';

/** What the directory needs from one running subscriber (the subscription module's surface). */
export interface DirectoryStream {
  readonly state: StreamState;
  /** kv-events §10 counters (live object; read, never written, here). */
  readonly counters: StreamCounters;
  /** The stream's published query view: never a half-built index (kv-events §7.2 step 4). */
  toQueryable(): QueryableStream;
  /** Sets the stream's one observer, told the current state at once (before `start`). */
  observe(observer: StreamObserver): void;
  start(): void | Promise<void>;
  /** Tells the observer `streamClosed` first, then stops. */
  close(): void | Promise<void>;
}

/** A stream the directory has just opened (not yet started). */
export interface OpenedStream {
  readonly config: SubscriberStreamConfig;
  readonly stream: DirectoryStream;
}

/** A party told about every stream: what it listens to of each (its part of the fan-out). */
export interface StreamTracker {
  streamOpened(opened: OpenedStream): StreamListener;
}

/** Builds (but does not start) a subscriber; main.ts passes the real one, tests may pass others. */
export type DirectoryStreamFactory = (cfg: SubscriberStreamConfig, limits: StreamLimits) => DirectoryStream | Promise<DirectoryStream>;

/** `ListStreams` entry: configuration, state, residency and counters of one stream. */
export interface StreamStatus extends StreamSpec {
  readonly engineKind: EngineKind;
  readonly state: StreamState;
  readonly synchronized: boolean;
  /** `last`, −1n when none. */
  readonly sequence: bigint;
  readonly error: string;
  readonly deviceBlocks: number;
  readonly hostBlocks: number;
  readonly entryCount: number;
  readonly counters: StreamCounters;
}

export type StreamSource = 'static' | 'discovery' | '';

export interface DirectoryStats {
  readonly directoryEnabled: boolean;
  readonly streamSource: StreamSource;
  readonly streamsTotal: number;
  readonly streamsSynchronized: number;
  readonly streamsByState: Readonly<Record<string, number>>;
  readonly deviceBlocksTotal: number;
  readonly hostBlocksTotal: number;
  readonly entriesTotal: number;
  readonly queriesTotal: number;
  readonly startedAtMs: number;
  readonly uptimeMs: number;
}

export type DirectoryStreamErrorClass = 'duplicate_stream' | 'max_streams' | 'disabled' | 'closed';

/** The stream operations `addStream` refuses; `class` is stable, the message is `<class>: <detail>`. */
export class DirectoryStreamError extends DomainError {
  readonly class: DirectoryStreamErrorClass;
  constructor(cls: DirectoryStreamErrorClass, detail: string) {
    super(detail);
    this.class = cls;
  }
}

export interface DirectoryOptions {
  /** False when `--kv_events_config_file` is empty: no streams, Query answers zero matches. */
  readonly enabled: boolean;
  readonly streamSource: StreamSource;
  readonly maxStreams: number;
  readonly limits: StreamLimits;
  readonly createStream: DirectoryStreamFactory;
  /** Told about every stream, in this order (composed in main.ts); none by default. */
  readonly trackers?: readonly StreamTracker[];
  readonly logger?: Logger;
  /** Clock for stats (passed in so tests can set it). */
  readonly nowMs?: () => number;
}

interface Entry {
  readonly cfg: SubscriberStreamConfig;
  readonly stream: DirectoryStream;
}

export class Directory {
  private readonly entries = new Map<string, Entry>();
  private readonly streamQuery = new StreamQuery();
  private readonly log: Logger;
  private readonly nowMs: () => number;
  private readonly startedAtMs: number;
  private queriesTotal = 0;
  private closed = false;

  constructor(private readonly opts: DirectoryOptions) {
    this.log = opts.logger ?? silentLogger;
    this.nowMs = opts.nowMs ?? Date.now;
    this.startedAtMs = this.nowMs();
  }

  /** A directory with no streams (empty `--kv_events_config_file`). */
  static disabled(createStream: DirectoryStreamFactory, limits: StreamLimits, logger?: Logger, trackers?: readonly StreamTracker[]): Directory {
    return new Directory({ enabled: false, streamSource: '', maxStreams: 0, limits, createStream, ...(logger ? { logger } : {}), ...(trackers ? { trackers } : {}) });
  }

  get enabled(): boolean {
    return this.opts.enabled;
  }

  get streamCount(): number {
    return this.entries.size;
  }

  /**
   * Creates and starts a subscriber for `cfg`. Refuses a duplicate (instance, dp_rank) and a
   * stream beyond max_streams (kv-events §9). Resolves once the subscriber has started (its
   * sockets connect in the background; the stream reports CONNECTING until then).
   */
  async addStream(cfg: StaticStreamConfig | StreamConfig): Promise<void> {
    if (this.closed) throw new DirectoryStreamError('closed', 'directory is closed');
    if (!this.opts.enabled) throw new DirectoryStreamError('disabled', 'directory disabled (no --kv_events_config_file)');
    const key = streamKey(cfg.instanceName, cfg.dpRank);
    if (this.entries.has(key)) {
      throw new DirectoryStreamError('duplicate_stream', `(${cfg.instanceName}, dp_rank ${cfg.dpRank}) already subscribed`);
    }
    if (this.entries.size >= this.opts.maxStreams) {
      throw new DirectoryStreamError('max_streams', `max_streams ${this.opts.maxStreams} reached; (${cfg.instanceName}, ${cfg.dpRank}) not added`);
    }
    const subCfg: SubscriberStreamConfig = Object.freeze({
      ...streamSpec(cfg),
      engineKind: 'engineKind' in cfg && cfg.engineKind !== undefined ? cfg.engineKind : DEFAULT_ENGINE_KIND,
      ...('identity' in cfg && cfg.identity !== undefined ? { identity: cfg.identity } : {}),
      // Kept for the view stream's stream identity (absent for static streams).
      ...('generation' in cfg && cfg.generation !== undefined ? { generation: cfg.generation, incarnationId: cfg.incarnationId ?? null } : {}),
    });
    const stream = await this.opts.createStream(subCfg, this.opts.limits);
    // The await above may have raced a duplicate add or a close; check again before publishing.
    if (this.closed || this.entries.has(key)) {
      await stream.close();
      if (this.closed) throw new DirectoryStreamError('closed', 'directory closed while adding a stream');
      throw new DirectoryStreamError('duplicate_stream', `(${cfg.instanceName}, dp_rank ${cfg.dpRank}) already subscribed`);
    }
    this.entries.set(key, { cfg: subCfg, stream });
    const opened: OpenedStream = { config: subCfg, stream };
    stream.observe(new StreamObservers((this.opts.trackers ?? []).map((t) => t.streamOpened(opened))));
    this.log.info(
      { instance: cfg.instanceName, dp_rank: cfg.dpRank, engine_kind: cfg.engineKind, endpoint: cfg.endpoint, replay_endpoint: cfg.replayEndpoint },
      'stream added',
    );
    try {
      await stream.start();
    } catch (e) {
      this.entries.delete(key);
      await stream.close();
      throw e;
    }
  }

  /** Closes and forgets a stream; false when it was not subscribed. */
  async removeStream(instanceName: string, dpRank: number): Promise<boolean> {
    const key = streamKey(instanceName, dpRank);
    const entry = this.entries.get(key);
    if (entry === undefined) return false;
    // Removed from the map first, so a query during close never reads a closing stream.
    this.entries.delete(key);
    await entry.stream.close();
    this.log.info({ instance: instanceName, dp_rank: dpRank }, 'stream removed');
    return true;
  }

  /**
   * Prefix hits of `tokenIds` on every stream in `scope` (kv-events §8; routing.md query JSON;
   * cache-identity §2: keyed under the scope's identity, streams of instances out of scope left
   * out). The ids must already be validated integers in [0, 2^31). Synchronous: reads each
   * stream's published view.
   */
  query(tokenIds: ArrayLike<number>, scope: QueryScope | null = null): QueryResult {
    this.queriesTotal++;
    const admits = scope?.admits ?? null;
    const views: QueryableStream[] = [];
    for (const e of this.entries.values()) {
      const q = e.stream.toQueryable();
      if (admits === null || admits(q.instanceName)) views.push(q);
    }
    return this.streamQuery.query(tokenIds, views, scope?.identity ?? PLAIN_IDENTITY);
  }

  /** Every stream, sorted by instance name then dp_rank (routing.md order). */
  listStreams(): StreamStatus[] {
    const out: StreamStatus[] = [];
    for (const { cfg, stream } of this.entries.values()) {
      const q = stream.toQueryable();
      const index = q.synchronized ? q.index : null;
      out.push({
        ...streamSpec(cfg),
        state: stream.state,
        synchronized: q.synchronized,
        sequence: q.sequence,
        error: q.error,
        deviceBlocks: index === null ? 0 : index.deviceBlocks,
        hostBlocks: index === null ? 0 : index.hostBlocks,
        entryCount: index === null ? 0 : index.entryCount,
        counters: snapshotCounters(stream.counters),
      });
    }
    out.sort(byNameThenRank);
    return out;
  }

  stats(): DirectoryStats {
    const byState: Record<string, number> = {};
    let synchronized = 0;
    let device = 0;
    let host = 0;
    let entries = 0;
    for (const s of this.listStreams()) {
      byState[s.state] = (byState[s.state] ?? 0) + 1;
      if (s.synchronized) synchronized++;
      device += s.deviceBlocks;
      host += s.hostBlocks;
      entries += s.entryCount;
    }
    const now = this.nowMs();
    return {
      directoryEnabled: this.opts.enabled,
      streamSource: this.opts.enabled ? this.opts.streamSource : '',
      streamsTotal: this.entries.size,
      streamsSynchronized: synchronized,
      streamsByState: byState,
      deviceBlocksTotal: device,
      hostBlocksTotal: host,
      entriesTotal: entries,
      queriesTotal: this.queriesTotal,
      startedAtMs: this.startedAtMs,
      uptimeMs: Math.max(0, now - this.startedAtMs),
    };
  }

  /** Closes every subscriber (their sockets); idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const all = [...this.entries.values()];
    this.entries.clear();
    const results = await Promise.allSettled(all.map((e) => e.stream.close()));
    for (let i = 0; i < results.length; i++) {
      const r = results[i]!;
      if (r.status === 'rejected') this.log.warn({ instance: all[i]!.cfg.instanceName, dp_rank: all[i]!.cfg.dpRank, err: String(r.reason) }, 'stream close failed');
    }
  }
}

/** The StreamSpec fields of a config (static: hash seed made exact), without anything else it carries. */
function streamSpec(cfg: StaticStreamConfig | StreamSpec): StreamSpec & { readonly engineKind: EngineKind } {
  return {
    instanceName: cfg.instanceName,
    dpRank: cfg.dpRank,
    blockSize: cfg.blockSize,
    endpoint: cfg.endpoint,
    replayEndpoint: cfg.replayEndpoint,
    topic: cfg.topic,
    hashSeed: BigInt(cfg.hashSeed),
    engineKind: cfg.engineKind ?? DEFAULT_ENGINE_KIND,
  };
}

/** A copy, so a ListStreams answer does not change under the caller as batches arrive. */
function snapshotCounters(c: StreamCounters): StreamCounters {
  return { ...c, skipped: { ...c.skipped }, syncLost: { ...c.syncLost } };
}
