/**
 * The SessionBook on Redis (kvcm-meta §9.4). Keys beside the store's:
 *
 *   <ns>ws            hash  session id → SessionRecord JSON
 *   <ns>ws:deadline   zset  session id scored by its deadline (ms since epoch)
 *
 * `take` is one script (read, then delete both entries), so a finish on one replica and an
 * expiry on another cannot both win.
 */
import type { Redis } from 'ioredis';
import { decodeSessionRecord, encodeSessionRecord, type SessionBook, type SessionRecord } from '../write/session-book.js';

const TAKE_SCRIPT = `
local v = redis.call('HGET', KEYS[1], ARGV[1])
if v then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('ZREM', KEYS[2], ARGV[1])
end
return v`;

export class RedisSessionBook implements SessionBook {
  private readonly records: string;
  private readonly deadlines: string;

  constructor(
    private readonly redis: Redis,
    prefix: string,
  ) {
    this.records = `${prefix}ws`;
    this.deadlines = `${prefix}ws:deadline`;
  }

  async put(rec: SessionRecord): Promise<void> {
    await this.redis.multi().hset(this.records, rec.id, encodeSessionRecord(rec)).zadd(this.deadlines, rec.deadlineMs, rec.id).exec();
  }

  async peek(id: string): Promise<SessionRecord | null> {
    const text = await this.redis.hget(this.records, id);
    return text === null ? null : decodeSessionRecord(text);
  }

  async take(id: string): Promise<SessionRecord | null> {
    const text = (await this.redis.eval(TAKE_SCRIPT, 2, this.records, this.deadlines, id)) as string | null;
    return text === null ? null : decodeSessionRecord(text);
  }

  async takeExpired(nowMs: number, limit: number): Promise<SessionRecord[]> {
    const ids = await this.redis.zrangebyscore(this.deadlines, '-inf', nowMs, 'LIMIT', 0, limit);
    const out: SessionRecord[] = [];
    for (const id of ids) {
      const rec = await this.take(id);
      if (rec !== null) out.push(rec);
    }
    return out;
  }

  async cancelInstance(instanceId: string): Promise<number> {
    const all = await this.redis.hgetall(this.records);
    let n = 0;
    for (const [id, text] of Object.entries(all)) {
      if (decodeSessionRecord(text).instanceId !== instanceId) continue;
      if ((await this.take(id)) !== null) n++;
    }
    return n;
  }
}
