/**
 * §5.4 hit statistics: BP#hit_count and BP#lru_time, buffered in memory and flushed at most
 * every 5 s (unflushed updates may be lost in a crash). The flush runs under the group lock and
 * only touches blocks that still have a location, so it never resurrects a removed block.
 */
import type { Logger } from '../../shared/log/logger.js';
import type { MetaStore, StoreMutation } from '../store/meta-store.js';
import type { GroupLock } from './group-lock.js';

export const HIT_FLUSH_INTERVAL_MS = 5000;
/**
 * Keys read and written per transaction (§9.1 allows ≤ 1000 rows). Between two slices the flush
 * yields to the event loop: a 4096-key flush measured 75–175 ms as one synchronous task, which
 * every lookup arriving meanwhile waited for; a slice is ~5–10 ms.
 */
const FLUSH_SLICE = 256;

interface PendingHits {
  readonly groupName: string;
  readonly keys: Map<bigint, { count: number; lastHitUs: bigint }>;
}

export class HitStatistics {
  private pending = new Map<string, PendingHits>();
  private timer: NodeJS.Timeout | null = null;
  private flushing: Promise<void> | null = null;

  constructor(
    private readonly store: MetaStore,
    private readonly lock: GroupLock,
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
  record(instanceId: string, groupName: string, blockKey: bigint, nowUs: bigint): void {
    let p = this.pending.get(instanceId);
    if (p === undefined) {
      p = { groupName, keys: new Map() };
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
        const keys = [...p.keys.keys()];
        for (let i = 0; i < keys.length; i += FLUSH_SLICE) {
          if (i > 0) await yieldToEventLoop();
          // The group lock is taken per slice, so writers of the group wait for one slice at most;
          // each slice reads its blocks right before writing them, under the lock.
          const slice = keys.slice(i, i + FLUSH_SLICE);
          await this.lock.run(p.groupName, async () => {
            const blocks = await this.store.getBlocks(instanceId, slice);
            const muts: StoreMutation[] = [];
            for (const key of slice) {
              const block = blocks.get(key);
              const hit = p.keys.get(key);
              if (hit === undefined || block === undefined || block.locations.length === 0) continue;
              const prev = Number.parseInt(block.properties['BP#hit_count'] ?? '0', 10);
              const count = (Number.isFinite(prev) ? prev : 0) + hit.count;
              muts.push({
                op: 'mergeProperties',
                instanceId,
                blockKey: key,
                properties: { 'BP#hit_count': String(count), 'BP#lru_time': hit.lastHitUs.toString() },
              });
            }
            if (muts.length > 0) await this.store.apply(muts);
          });
        }
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
