// kv-events §5 and §6 "Building" as a property of the pure StreamIndex: random batches of decoded
// events (valid and invalid: unknown parents, key conflicts, wrong token counts, out-of-scope
// blocks, tier removals and clears, a small entry budget) applied to the index and to a literal
// Map-based reading of the spec below must agree after every batch: the same error class, or the
// same records, entry count, residency per content key (exportResidency, residencyOf, the §8 block
// counts, prefix walks) — and the residency the index REPORTED through onResidencyChange (what
// the view stream publishes) must add up to the same thing.
//
// Hashes come from a small universe with shared low words (open-addressing collisions) and the
// tokens from a three-block alphabet, so different hashes often share a content key (residency
// is a union) and records are deleted and re-created all the time.
// FC_INDEX_RUNS lengthens the run, FC_SEED reproduces one.
import { expect } from 'chai';
import fc from 'fast-check';
import { ContentKeyHasher } from '../../shared/keys/content-key.js';
import { PLAIN_IDENTITY } from '../../shared/keys/cache-identity.js';
import type { EngineHash, KvEvent, SnapshotBlock } from '../../directory-svc/decoder/kv-batch.js';
import type { TierBits } from '../../shared/keys/tier-bits.js';
import { isStreamError } from '../../directory-svc/errors/stream-errors.js';
import { StreamIndex } from '../../directory-svc/index/stream-index.js';
import { envInt } from '../helpers/env-int.js';
import { groupHits, slotHits } from '../helpers/index-prefix.js';
import { ResidencyGroups } from '../../shared/index/residency-groups.js';
import { ServedResidency } from '../../directory-svc/index/served-residency.js';

const RUNS = envInt('FC_INDEX_RUNS', 400);
const FC_SEED = process.env['FC_SEED'];
const BS = 4;

/** 24 hashes; many share their low 32 bits, some use the top bit. */
const UNIVERSE: readonly bigint[] = Array.from({ length: 24 }, (_, i) => BigInt(1 + (i % 8)) | (BigInt(i >> 3) << 32n) | (i % 5 === 0 ? 1n << 63n : 0n));

const tokensOf = (blocks: readonly number[]): Int32Array => Int32Array.from(blocks.flatMap((t) => [t * 4 + 1, t * 4 + 2, t * 4 + 3, t * 4 + 4]));

type Step = { kind: 'batch'; events: KvEvent[] };

const hashArb = fc.constantFrom(...UNIVERSE);
const tierArb = fc.constantFrom<1 | 2>(1, 2);

const storedArb: fc.Arbitrary<KvEvent> = fc
  .record({
    hashes: fc.array(hashArb, { minLength: 0, maxLength: 4 }),
    parent: fc.option(hashArb, { freq: 1 }),
    tokenBlocks: fc.array(fc.integer({ min: 0, max: 2 }), { maxLength: 4 }),
    mode: fc.oneof({ weight: 12, arbitrary: fc.constant('full') }, { weight: 4, arbitrary: fc.constant('tokenless') }, { weight: 1, arbitrary: fc.constant('wrong-count') }),
    blockSize: fc.oneof({ weight: 20, arbitrary: fc.constant<number | null>(BS) }, { weight: 1, arbitrary: fc.constantFrom<number | null>(BS + 1, null) }),
    tier: tierArb,
    outOfScope: fc.boolean(),
    rareScope: fc.integer({ min: 0, max: 9 }),
  })
  .map((r): KvEvent => {
    const n = r.hashes.length;
    const blocks = Array.from({ length: n }, (_, i) => r.tokenBlocks[i % Math.max(1, r.tokenBlocks.length)] ?? i % 3);
    let tokenIds = r.mode === 'tokenless' ? new Int32Array(0) : tokensOf(blocks);
    if (r.mode === 'wrong-count') tokenIds = Int32Array.from([...tokenIds, 7]);
    return {
      kind: 'stored',
      blockHashes: BigUint64Array.from(r.hashes),
      parentBlockHash: r.parent as EngineHash | null,
      tokenIds,
      blockSize: r.mode === 'tokenless' ? null : r.blockSize,
      tier: r.tier,
      outOfScope: r.outOfScope && r.rareScope === 0,
      identity: PLAIN_IDENTITY,
      reproducibleBlocks: n,
      group: 0,
      reusableGroup: true,
    };
  });

const eventArb: fc.Arbitrary<KvEvent> = fc.oneof(
  { weight: 6, arbitrary: storedArb },
  { weight: 3, arbitrary: fc.record({ kind: fc.constant('removed' as const), blockHashes: fc.array(hashArb, { maxLength: 4 }).map((h) => BigUint64Array.from(h)), tier: tierArb, group: fc.constant(0) }) },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('cleared' as const), tiers: fc.constantFrom<TierBits>(1, 2, 3) }) },
);

const snapshotArb = fc.array(
  fc.record({ hash: hashArb, parent: fc.option(hashArb, { freq: 2 }), block: fc.integer({ min: 0, max: 2 }), tiers: fc.constantFrom<TierBits>(1, 2, 3), outOfScope: fc.integer({ min: 0, max: 9 }).map((x) => x === 0), short: fc.integer({ min: 0, max: 29 }).map((x) => x === 0) }),
  { maxLength: 12 },
);

const scenarioArb = fc.record({
  maxEntries: fc.oneof(fc.integer({ min: 3, max: 12 }), fc.constant(1000)),
  snapshot: fc.option(snapshotArb, { freq: 3 }),
  batches: fc.array(fc.array(eventArb, { minLength: 0, maxLength: 4 }), { minLength: 1, maxLength: 40 }),
});

class RefError extends Error {
  constructor(readonly cls: 'protocol' | 'inconsistent' | 'limit') {
    super(cls);
  }
}

const POP = [0, 1, 1, 2];
const hexOf = (b: Uint8Array): string => Buffer.from(b).toString('hex');

/** §5 and §6 read literally: engine hash → {content key hex | null (UNINDEXED), tiers}. */
class ReferenceIndex {
  readonly records = new Map<bigint, { key: string | null; tiers: number }>();
  entries = 0;
  constructor(
    private readonly hasher: ContentKeyHasher,
    private readonly maxEntries: number,
  ) {}

  private key(parent: string | null, tokens: Int32Array, start: number): string {
    const out = new Uint8Array(16);
    this.hasher.keyInto(parent === null ? null : Buffer.from(parent, 'hex'), 0, tokens, start, BS, out, 0);
    return hexOf(out);
  }

  private setTiers(h: bigint, rec: { key: string | null; tiers: number }, tiers: number): void {
    const delta = POP[tiers]! - POP[rec.tiers]!;
    if (delta > 0 && this.entries + delta > this.maxEntries) throw new RefError('limit');
    this.entries += delta;
    rec.tiers = tiers;
    if (tiers === 0) this.records.delete(h);
  }

  private create(h: bigint, key: string | null, tiers: number): { key: string | null; tiers: number } {
    if (this.entries + POP[tiers]! > this.maxEntries) throw new RefError('limit');
    const rec = { key, tiers };
    this.records.set(h, rec);
    this.entries += POP[tiers]!;
    return rec;
  }

  apply(events: readonly KvEvent[]): void {
    for (const e of events) {
      if (e.kind === 'removed') {
        for (const h of e.blockHashes) {
          const rec = this.records.get(h);
          if (rec !== undefined) this.setTiers(h, rec, rec.tiers & ~e.tier);
        }
      } else if (e.kind === 'cleared') {
        for (const [h, rec] of [...this.records]) this.setTiers(h, rec, rec.tiers & ~e.tiers);
      } else if (e.tokenIds.length === 0) {
        // §5.1 tokenless
        if (e.parentBlockHash !== null && !e.outOfScope && !this.records.has(e.parentBlockHash)) throw new RefError('inconsistent');
        for (const h of e.blockHashes) {
          const rec = this.records.get(h);
          if (rec !== undefined) this.setTiers(h, rec, rec.tiers | e.tier);
          else if (!e.outOfScope) throw new RefError('inconsistent');
        }
      } else {
        // §5.1 token-bearing, rules 1–3
        const n = e.blockHashes.length;
        if (!e.outOfScope && (e.blockSize !== BS || e.tokenIds.length !== BS * n)) throw new RefError('protocol');
        let p: string | null | 'ROOT' = 'ROOT';
        if (e.outOfScope) p = null;
        else if (e.parentBlockHash !== null) {
          const parent = this.records.get(e.parentBlockHash);
          if (parent === undefined) throw new RefError('inconsistent');
          p = parent.key;
        }
        for (let i = 0; i < n; i++) {
          const h = e.blockHashes[i]!;
          const k = p === null ? null : this.key(p === 'ROOT' ? null : p, e.tokenIds, i * BS);
          let rec = this.records.get(h);
          if (rec === undefined) rec = this.create(h, k, e.tier);
          else {
            if (k !== null && rec.key !== null && rec.key !== k) throw new RefError('inconsistent');
            if (k !== null && rec.key === null) rec.key = k;
            this.setTiers(h, rec, rec.tiers | e.tier);
          }
          p = e.outOfScope ? null : rec.key;
        }
      }
    }
  }

  /** §6 Building, block by block without look-ahead. */
  addSnapshotBlock(b: SnapshotBlock): void {
    if (this.records.has(b.blockHash)) throw new RefError('protocol');
    if (b.tokenIds.length !== BS) throw new RefError('protocol');
    let key: string | null = null;
    if (!b.outOfScope) {
      if (b.parentBlockHash === null) key = this.key(null, b.tokenIds, 0);
      else {
        const parent = this.records.get(b.parentBlockHash);
        key = parent === undefined || parent.key === null ? null : this.key(parent.key, b.tokenIds, 0);
      }
    }
    this.create(b.blockHash, key, b.tiers);
  }

  residency(): Map<string, number> {
    const out = new Map<string, number>();
    for (const rec of this.records.values()) if (rec.key !== null) out.set(rec.key, (out.get(rec.key) ?? 0) | rec.tiers);
    return out;
  }
}

function exported(index: StreamIndex): Map<string, number> {
  const r = index.exportResidency();
  const out = new Map<string, number>();
  for (let i = 0; i < r.tiers.length; i++) out.set(hexOf(r.keys.subarray(i * 16, i * 16 + 16)), r.tiers[i]!);
  return out;
}

describe('kv-events §5/§6 property: StreamIndex equals a literal reading of the spec', function () {
  this.timeout(120_000);
  let hasher: ContentKeyHasher;

  before(async () => {
    hasher = await ContentKeyHasher.forSeed(1024n);
  });

  /**
   * `shared`: as in the directory, the index's keys are ids of its group (`keySpace`), it is
   * served into a slot of that group, and a shadow index (a fresh one being built beside it)
   * pins the same keys, so keys stay in the group after the served index lets them go: those must
   * neither count nor match, and once every index is disposed and the slot cleared, none is left.
   */
  const property = (mode: 'private' | 'shared', stats: { batches: number; errors: Record<string, number>; maxRecords: number }) =>
      fc.property(scenarioArb, ({ maxEntries, snapshot, batches }) => {
        // What onResidencyChange reported (the view stream's deltas), applied to a map.
        const reported = new Map<string, number>();
        const served = mode === 'shared' ? new ServedResidency(new ResidencyGroups(), BS, hasher) : null;
        let shadow: StreamIndex | null = null;
        const fresh = (): StreamIndex => {
          reported.clear();
          const created: StreamIndex = new StreamIndex({
            blockSize: BS,
            hasher,
            maxEntries,
            ...(served === null ? {} : { keySpace: served.group }),
            onResidencyChange: (words, offset, _old, now) => {
              const key = hexOf(new Uint8Array(words.buffer, words.byteOffset + offset * 4, 16));
              if (now === 0) reported.delete(key);
              else reported.set(key, now);
              served?.change(created, words, offset, now);
            },
          });
          if (served !== null) {
            served.servedIndex?.dispose();
            served.serve(created);
            shadow?.dispose();
            shadow = new StreamIndex({ blockSize: BS, hasher, maxEntries, keySpace: served.group });
          }
          return created;
        };
        const both = (f: (i: StreamIndex) => void): void => {
          f(index);
          if (shadow === null) return;
          try {
            f(shadow);
          } catch {
            // The shadow sees what the index saw, so it fails alike; it is replaced with it.
          }
        };
        let index = fresh();
        let ref = new ReferenceIndex(hasher, maxEntries);
        const skipped = { outOfScope: 0, descendant: 0, orphan: 0 };
        let compares = 0;
        const compare = (where: string): void => {
          // Every other check, the slot is reloaded whole (a swap) instead of kept by the changes.
          if (served !== null && compares++ % 2 === 1) {
            served.serve(null);
            served.serve(index);
          }
          expect(index.recordCount, `${where}: records`).to.equal(ref.records.size);
          expect(index.entryCount, `${where}: entries`).to.equal(ref.entries);
          const want = ref.residency();
          expect(exported(index), `${where}: exportResidency`).to.deep.equal(want);
          expect(reported, `${where}: residency reported through onResidencyChange`).to.deep.equal(want);
          let dev = 0;
          let host = 0;
          for (const [key, t] of want) {
            expect(index.residencyOf(Buffer.from(key, 'hex'), 0), `${where}: residencyOf ${key}`).to.equal(t);
            dev += t & 1;
            host += t >> 1;
          }
          expect([index.deviceBlocks, index.hostBlocks], `${where}: §8 block counts`).to.deep.equal([dev, host]);
          // §8 prefix walks over the alphabet's chains: stop at the first absent key.
          for (const chain of [[0, 1, 2], [1, 1], [2, 0, 1], [0, 0, 0]]) {
            const keys = hasher.chain(tokensOf(chain), BS);
            // Through the services' path: the index mirrored into a shared group, matched there.
            const hit = groupHits(index, tokensOf(chain));
            let d = 0;
            let h = 0;
            for (let b = 0; b < chain.length; b++) {
              const t = want.get(hexOf(keys.subarray(b * 16, b * 16 + 16))) ?? 0;
              if (t === 0) break;
              if (t & 1) d++;
              else h++;
            }
            expect(hit, `${where}: matchPrefix ${chain}`).to.deep.equal({ deviceBlocks: d, hostOnlyBlocks: h });
            if (served !== null) expect(slotHits(served, tokensOf(chain)), `${where}: served slot ${chain}`).to.deep.equal({ deviceBlocks: d, hostOnlyBlocks: h });
          }
          if (served !== null) expect(served.group.keyCount, `${where}: group keys`).to.equal(want.size);
          stats.maxRecords = Math.max(stats.maxRecords, ref.records.size);
        };
        const outcome = (f: () => void): string => {
          try {
            f();
            return 'ok';
          } catch (e) {
            if (e instanceof RefError) return e.cls;
            if (isStreamError(e)) return e.class;
            throw e;
          }
        };
        if (snapshot !== null) {
          const blocks: SnapshotBlock[] = snapshot.map((s) => ({
            blockHash: s.hash as EngineHash,
            parentBlockHash: s.parent as EngineHash | null,
            tokenIds: s.short ? tokensOf([s.block]).subarray(1) : tokensOf([s.block]),
            tiers: s.tiers,
            outOfScope: s.outOfScope,
            multimodal: false,
            identity: PLAIN_IDENTITY,
          }));
          const got = outcome(() => {
            both((i) => {
              for (const b of blocks) i.addSnapshotBlock(b, skipped);
            });
          });
          const want = outcome(() => {
            for (const b of blocks) ref.addSnapshotBlock(b);
          });
          expect(got, 'snapshot build outcome').to.equal(want);
          if (got === 'ok') compare('after the snapshot');
          else {
            index = fresh();
            ref = new ReferenceIndex(hasher, maxEntries);
          }
        }
        batches.forEach((events, i) => {
          stats.batches++;
          const got = outcome(() => both((i) => i.applyEvents(events, skipped)));
          const want = outcome(() => ref.apply(events));
          expect(got, `batch ${i} outcome`).to.equal(want);
          if (got === 'ok') compare(`after batch ${i}`);
          else {
            stats.errors[got] = (stats.errors[got] ?? 0) + 1;
            // §5.2: not transactional, the stream discards the index; start over.
            index = fresh();
            ref = new ReferenceIndex(hasher, maxEntries);
          }
        });
        if (served !== null) {
          // Every pin given back and the slot cleared: the group holds nothing any more.
          index.dispose();
          (shadow as StreamIndex | null)?.dispose();
          served.serve(null);
          served.group.sweepOrphans(Number.POSITIVE_INFINITY);
          expect([served.group.keyCount, served.group.pinnedOnlyKeys, served.group.unsweptKeys], 'group after dispose').to.deep.equal([0, 0, 0]);
        }
      });

  for (const mode of ['private', 'shared'] as const) {
    const what = mode === 'shared' ? 'keys shared with the group and a shadow index' : 'a private key space';
    it(`after every batch: same error class, or same records, entries, residency and reported residency; ${what} (${RUNS} runs)`, () => {
      const stats = { batches: 0, errors: {} as Record<string, number>, maxRecords: 0 };
      fc.assert(property(mode, stats), { numRuns: RUNS, ...(FC_SEED !== undefined && FC_SEED !== '' ? { seed: Number(FC_SEED) } : {}) });
      console.log(`      ${JSON.stringify(stats)}`);
    });
  }
});
