/**
 * Chat requests rendered and encoded off the event loop. `@huggingface/jinja` interprets the
 * template in JavaScript and the segment cache hashes every piece of the rendered text, so an 8k-token
 * chat costs about a millisecond of CPU: on the router's event loop that caps every other request.
 * A few worker threads, each with the template compiled and the tokenizer loaded once, do the
 * whole chat path (chat-encoding.ts) and hand back the ids as a transferred buffer. A conversation
 * goes to the same thread while that thread is not far behind the others, so the thread's segment
 * cache holds its earlier turns. When every thread already has its next chats queued, the caller
 * may render a chat itself (`encodeIfRoom`: caller runs, as a saturated thread pool's caller
 * does), so a busy router spends its own core rather than growing the queue. A worker that dies
 * fails only its pending requests (template errors: those requests are routed by load) and is
 * replaced. Workers are unref'd: they never keep a process alive.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ChatRequest } from './chat-request.js';
import type { TokenizeOutcome } from './chat-encoding.js';
import { idsToArray, sumCacheStats, type SegmentCacheStats } from './token-encoder.js';
import type { ChatReply, ChatRequestMessage, ChatWorkerData, SwitchOffMessage } from './chat-worker.js';
import type { TemplateEngineInfo } from './shadow-checked-renderer.js';

interface Slot {
  worker: Worker;
  readonly pending: Map<number, (outcome: TokenizeOutcome) => void>;
  cache: SegmentCacheStats;
  /** The thread's template engine as its last reply gave it; null before any reply. */
  engine: TemplateEngineInfo | null;
}

/** A conversation leaves its thread only when that thread has this many more requests queued than the least loaded. */
const AFFINITY_SLACK = 4;

/**
 * Requests a thread may have queued before `encodeIfRoom` declines (the caller then renders
 * itself): two, so a thread finishing one request finds the next already posted.
 */
const QUEUE_AHEAD = 2;

const NO_CACHE: SegmentCacheStats = sumCacheStats([]);

/**
 * Built, the worker is the .js beside this file. Under tsx (tests, `node --import tsx`) it is the
 * .ts source, and a worker thread does not inherit tsx's module hooks: a two-line bootstrap
 * registers them in the thread first (the only place tsx is named; production never takes it).
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');

function newWorker(workerData: ChatWorkerData): Worker {
  if (!FROM_SOURCE) return new Worker(new URL('./chat-worker.js', import.meta.url), { workerData });
  const entry = new URL('./chat-worker.ts', import.meta.url).href;
  const api = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href;
  const bootstrap = `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData });
}

export class ChatPool {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private closed = false;
  /** Set once the compiled template is off everywhere: a replacement thread is told too. */
  private switchedOff: string | null = null;

  constructor(
    private readonly data: ChatWorkerData,
    size: number,
    /** A thread found the compiled template wrong and switched it off (told once; the pool then switches off every thread). */
    private readonly onSwitchOff: (reason: string) => void = () => {},
  ) {
    for (let i = 0; i < size; i++) this.slots.push({ worker: this.spawn(i), pending: new Map(), cache: NO_CACHE, engine: null });
  }

  /** Each thread's template engine (null: no reply yet). */
  get engines(): readonly (TemplateEngineInfo | null)[] {
    return this.slots.map((s) => s.engine);
  }

  /** Every thread interprets from now on (its own shadow check or another thread's found a difference); once. */
  switchOff(reason: string): void {
    if (this.switchedOff !== null) return;
    this.switchedOff = reason;
    for (const s of this.slots) s.worker.postMessage({ switchOff: reason } satisfies SwitchOffMessage);
  }

  get size(): number {
    return this.slots.length;
  }

  /** The threads' segment caches together. */
  get cacheStats(): SegmentCacheStats {
    return sumCacheStats(this.slots.map((s) => s.cache));
  }

  /** Rendered and encoded on a chat thread; never rejects. */
  encode(request: ChatRequest): Promise<TokenizeOutcome> {
    return this.post(this.pick(request), request);
  }

  /**
   * As `encode`, or null when every thread already has QUEUE_AHEAD requests queued: the caller
   * renders this one itself (a saturated pool then uses the caller's core too, rather than
   * lengthening its queue).
   */
  encodeIfRoom(request: ChatRequest): Promise<TokenizeOutcome> | null {
    const home = this.home(request);
    if (home.pending.size < QUEUE_AHEAD) return this.post(home, request);
    const least = this.leastLoaded();
    return least.pending.size < QUEUE_AHEAD ? this.post(least, request) : null;
  }

  private post(slot: Slot, request: ChatRequest): Promise<TokenizeOutcome> {
    if (this.closed) return Promise.resolve({ ok: false, reason: 'template_error', detail: 'chat template failed: the chat threads are closed' });
    const id = this.nextId++;
    return new Promise<TokenizeOutcome>((resolve) => {
      slot.pending.set(id, resolve);
      slot.worker.postMessage({ id, request } satisfies ChatRequestMessage);
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }

  private pick(request: ChatRequest): Slot {
    const least = this.leastLoaded();
    const home = this.home(request);
    return home.pending.size <= least.pending.size + AFFINITY_SLACK ? home : least;
  }

  /** The thread whose segment cache holds the conversation's earlier turns. */
  private home(request: ChatRequest): Slot {
    return this.slots.length === 1 ? this.slots[0]! : this.slots[request.conversation % this.slots.length]!;
  }

  private leastLoaded(): Slot {
    let least = this.slots[0]!;
    for (const s of this.slots) if (s.pending.size < least.pending.size) least = s;
    return least;
  }

  private spawn(index: number): Worker {
    const worker = newWorker(this.data);
    worker.unref();
    if (this.switchedOff !== null) worker.postMessage({ switchOff: this.switchedOff } satisfies SwitchOffMessage);
    worker.on('message', (reply: ChatReply) => {
      const slot = this.slots[index];
      const resolve = slot?.pending.get(reply.id);
      if (slot === undefined || resolve === undefined) return;
      slot.pending.delete(reply.id);
      slot.cache = reply.cache;
      slot.engine = reply.engine;
      if (reply.engine.mismatches > 0 && this.switchedOff === null) {
        const reason = reply.engine.reason ?? 'a chat thread found a difference';
        this.switchOff(reason);
        this.onSwitchOff(reason);
      }
      resolve('ids' in reply ? { ok: true, tokenIds: idsToArray(reply.ids) } : { ok: false, reason: reply.reason, detail: reply.detail });
    });
    const lost = (why: string): void => {
      const slot = this.slots[index];
      if (slot === undefined || slot.worker !== worker) return;
      for (const resolve of slot.pending.values()) resolve({ ok: false, reason: 'template_error', detail: `chat template failed: chat thread ${why}` });
      slot.pending.clear();
      if (!this.closed) slot.worker = this.spawn(index);
    };
    worker.on('error', (e: Error) => lost(`failed (${e.message})`));
    worker.on('exit', (code) => lost(`exited (${code})`));
    return worker;
  }
}
