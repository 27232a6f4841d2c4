/**
 * The background-work lease of kvcm-meta §9.4: expiry, cleanup and session sweeps run on one
 * replica at a time. `SET key <holder> NX PX ttl` takes it; the holder renews it every ttl/3 with
 * a compare-and-expire script; a dead holder's lease simply expires and the next replica to try
 * takes over (R4: within 2 × ttl). Losing Redis loses the lease: `held` turns false at once.
 */
import type { Redis } from 'ioredis';

const RENEW_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_SCRIPT = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface LeaseOptions {
  readonly redis: Redis;
  readonly key: string;
  /** Unique per process (node_id plus a random suffix: two replicas may share a node_id by mistake). */
  readonly holder: string;
  readonly ttlMs: number;
  /** Called when this replica gains or loses the lease (logs). */
  readonly onChange?: (held: boolean) => void;
}

export class BackgroundLease {
  private heldValue = false;
  private timer: ReturnType<typeof setInterval> | null = null;
  private ticking: Promise<void> | null = null;

  constructor(private readonly opts: LeaseOptions) {}

  /** True while this replica holds the lease (as of the last renewal). */
  get held(): boolean {
    return this.heldValue && this.opts.redis.status === 'ready';
  }

  start(): void {
    if (this.timer) return;
    void this.tick();
    this.timer = setInterval(() => void this.tick(), Math.max(50, Math.floor(this.opts.ttlMs / 3)));
    this.timer.unref();
  }

  /** Stops renewing and releases the lease so another replica takes over at once. */
  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    await this.ticking;
    if (this.heldValue) {
      this.set(false);
      await this.opts.redis.eval(RELEASE_SCRIPT, 1, this.opts.key, this.opts.holder).catch(() => undefined);
    }
  }

  /** One acquire-or-renew attempt; public so tests can drive it. */
  tick(): Promise<void> {
    this.ticking ??= this.attempt().finally(() => (this.ticking = null));
    return this.ticking;
  }

  private async attempt(): Promise<void> {
    const { redis, key, holder, ttlMs } = this.opts;
    try {
      if (this.heldValue) {
        const renewed = Number(await redis.eval(RENEW_SCRIPT, 1, key, holder, String(ttlMs)));
        if (renewed === 1) return;
      }
      const taken = await redis.set(key, holder, 'PX', ttlMs, 'NX');
      this.set(taken === 'OK');
    } catch {
      this.set(false);
    }
  }

  private set(held: boolean): void {
    if (held === this.heldValue) return;
    this.heldValue = held;
    this.opts.onChange?.(held);
  }
}
