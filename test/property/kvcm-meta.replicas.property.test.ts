// kvcm-meta §9.4 with two real meta-svc processes on one real redis-server, hammering the same
// keys from both replicas at once (issue 28: one answer per key across replicas). Each run is a
// random batch of concurrent startWriteCache calls over a small key space (both replicas, the
// same keys), the sessions finished on either replica, and lookups of those keys on both:
// - C-04 across replicas: each key is allocated by exactly one session, and holds at most one
//   writable location (one candidate storage, min_replica_count 1) before and after the finishes;
// - §5.4 across replicas: after both replicas stop (SIGTERM flushes their buffered statistics at
//   the same moment), every key's BP#hit_count is exactly the number of hits the lookups answered.
// A second property flushes two replicas' statistics of the same keys at exactly the same time
// (two HitStatistics over two Redis connections: the part of a replica that writes them), which
// the processes above only do when their flush timers happen to meet.
// Runs use disjoint key ranges, so nothing has to be reset between them. FC_SEED reproduces a
// run, FC_META_REPLICA_RUNS lengthens it.
//
//   fast-check ──HTTP──▶ meta-svc A ──┐
//              ──HTTP──▶ meta-svc B ──┴──▶ redis-server ◀── final read (RedisMetaStore)
import { expect } from 'chai';
import fc from 'fast-check';
import { CLS_SERVING } from '../../meta-svc/store/meta-store.js';
import { RedisMetaStore } from '../../meta-svc/store/redis-meta-store.js';
import { HitStatistics } from '../../meta-svc/write/hit-statistics.js';
import { silentLogger } from '../../shared/log/logger.js';
import { envInt } from '../helpers/env-int.js';
import { MetaProcess } from '../helpers/meta-process.js';
import { flushAll } from '../helpers/meta-stores.js';
import { RedisServer } from '../helpers/redis-server.js';

// eslint-disable-next-line @typescript-eslint/no-explicit-any -- loosely typed response JSON
type Json = any;

const RUNS = envInt('FC_META_REPLICA_RUNS', 12);
const FC_SEED = process.env['FC_SEED'];
const I = 'test_instance';
/** Keys in play per run: few, so concurrent calls collide on them. */
const KEYS = 8;

interface Call {
  readonly replica: 0 | 1;
  readonly keys: readonly number[];
  /** finishWriteCache: all new keys succeed, or none (then the locations are deleted). */
  readonly succeed: boolean;
  /** Which replica finishes the session. */
  readonly finishOn: 0 | 1;
}

interface Lookup {
  readonly replica: 0 | 1;
  readonly keys: readonly number[];
}

const keysArb = fc.uniqueArray(fc.integer({ min: 0, max: KEYS - 1 }), { minLength: 1, maxLength: 5 });
const callArb: fc.Arbitrary<Call> = fc.record({
  replica: fc.constantFrom(0 as const, 1 as const),
  keys: keysArb,
  succeed: fc.boolean(),
  finishOn: fc.constantFrom(0 as const, 1 as const),
});
const lookupArb: fc.Arbitrary<Lookup> = fc.record({ replica: fc.constantFrom(0 as const, 1 as const), keys: keysArb });

describe('kvcm-meta §9.4 two replicas on the same keys (issue 28)', function () {
  this.timeout(240000);
  let redis: RedisServer;
  let replicas: [MetaProcess, MetaProcess] | null = null;

  before(async () => {
    redis = await RedisServer.start();
    await flushAll(redis.port);
    replicas = [await MetaProcess.start(redis.url(), ['--node_id=prop-a']), await MetaProcess.start(redis.url(), ['--node_id=prop-b'])];
  });
  after(async () => {
    await Promise.all((replicas ?? []).map((p) => p.kill()));
    await redis.destroy();
  });

  it('C-04 and §5.4 across replicas: one allocation per key, and every hit counted once both replicas flushed', async () => {
    const [a, b] = replicas!;
    const on = (r: 0 | 1): MetaProcess => (r === 0 ? a : b);
    /** Absolute key → hits the lookups answered, over every run. */
    const hits = new Map<number, number>();
    let run = 0;
    await fc.assert(
      fc.asyncProperty(fc.array(callArb, { minLength: 3, maxLength: 8 }), fc.array(lookupArb, { minLength: 2, maxLength: 8 }), async (calls, lookups) => {
        const base = 1000 * ++run;
        const abs = (ks: readonly number[]): number[] => ks.map((k) => base + k);
        // All calls at once, half on each replica.
        const opened: Json[] = await Promise.all(calls.map((c) => on(c.replica).call('startWriteCache', { instance_id: I, block_keys: abs(c.keys) })));
        const allocatedBy = new Map<number, number>();
        opened.forEach((r, i) => {
          expect(r.header.status.code, JSON.stringify(r.header)).to.equal('OK');
          const keys = abs((calls[i] as Call).keys);
          const exists: boolean[] = r.block_mask.bool_masks?.values ?? keys.map((_, j) => j < (r.block_mask.offset ?? 0));
          keys.forEach((k, j) => {
            if (!exists[j]) allocatedBy.set(k, (allocatedBy.get(k) ?? 0) + 1);
          });
          expect(r.locations).to.have.length(exists.filter((e) => !e).length);
        });
        // Each key allocated by one session at most, and stored once.
        for (const [k, n] of allocatedBy) expect(n, `key ${k} allocated ${n} times`).to.equal(1);
        const inRun = abs([...Array(KEYS).keys()]);
        const writable = async (): Promise<number[]> => {
          const d = await a.call('getCacheMetaDetail', { instance_id: I, block_keys: inRun });
          return d.items.map((it: Json) => it.locations.filter((l: Json) => l.status === 'CLS_WRITING' || l.status === 'CLS_SERVING').length);
        };
        (await writable()).forEach((n, j) => expect(n, `key ${inRun[j]}`).to.equal(allocatedBy.has(inRun[j] as number) ? 1 : 0));

        // Finish every session on either replica, concurrently.
        const finished: Json[] = await Promise.all(
          calls.map((c, i) =>
            on(c.finishOn).call('finishWriteCache', {
              instance_id: I,
              write_session_id: opened[i].write_session_id,
              success_blocks: { offset: c.succeed ? opened[i].locations.length : 0 },
            }),
          ),
        );
        for (const f of finished) expect(f.header.status.code).to.equal('OK');
        const serving = new Set<number>();
        opened.forEach((r, i) => {
          if (!(calls[i] as Call).succeed) return;
          const keys = abs((calls[i] as Call).keys);
          const exists: boolean[] = r.block_mask.bool_masks?.values ?? keys.map((_, j) => j < (r.block_mask.offset ?? 0));
          keys.forEach((k, j) => {
            if (!exists[j]) serving.add(k);
          });
        });
        (await writable()).forEach((n, j) => expect(n, `key ${inRun[j]} after finish`).to.equal(serving.has(inRun[j] as number) ? 1 : 0));

        // Lookups on both replicas at once; a hit is whatever the answer says it is.
        const answers: Json[] = await Promise.all(lookups.map((l) => on(l.replica).call('getCacheLocation', { instance_id: I, block_keys: abs(l.keys), query_type: 'QT_BATCH_GET' })));
        answers.forEach((r, i) => {
          const keys = abs((lookups[i] as Lookup).keys);
          r.locations.forEach((loc: Json, j: number) => {
            const k = keys[j] as number;
            expect(loc.type !== 'ST_UNSPECIFIED', `key ${k} hit`).to.equal(serving.has(k));
            if (loc.type !== 'ST_UNSPECIFIED') hits.set(k, (hits.get(k) ?? 0) + 1);
          });
        });
      }),
      { numRuns: RUNS, ...(FC_SEED !== undefined ? { seed: Number(FC_SEED) } : {}) },
    );

    // Both replicas flush what they buffered, at the same moment (§9.3 stop, §5.4).
    expect(await Promise.all([a.stop(), b.stop()])).to.deep.equal([0, 0]);
    replicas = null;
    const store = await RedisMetaStore.open({ host: '127.0.0.1', port: redis.port, db: 0, namespace: 'default' });
    try {
      const keys = [...hits.keys()];
      const blocks = await store.getBlocks(I, keys.map(BigInt));
      const lost = keys.filter((k) => blocks.get(BigInt(k))?.properties['BP#hit_count'] !== String(hits.get(k)));
      expect(lost.map((k) => `${k}: ${blocks.get(BigInt(k))?.properties['BP#hit_count']} of ${hits.get(k)}`)).to.deep.equal([]);
      expect(keys.length).to.be.greaterThan(0);
    } finally {
      await store.close();
    }
  });
});

describe('kvcm-meta §5.4 statistics of two replicas flushed at the same moment (issue 28)', function () {
  this.timeout(120000);
  let redis: RedisServer;
  const stores: RedisMetaStore[] = [];
  before(async () => {
    redis = await RedisServer.start();
    for (let i = 0; i < 2; i++) stores.push(await RedisMetaStore.open({ host: '127.0.0.1', port: redis.port, db: 0, namespace: 'hits' }));
  });
  after(async () => {
    for (const s of stores.splice(0)) await s.close();
    await redis.destroy();
  });

  it('§5.4 every hit recorded on either replica is counted once, whatever the interleaving of their flushes', async () => {
    const [storeA, storeB] = stores as [RedisMetaStore, RedisMetaStore];
    let run = 0;
    const hitsArb = fc.array(fc.record({ replica: fc.constantFrom(0, 1), key: fc.integer({ min: 0, max: 39 }), us: fc.integer({ min: 1, max: 1e6 }) }), { minLength: 1, maxLength: 120 });
    await fc.assert(
      fc.asyncProperty(hitsArb, async (recorded) => {
        const base = 1000 * ++run;
        const instanceId = 'hits';
        await storeA.apply(
          Array.from({ length: 40 }, (_, k) => ({
            op: 'putLocation' as const,
            instanceId,
            blockKey: BigInt(base + k),
            location: { locationId: 'L', storageName: 'local_file', type: 4, status: CLS_SERVING, createTimeUs: 1n, specs: [{ name: 'tp0', uri: 'file://x' }] },
          })),
        );
        const stats = [new HitStatistics(storeA, silentLogger), new HitStatistics(storeB, silentLogger)];
        const expected = new Map<number, { count: number; last: number }>();
        for (const h of recorded) {
          (stats[h.replica] as HitStatistics).record(instanceId, BigInt(base + h.key), BigInt(h.us));
          const e = expected.get(base + h.key) ?? { count: 0, last: 0 };
          expected.set(base + h.key, { count: e.count + 1, last: Math.max(e.last, h.us) });
        }
        await Promise.all(stats.map((s) => s.flush()));
        const blocks = await storeB.getBlocks(instanceId, [...expected.keys()].map(BigInt));
        for (const [k, e] of expected) {
          expect(blocks.get(BigInt(k))?.properties, `key ${k}`).to.deep.equal({ 'BP#hit_count': String(e.count), 'BP#lru_time': String(e.last) });
        }
      }),
      { numRuns: 50, ...(FC_SEED !== undefined ? { seed: Number(FC_SEED) } : {}) },
    );
  });
});
