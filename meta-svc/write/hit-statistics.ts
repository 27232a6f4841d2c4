/**
 * §5.4 hit statistics: BP#hit_count and BP#lru_time, buffered in memory and flushed at most
 * every 5 s (unflushed updates may be lost in a crash). Each flushed key is one `addHits`: the
 * store adds the count inside its transaction and skips a block that lost its locations, so
 * replicas flushing the same keys never lose each other's increments (§9.4) and a flush never
 * resurrects a removed block. No read, no lock.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { MetaStore, StoreMutation } from '../store/meta-store.js';

export const HIT_FLUSH_INTERVAL_MS = 5000;
/**
 * Keys written per transaction (§9.1 allows ≤ 1000 rows). Between two slices the flush yields to
 * the event loop: a 4096-key flush measured 75–175 ms as one synchronous task, which every lookup
 * arriving meanwhile waited for; a slice is a few ms.
 */
const FLUSH_SLICE = 256;

interface PendingHits {
  readonly keys: Map<bigint, { count: number; lastHitUs: bigint }>;
}

export class HitStatistics {
  private pending = new Map<string, PendingHits>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly store: MetaStore,
    private readonly log: Logger,
  ) {}

  /** Starts the periodic flush (the service calls it; tests flush by hand). */
  startTimer(intervalMs = HIT_FLUSH_INTERVAL_MS): void {
    if (this.timer !== null) return;
    this.timer = setInterval(() => {
      void this.flush();
    }, intervalMs);
    this.timer.unref();
  }

  /** Hot path: one map update per hit key. */
  record(instanceId: string, blockKey: bigint, nowUs: bigint): void {
    let p = this.pending.get(instanceId);
    if (p === undefined) {
      p = { keys: new Map() };
      this.pending.set(instanceId, p);
    }
    const e = p.keys.get(blockKey);
    if (e === undefined) p.keys.set(blockKey, { count: 1, lastHitUs: nowUs });
    else {
      e.count++;
      if (nowUs > e.lastHitUs) e.lastHitUs = nowUs;
    }
  }

  /** Writes every buffered update; concurrent calls share one flush. */
  flush(): Promise<void> {
    if (this.flushing === null) {
      this.flushing = this.flushAll().finally(() => {
        this.flushing = null;
      });
    }
    return this.flushing;
  }

  /** Final flush and timer stop (§9.3: statistics flush on shutdown). */
  async close(): Promise<void> {
    if (this.timer !== null) clearInterval(this.timer);
    this.timer = null;
    await this.flush();
  }

  private async flushAll(): Promise<void> {
    const batch = this.pending;
    this.pending = new Map();
    for (const [instanceId, p] of batch) {
      try {
        let muts: StoreMutation[] = [];
        for (const [blockKey, hit] of p.keys) {
          muts.push({ op: 'addHits', instanceId, blockKey, count: hit.count, lastHitUs: hit.lastHitUs });
          if (muts.length < FLUSH_SLICE) continue;
          await this.store.apply(muts);
          muts = [];
          await yieldToEventLoop();
        }
        if (muts.length > 0) await this.store.apply(muts);
      } catch (err) {
        // §5.4 allows losing statistics; log and drop rather than retry forever.
        this.log.warn({ err, instance_id: instanceId }, 'hit statistics flush failed; updates dropped');
      }
    }
  }
}

/** Lets pending I/O callbacks (requests) run before the flush continues. */
function yieldToEventLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}
