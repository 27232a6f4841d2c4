/**
 * How long a simulated engine takes to its first token: a FIFO prefill queue served `concurrency`
 * requests at a time, each costing
 *
 *   prefill_us = base_us + us_per_token · recomputed_tokens + host_us_per_token · host_hit_tokens
 *   recomputed_tokens = prompt_tokens − device_hit_tokens − host_hit_tokens
 *
 * where the hits are the prefix the rank's BlockPool reports when the request is admitted, i.e.
 * when it leaves the queue (an engine allocates KV blocks when it schedules a request, so a prefix
 * evicted while the request waited is recomputed). A Host hit is loaded back: cheaper than a
 * recompute, not free. TTFT = queue wait + prefill_us, so waiting is real and lands in TTFT.
 *
 * Time runs on a virtual schedule: a slot that frees at `start + prefill_us` starts its next
 * request at exactly that instant even when the event loop wakes late, so timer lateness on a busy
 * machine never accumulates into the engine's service rate (it only delays the answer's delivery,
 * which the client measures). Costs are in "sim µs": scale them down (e.g. 1 µs/token) for fast runs.
 *
 * Off unless an OpenAiEndpoint is given one (option `prefill`); without it a prompt is admitted at
 * once and answered without delay, as before.
 */

export interface PrefillCostOptions {
  /** Fixed cost of every prefill (scheduling, the first decode step), µs. */
  readonly baseUs: number;
  /** Cost per recomputed (uncached) prompt token, µs. */
  readonly usPerToken: number;
  /** Cost per Host-only hit token (loaded back to Device), µs; between 0 and usPerToken. */
  readonly hostUsPerToken: number;
  /** Prefills served at once; the rest wait in FIFO order. ≥ 1. */
  readonly concurrency: number;
}

/** Defaults for a fast simulation: 2 ms + 50 µs per recomputed token, Host hits at a fifth. */
export function defaultPrefillCostOptions(): PrefillCostOptions {
  return { baseUs: 2000, usPerToken: 50, hostUsPerToken: 10, concurrency: 1 };
}

/** What admitting a prompt reports (EngineSimulator.admitPrompt has it). */
export interface PrefixHitBlocks {
  readonly hitBlocks: number;
  readonly hostHitBlocks: number;
}

/** One request's way through the queue, all in ms (fractional). */
export interface PrefillTiming<T extends PrefixHitBlocks> {
  /** The admission's own result (hits, events). */
  readonly admitted: T;
  readonly queueMs: number;
  readonly prefillMs: number;
  /** queueMs + prefillMs: arrival to the first token on the virtual schedule. */
  readonly ttftMs: number;
  readonly deviceHitTokens: number;
  readonly hostHitTokens: number;
}

/** The cost formula alone (pure), µs. Hits beyond the prompt are clamped to it. */
export function prefillCostUs(o: PrefillCostOptions, promptTokens: number, deviceHitTokens: number, hostHitTokens: number): number {
  const device = Math.min(deviceHitTokens, promptTokens);
  const host = Math.min(hostHitTokens, promptTokens - device);
  return o.baseUs + o.usPerToken * (promptTokens - device - host) + o.hostUsPerToken * host;
}

interface Waiter {
  readonly arrivedMs: number;
  readonly start: (grant: SlotGrant) => void;
}

interface SlotGrant {
  readonly slot: number;
  /** Virtual instant the prefill starts: arrival, or the moment the slot freed if later. */
  readonly startMs: number;
}

export class PrefillQueue {
  private readonly opts: PrefillCostOptions;
  private readonly now: () => number;
  /** Per slot: the virtual instant it last freed. */
  private readonly freeAtMs: number[];
  private readonly slotBusy: boolean[];
  private busySlots = 0;
  private readonly waiting: Waiter[] = [];
  private waitingHead = 0;
  /** Prefills served since construction (or the last resetCounters). */
  served = 0;
  recomputedTokens = 0;
  deviceHitTokens = 0;
  hostHitTokens = 0;
  promptTokens = 0;

  constructor(opts: PrefillCostOptions, now: () => number = () => performance.now()) {
    if (!Number.isInteger(opts.concurrency) || opts.concurrency < 1) throw new RangeError(`concurrency must be a positive integer, got ${opts.concurrency}`);
    for (const k of ['baseUs', 'usPerToken', 'hostUsPerToken'] as const) {
      if (!(opts[k] >= 0 && Number.isFinite(opts[k]))) throw new RangeError(`${k} must be a finite number ≥ 0, got ${opts[k]}`);
    }
    this.opts = { ...opts };
    this.now = now;
    this.freeAtMs = new Array<number>(opts.concurrency).fill(Number.NEGATIVE_INFINITY);
    this.slotBusy = new Array<boolean>(opts.concurrency).fill(false);
  }

  /** Requests waiting plus those in prefill: what the engine reports as waiting_requests_num. */
  get pending(): number {
    return this.waiting.length - this.waitingHead + this.busySlots;
  }

  resetCounters(): void {
    this.served = 0;
    this.recomputedTokens = 0;
    this.deviceHitTokens = 0;
    this.hostHitTokens = 0;
    this.promptTokens = 0;
  }

  /**
   * Queues one prefill of `promptTokens`; `admit` runs when it leaves the queue (its hits price
   * the prefill). Resolves once the first token is due.
   */
  async run<T extends PrefixHitBlocks>(promptTokens: number, blockSize: number, admit: () => Promise<T>): Promise<PrefillTiming<T>> {
    const arrivedMs = this.now();
    const { slot, startMs } = await this.acquire(arrivedMs);
    let admitted: T;
    try {
      admitted = await admit();
    } catch (e) {
      this.release(slot, Math.max(startMs, this.now()));
      throw e;
    }
    const deviceHitTokens = Math.min(promptTokens, admitted.hitBlocks * blockSize);
    const hostHitTokens = Math.min(promptTokens - deviceHitTokens, admitted.hostHitBlocks * blockSize);
    const prefillMs = prefillCostUs(this.opts, promptTokens, deviceHitTokens, hostHitTokens) / 1000;
    const doneMs = startMs + prefillMs;
    this.served++;
    this.promptTokens += promptTokens;
    this.deviceHitTokens += deviceHitTokens;
    this.hostHitTokens += hostHitTokens;
    this.recomputedTokens += promptTokens - deviceHitTokens - hostHitTokens;
    const wait = doneMs - this.now();
    if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    this.release(slot, doneMs);
    return { admitted, queueMs: startMs - arrivedMs, prefillMs, ttftMs: doneMs - arrivedMs, deviceHitTokens, hostHitTokens };
  }

  /** Resolves once a slot is ours, FIFO after earlier arrivals. */
  private acquire(arrivedMs: number): Promise<SlotGrant> {
    if (this.waitingHead === this.waiting.length && this.busySlots < this.opts.concurrency) {
      const slot = this.slotBusy.indexOf(false);
      this.slotBusy[slot] = true;
      this.busySlots++;
      return Promise.resolve({ slot, startMs: Math.max(arrivedMs, this.freeAtMs[slot]!) });
    }
    return new Promise((resolve) => this.waiting.push({ arrivedMs, start: resolve }));
  }

  /** The slot freed at virtual `freedAtMs`: the next waiter starts on it then, or it goes idle. */
  private release(slot: number, freedAtMs: number): void {
    this.freeAtMs[slot] = freedAtMs;
    const next = this.waitingHead < this.waiting.length ? this.waiting[this.waitingHead++]! : null;
    if (this.waitingHead > 1024 && this.waitingHead * 2 > this.waiting.length) {
      this.waiting.splice(0, this.waitingHead);
      this.waitingHead = 0;
    }
    if (next === null) {
      this.slotBusy[slot] = false;
      this.busySlots--;
      return;
    }
    next.start({ slot, startMs: Math.max(next.arrivedMs, freedAtMs) });
  }
}

/** Response headers with the engine's own view of one request (ms with µs precision, tokens). */
export const PREFILL_TIMING_HEADERS = {
  ttftMs: 'x-sim-ttft-ms',
  queueMs: 'x-sim-queue-ms',
  prefillMs: 'x-sim-prefill-ms',
  deviceHitTokens: 'x-sim-device-hit-tokens',
  hostHitTokens: 'x-sim-host-hit-tokens',
} as const;

export function prefillTimingHeaders(t: PrefillTiming<PrefixHitBlocks>): Record<string, string> {
  return {
    [PREFILL_TIMING_HEADERS.ttftMs]: t.ttftMs.toFixed(3),
    [PREFILL_TIMING_HEADERS.queueMs]: t.queueMs.toFixed(3),
    [PREFILL_TIMING_HEADERS.prefillMs]: t.prefillMs.toFixed(3),
    [PREFILL_TIMING_HEADERS.deviceHitTokens]: String(t.deviceHitTokens),
    [PREFILL_TIMING_HEADERS.hostHitTokens]: String(t.hostHitTokens),
  };
}
