/**
 * One DP rank of a simulated engine, publisher side of kv-events: the event endpoint (§1, §2:
 * PUB bound at the event port, three-frame live messages) and the snapshot endpoint (§1, §6:
 * ROUTER bound at the replay port, chunks then a terminator). Holds the rank's `seq` (§11.2)
 * and, unless told otherwise, answers snapshots from what it has published.
 *
 * Besides the conformant path (`publish`), it injects the faults the protocol tests need:
 * raw frames, dropped batches (seq gaps), restarts (seq reset), and snapshot delays, missing
 * terminators, custom replies and dropped requests.
 *
 *   test SUB  ◀──[topic, seq u64be, payload]──  XPUB  (eventPort)
 *   test DEALER ──["", start_seq]──▶ ROUTER (replayPort)
 *               ◀──["", W, chunk]… ["", ff×8, ""]──             xllm: a snapshot (§6)
 *               ◀──["", (topic,) seq, payload]… terminator──     vllm/sglang: history (engines.md §3)
 *
 * For `vllm`/`sglang` (engines.md §5) batches take the configured form (map or array, dp rank
 * omitted or not) and every batch that took a seq, dropped ones included (the engine did send
 * them), enters a ring of the last `replayBufferSteps`; the ROUTER serves that history, never a
 * snapshot, or is not bound at all with layout `none` (vLLM's default).
 */
import * as zmq from 'zeromq';
import { silentLogger, type Logger } from '../../shared/log/logger.js';
import { planBatches } from './batch-splitter.js';
import { replaysHistory } from '../../shared/config/engine-kind.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { DEFAULT_REPLAY_BUFFER_STEPS, HistoryBuffer } from './history-buffer.js';
import type { ReplayLayout } from './history-buffer.js';
import { ResidencyModel } from './residency-model.js';
import { SimBindError, SimClosedError, SimLimitError } from './sim-errors.js';
import {
  CANONICAL_BATCH_FORM,
  EMPTY_FRAME,
  TERMINATOR_WATERMARK,
  WireEncoder,
  encodeSnapshotChunks,
  readU64be,
  u64be,
} from './wire-encoding.js';
import type { BatchForm } from './wire-encoding.js';
import type { WireEvent, WireSnapshotBlock } from './wire-types.js';

/** A history reply message not accepted by the requester's pipe within this is abandoned. */
const HISTORY_SEND_TIMEOUT_MS = 1000;

/** §9 default of `max_message_bytes`. */
export const DEFAULT_MAX_MESSAGE_BYTES = 8 * 1024 * 1024;

export interface RankPublisherOptions {
  /** Interface to bind and to put in the connectable endpoints (§1: never `*`). Default 127.0.0.1. */
  host?: string;
  eventPort: number;
  replayPort: number;
  dpRank: number;
  /** Frame 0 of every live message (§2). Default ''. */
  topic?: string;
  blockSize: number;
  /** Bound for each live payload and each snapshot chunk (§9). Default 8 MiB. */
  maxMessageBytes?: number;
  /** ZMQ_SNDHWM of the event socket (messages queued per subscriber before PUB drops). Default 1000. */
  sendHighWaterMark?: number;
  /** engines.md §1. Default xllm (snapshot replay, canonical batches). */
  engineKind?: EngineKind;
  /** vllm/sglang only: batch and event encoding, dp rank omission (engines.md §2). Default array with rank, map events. */
  batchForm?: BatchForm;
  /** vllm/sglang only: history ring size (vLLM `buffer_steps`). Default 10000. */
  replayBufferSteps?: number;
  /** vllm/sglang only: history reply layout, or no replay endpoint. Default 2. */
  replayLayout?: ReplayLayout;
  logger?: Logger;
}

/** One history reply as the ROUTER sent it (E14: how far a subscriber let it get). */
export interface HistoryReplyRecord {
  readonly startSeq: bigint;
  /** History messages in the reply, terminator excluded. */
  readonly total: number;
  /** History messages handed to the peer before it went away (ROUTER_MANDATORY). */
  sent: number;
  /** The reply loop ended (terminator sent, or the peer went away). */
  done: boolean;
}

/** Faults on the snapshot endpoint; tests change the fields in place. */
export interface SnapshotFaults {
  /** Wait this long (after capturing the state) before replying. */
  delayMs: number;
  /** Send the chunks but never the terminator (R7). */
  omitTerminator: boolean;
  /** At most this many blocks per chunk (byte limit still applies). */
  chunkBlocks: number;
  /** Full custom reply: each message is the frames after the identity (so starting with ""). */
  overrideChunks?: (req: { startSeq: bigint }) => Uint8Array[][];
  /** Record the request but send nothing at all. */
  dropRequests: boolean;
}

/** A state and watermark captured together, atomically with respect to publish() (§11.8). */
export interface CapturedSnapshot {
  readonly watermark: bigint;
  readonly blocks: readonly WireSnapshotBlock[];
}

export interface PublishOptions {
  /** Batch dp_rank; null sends nil (P3/D8 faults). Default: this rank. */
  dpRank?: number | null;
  /** Use this seq instead of nextSeq; nextSeq then continues from seq + 1. */
  seq?: bigint;
  /** Frame 0 instead of the configured topic (D6). */
  topic?: string;
  /** Seconds since the epoch for `ts`. Default: the wall clock. */
  ts?: number;
}

const utf8 = new TextEncoder();

function defaultFaults(): SnapshotFaults {
  return { delayMs: 0, omitTerminator: false, chunkBlocks: Number.POSITIVE_INFINITY, dropRequests: false };
}

export class RankPublisher {
  readonly eventEndpoint: string;
  readonly replayEndpoint: string;
  readonly dpRank: number;
  readonly blockSize: number;
  readonly topic: string;
  readonly maxMessageBytes: number;
  /** Seq of the next live batch (§11.2: 0 after each process start). */
  nextSeq = 0n;
  snapshotFaults: SnapshotFaults = defaultFaults();
  /** start_seq of every snapshot request received, in arrival order (-1n when malformed). */
  readonly snapshotRequests: bigint[] = [];
  readonly engineKind: EngineKind;
  readonly replayLayout: ReplayLayout;
  /** vllm/sglang: the last N batches, served as history (null for xllm). */
  readonly history: HistoryBuffer | null;
  /** vllm/sglang: every history reply, in request order. */
  readonly historyReplies: HistoryReplyRecord[] = [];

  private readonly host: string;
  private readonly eventPort: number;
  private readonly replayPort: number;
  private readonly sendHighWaterMark: number;
  private readonly log: Logger;
  private readonly encoder: WireEncoder;
  private readonly batchForm: BatchForm;
  /** What this rank has published (including dropped batches: the engine did apply them). */
  private readonly model = new ResidencyModel();
  private fixedState: { blocks: readonly WireSnapshotBlock[]; watermark: bigint | undefined } | null = null;
  private stateSource: (() => readonly WireSnapshotBlock[]) | null = null;
  private dropNext = false;
  private closed = false;
  private pub!: zmq.XPublisher;
  private router!: zmq.Router;
  /** zeromq v6 allows one send in flight per socket (EBUSY otherwise): sends are chained. */
  private pubSends: Promise<void> = Promise.resolve();
  private routerSends: Promise<void> = Promise.resolve();
  private subscriptions = 0;
  private subscriptionWaiters: { count: number; resolve: () => void; reject: (e: Error) => void }[] = [];
  /** Pending delay faults: cut short (resolved) when the sockets close, so no reply hangs. */
  private readonly delays = new Map<NodeJS.Timeout, () => void>();
  private loops: Promise<void>[] = [];

  private constructor(opts: RankPublisherOptions) {
    this.host = opts.host ?? '127.0.0.1';
    this.eventPort = opts.eventPort;
    this.replayPort = opts.replayPort;
    this.dpRank = opts.dpRank;
    this.blockSize = opts.blockSize;
    this.topic = opts.topic ?? '';
    this.maxMessageBytes = opts.maxMessageBytes ?? DEFAULT_MAX_MESSAGE_BYTES;
    this.sendHighWaterMark = opts.sendHighWaterMark ?? 1000;
    this.log = (opts.logger ?? silentLogger).child({ component: 'rank-publisher', dp_rank: opts.dpRank });
    this.engineKind = opts.engineKind ?? 'xllm';
    const historyKind = replaysHistory(this.engineKind);
    this.batchForm = historyKind ? (opts.batchForm ?? CANONICAL_BATCH_FORM) : CANONICAL_BATCH_FORM;
    // kv-events §11.3: xLLM publishers emit map events; vLLM has shipped positional ones too.
    this.encoder = new WireEncoder(this.batchForm.eventEncoding ?? 'map');
    this.replayLayout = historyKind ? (opts.replayLayout ?? 2) : 2;
    this.history = historyKind ? new HistoryBuffer(opts.replayBufferSteps ?? DEFAULT_REPLAY_BUFFER_STEPS) : null;
    this.eventEndpoint = `tcp://${this.host}:${this.eventPort}`;
    // engines.md §3: layout none = the engine has no replay endpoint ('' as in the stream config).
    this.replayEndpoint = this.replayLayout === 'none' ? '' : `tcp://${this.host}:${this.replayPort}`;
  }

  /** Bind PUB at eventPort and ROUTER at replayPort (§1, §11.1). */
  static async start(opts: RankPublisherOptions): Promise<RankPublisher> {
    const p = new RankPublisher(opts);
    await p.open();
    return p;
  }

  /** Subscription messages seen on the event socket (one per subscribing SUB, minus leavers). */
  get subscriberCount(): number {
    return this.subscriptions;
  }

  /**
   * Resolves once at least `count` subscriptions are live, so a test publishes only after its
   * SUB is attached (PUB drops messages for peers not yet subscribed) without sleeping.
   */
  waitForSubscribers(count = 1, timeoutMs = 5000): Promise<void> {
    if (this.subscriptions >= count) return Promise.resolve();
    // Waiters survive restart() (the SUBs resubscribe to the new process); close() rejects them.
    return new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => {
        this.subscriptionWaiters = this.subscriptionWaiters.filter((w) => w !== waiter);
        reject(new Error(`no ${count} subscriber(s) on ${this.eventEndpoint} within ${timeoutMs} ms`));
      }, timeoutMs);
      const waiter = {
        count,
        resolve: () => {
          clearTimeout(timer);
          resolve();
        },
        reject: (e: Error) => {
          clearTimeout(timer);
          reject(e);
        },
      };
      this.subscriptionWaiters.push(waiter);
    });
  }

  /**
   * Encode and publish one batch in the canonical form (§3.1 array batch, §3.2 map events).
   * The seq is taken and the state updated synchronously, before the first await (async
   * functions run synchronously up to it), so a snapshot captured at any point reflects
   * exactly the batches below its watermark (§11.8).
   * Throws SimLimitError (consuming no seq) when the payload would exceed maxMessageBytes.
   */
  async publish(events: readonly WireEvent[], opts: PublishOptions = {}): Promise<bigint> {
    this.assertOpen();
    const encoded = events.map((e) => this.encoder.encodeEvent(e));
    return this.publishEncoded(events, encoded, opts);
  }

  /**
   * §11.3: publish `events` as as many batches as needed so that no payload exceeds
   * maxMessageBytes (an oversized event is cut at block boundaries). Nothing is sent for an
   * empty list. All seqs are taken synchronously, in order. Returns them.
   */
  async publishSplit(events: readonly WireEvent[], opts: Omit<PublishOptions, 'seq'> = {}): Promise<bigint[]> {
    this.assertOpen();
    const dpRank = opts.dpRank === undefined ? this.dpRank : opts.dpRank;
    const plan = planBatches(this.encoder, events, dpRank, this.maxMessageBytes);
    return Promise.all(plan.map((b) => this.publishEncoded(b.events, b.encoded, opts)));
  }

  private publishEncoded(events: readonly WireEvent[], encoded: Uint8Array[], opts: PublishOptions): Promise<bigint> {
    const dpRank = opts.dpRank === undefined ? this.dpRank : opts.dpRank;
    const payload = this.encoder.encodeBatchAs(opts.ts ?? Date.now() / 1000, encoded, dpRank, this.batchForm);
    if (payload.length > this.maxMessageBytes) {
      return Promise.reject(new SimLimitError(`batch payload ${payload.length} bytes exceeds max_message_bytes ${this.maxMessageBytes}`));
    }
    const seq = opts.seq ?? this.nextSeq;
    this.nextSeq = seq + 1n;
    this.model.apply(events);
    this.history?.push(seq, payload);
    if (this.dropNext) {
      this.dropNext = false;
      return Promise.resolve(seq);
    }
    const topic = opts.topic ?? this.topic;
    return this.sendLive([utf8.encode(topic), u64be(seq), payload]).then(() => seq);
  }

  /** The state rebuilt from every batch published since start (dropped ones included). */
  publishedState(): WireSnapshotBlock[] {
    return this.model.snapshot();
  }

  /** Send arbitrary frames on the event socket (malformed framing, D5). Consumes no seq. */
  async publishRaw(frames: Uint8Array[]): Promise<void> {
    this.assertOpen();
    return this.sendLive(frames);
  }

  /**
   * Send `[topic, seq, payload]` with an arbitrary payload (malformed or oversized MessagePack).
   * Consumes a seq unless `consumeSeq` is false; the simulated state is not changed.
   */
  async publishPayload(payload: Uint8Array, opts: { seq?: bigint; topic?: string; consumeSeq?: boolean } = {}): Promise<bigint> {
    this.assertOpen();
    const seq = opts.seq ?? this.nextSeq;
    if (opts.consumeSeq ?? true) {
      this.nextSeq = seq + 1n;
      this.history?.push(seq, payload);
    }
    return this.sendLive([utf8.encode(opts.topic ?? this.topic), u64be(seq), payload]).then(() => seq);
  }

  /** Fault: the next publish() consumes its seq and changes the state but is not sent. */
  dropNextBatch(): void {
    this.dropNext = true;
  }

  /**
   * Answer snapshots with these blocks (as given, hashes in any §3.3 form) instead of the
   * published state. `watermark` defaults to nextSeq at request time.
   */
  setSnapshotState(blocks: readonly WireSnapshotBlock[], watermark?: bigint): void {
    this.fixedState = { blocks, watermark };
  }

  /** Back to answering snapshots from the published (or source-provided) state. */
  clearSnapshotState(): void {
    this.fixedState = null;
  }

  /**
   * The engine simulator's hook: snapshots come from its block pool rather than from the
   * events replayed into the internal model. Called synchronously at request time.
   */
  setSnapshotSource(source: (() => readonly WireSnapshotBlock[]) | null): void {
    this.stateSource = source;
  }

  /** The state and watermark a request arriving now would get (§11.8), captured synchronously. */
  captureSnapshot(): CapturedSnapshot {
    if (this.fixedState) return { blocks: this.fixedState.blocks, watermark: this.fixedState.watermark ?? this.nextSeq };
    return { blocks: this.stateSource ? this.stateSource() : this.model.snapshot(), watermark: this.nextSeq };
  }

  /**
   * Publisher process restart (§2, §7.1 R5): close and rebind both sockets on the same ports,
   * seq back to 0. The published state is forgotten unless `keepState`.
   */
  async restart(opts: { keepState?: boolean } = {}): Promise<void> {
    this.assertOpen();
    await this.closeSockets();
    this.nextSeq = 0n;
    this.dropNext = false;
    // A new process: its history starts empty (its buffer lives in the process).
    this.history?.clear();
    if (!opts.keepState) {
      this.model.clear();
      this.fixedState = null;
    }
    await this.open();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const waiters = this.subscriptionWaiters;
    this.subscriptionWaiters = [];
    for (const w of waiters) w.reject(new SimClosedError(`rank publisher ${this.eventEndpoint} closed while waiting for subscribers`));
    await this.closeSockets();
  }

  private assertOpen(): void {
    if (this.closed) throw new SimClosedError(`rank publisher ${this.eventEndpoint} is closed`);
  }

  private async open(): Promise<void> {
    // XPUB rather than PUB: identical to a SUB peer (ZMTP accepts XPUB for SUB), and its
    // subscription messages let tests wait for attachment instead of sleeping.
    const pub = new zmq.XPublisher({ linger: 0, sendHighWaterMark: this.sendHighWaterMark });
    pub.verbosity = 'allSubsUnsubs';
    // mandatory: a history reply to a DEALER that went away fails instead of vanishing, so
    // historyReplies records how much of it was ever handed over (E14). A send blocked on a full
    // pipe whose peer then left may never learn it: give up after a generous second instead.
    const history = this.history !== null;
    const router = new zmq.Router({ linger: 0, mandatory: history, ...(history ? { sendTimeout: HISTORY_SEND_TIMEOUT_MS } : {}) });
    try {
      await bindWithRetry(pub, this.eventEndpoint);
      if (this.replayEndpoint !== '') await bindWithRetry(router, this.replayEndpoint);
    } catch (e) {
      pub.close();
      router.close();
      throw e;
    }
    this.pub = pub;
    this.router = router;
    this.subscriptions = 0;
    this.pubSends = Promise.resolve();
    this.routerSends = Promise.resolve();
    this.loops = [this.watchSubscriptions(pub)];
    if (this.replayEndpoint !== '') this.loops.push(this.serveSnapshots(router));
  }

  private async closeSockets(): Promise<void> {
    for (const [t, cutShort] of this.delays) {
      clearTimeout(t);
      cutShort();
    }
    this.delays.clear();
    this.pub.close();
    this.router.close();
    await Promise.allSettled(this.loops);
    this.loops = [];
  }

  private sendLive(frames: Uint8Array[]): Promise<void> {
    const pub = this.pub;
    const next = this.pubSends.then(() => pub.send(frames));
    this.pubSends = next.catch(() => {});
    return next;
  }

  private sendReply(router: zmq.Router, frames: Uint8Array[]): Promise<void> {
    const next = this.routerSends.then(() => router.send(frames));
    this.routerSends = next.catch(() => {});
    return next;
  }

  private async watchSubscriptions(pub: zmq.XPublisher): Promise<void> {
    try {
      for await (const [msg] of pub) {
        if (msg.length === 0) continue;
        this.subscriptions += msg[0] === 1 ? 1 : msg[0] === 0 ? -1 : 0;
        if (this.subscriptions < 0) this.subscriptions = 0;
        const ready = this.subscriptionWaiters.filter((w) => this.subscriptions >= w.count);
        this.subscriptionWaiters = this.subscriptionWaiters.filter((w) => this.subscriptions < w.count);
        for (const w of ready) w.resolve();
      }
    } catch (e) {
      if (!pub.closed) this.log.warn({ err: e }, 'subscription watch ended');
    }
  }

  private async serveSnapshots(router: zmq.Router): Promise<void> {
    try {
      for await (const [identity, ...frames] of router) {
        // Each request is served on its own so a delayed reply never holds up another (§11.8).
        void this.answer(router, identity, frames).catch((e: unknown) => {
          if (!router.closed) this.log.warn({ err: e }, 'snapshot reply failed');
        });
      }
    } catch (e) {
      if (!router.closed) this.log.warn({ err: e }, 'snapshot endpoint ended');
    }
  }

  private async answer(router: zmq.Router, identity: Buffer, frames: Buffer[]): Promise<void> {
    // §6 request as seen by the ROUTER: [identity, "", start_seq u64be].
    const startSeq = frames.length === 2 && frames[0].length === 0 ? (readU64be(frames[1]) ?? -1n) : -1n;
    this.snapshotRequests.push(startSeq);
    const faults = this.snapshotFaults;
    if (faults.dropRequests) return;
    let messages: Uint8Array[][];
    let record: HistoryReplyRecord | null = null;
    if (faults.overrideChunks) {
      messages = faults.overrideChunks({ startSeq });
    } else if (this.history !== null) {
      // engines.md §3: vLLM's publisher serves the replay from its loop, so a reply held back by
      // the delay fault shows the buffer as of its sending (batches published meanwhile too).
      if (faults.delayMs > 0) await this.sleep(faults.delayMs);
      messages = this.history.reply(startSeq, this.replayLayout === 3 ? 3 : 2, utf8.encode(this.topic));
      if (faults.omitTerminator) messages.pop();
      record = { startSeq, total: faults.omitTerminator ? messages.length : messages.length - 1, sent: 0, done: false };
      this.historyReplies.push(record);
    } else {
      // Capture and encode now, synchronously: the reply reflects exactly batches < W (§11.8)
      // however long the delay fault below holds it.
      const { blocks, watermark } = this.captureSnapshot();
      const w = u64be(watermark);
      const chunks = encodeSnapshotChunks(this.encoder, blocks, this.dpRank, this.blockSize, this.maxMessageBytes, faults.chunkBlocks);
      messages = chunks.map((c) => [EMPTY_FRAME, w, c]);
      if (!faults.omitTerminator) messages.push([EMPTY_FRAME, TERMINATOR_WATERMARK, EMPTY_FRAME]);
    }
    if (faults.delayMs > 0 && record === null) await this.sleep(faults.delayMs);
    if (router.closed) return;
    try {
      for (const m of messages) {
        await this.sendReply(router, [identity, ...m]);
        if (record !== null && record.sent < record.total) record.sent++;
      }
    } catch (e) {
      // ROUTER_MANDATORY: the requester closed its DEALER; the rest of the reply is moot.
      if (record === null || router.closed) throw e;
    } finally {
      if (record !== null) record.done = true;
    }
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.delays.delete(t);
        resolve();
      }, ms);
      this.delays.set(t, resolve);
    });
  }
}

/** A just-closed socket may hold its port for a moment (restart on the same ports). */
async function bindWithRetry(sock: zmq.Socket, endpoint: string): Promise<void> {
  let lastError: unknown;
  for (let attempt = 0; attempt < 50; attempt++) {
    try {
      await sock.bind(endpoint);
      return;
    } catch (e) {
      lastError = e;
      await new Promise((r) => setTimeout(r, 20));
    }
  }
  throw new SimBindError(`cannot bind ${endpoint}: ${lastError instanceof Error ? lastError.message : String(lastError)}`);
}
