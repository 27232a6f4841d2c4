// MetaStore contract (kvcm-meta §9.2, §9.4), one behaviour suite run unchanged against every
// implementation: SQLite, and Redis on a real redis-server this file starts (free loopback port,
// persistence off). SQLite-only behaviour (schema versions) is tested after the shared contract.
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import Database from 'better-sqlite3';
import {
  CLS_DELETING,
  CLS_SERVING,
  CLS_WRITING,
  StoreConflictError,
  StoreError,
  type InstanceRecord,
  type LocationHead,
  type MetaStore,
  type StoredLocation,
} from '../../../meta-svc/store/meta-store.js';
import { SqliteMetaStore } from '../../../meta-svc/store/sqlite-meta-store.js';
import { SCHEMA_VERSION } from '../../../meta-svc/store/sqlite-schema.js';
import { InstrumentedMetaStore } from '../../../meta-svc/store/instrumented-meta-store.js';
import { RedisMetaStore } from '../../../meta-svc/store/redis-meta-store.js';
import { RedisServer } from '../../helpers/redis-server.js';

/** Creates a fresh, empty store; `reopen` (when the backend persists) reopens the same data. */
export interface MetaStoreFactory {
  create(): Promise<MetaStore>;
  reopen?(): Promise<MetaStore>;
  cleanup(): Promise<void>;
}

const INST = 'inst-a';

function instance(id: string, group = 'g1'): InstanceRecord {
  return {
    instanceId: id,
    instanceGroup: group,
    blockSize: 8,
    locationSpecInfos: [
      { name: 'tp0', size: 4096000n },
      { name: 'big', size: 9223372036854775807n },
    ],
    locationSpecGroups: [{ name: 'only_tp0', specNames: ['tp0'] }],
    modelDeployment: {
      modelName: 'm',
      dtype: 'fp16',
      useMla: false,
      tpSize: 1,
      dpSize: 1,
      loraName: '',
      ppSize: 1,
      extra: 'x',
      userData: 'u',
      useEaglePop: false,
    },
    defaultQueryType: 2,
  };
}

function loc(id: string, over: Partial<Omit<StoredLocation, 'rev'>> = {}): Omit<StoredLocation, 'rev'> {
  return {
    locationId: id,
    storageName: 'local_file',
    type: 4,
    status: CLS_SERVING,
    createTimeUs: 1710000000000000n,
    specs: [{ name: 'tp0', uri: `file://local_file/x/${id}_tp0?offset=0&size=1` }],
    ...over,
  };
}

export function describeMetaStoreContract(name: string, factory: MetaStoreFactory): void {
  describe(`MetaStore contract: ${name}`, () => {
    let store: MetaStore;

    beforeEach(async () => {
      store = await factory.create();
    });
    afterEach(async () => {
      await store.close().catch(() => undefined);
      await factory.cleanup();
    });

    it('§9.2 instances round-trip, list and count per group', async () => {
      expect(await store.getInstance('nope')).to.equal(null);
      await store.putInstance(instance('a'));
      await store.putInstance(instance('b'));
      await store.putInstance(instance('c', 'g2'));
      const a = await store.getInstance('a');
      expect(a).to.deep.equal(instance('a'));
      expect(a?.locationSpecInfos[1].size).to.equal(9223372036854775807n);
      expect((await store.listInstances()).map((r) => r.instanceId).sort()).to.deep.equal(['a', 'b', 'c']);
      expect(await store.countInstances('g1')).to.equal(2);
      expect(await store.countInstances('g2')).to.equal(1);
      expect(await store.countInstances('none')).to.equal(0);
      await store.putInstance({ ...instance('a'), defaultQueryType: 1 });
      expect((await store.getInstance('a'))?.defaultQueryType).to.equal(1);
      expect(await store.countInstances('g1')).to.equal(2);
    });

    it('§9.2 putLocation inserts then replaces with rev+1; getBlocks returns only existing keys', async () => {
      const r1 = await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: -1n, location: loc('AAAAAAAA') }]);
      expect(r1).to.deep.equal([{ applied: true, rev: 1 }]);
      const r2 = await store.apply([
        { op: 'putLocation', instanceId: INST, blockKey: -1n, location: loc('AAAAAAAA', { status: CLS_WRITING }) },
      ]);
      expect(r2).to.deep.equal([{ applied: true, rev: 2 }]);
      const blocks = await store.getBlocks(INST, [-1n, 5n]);
      expect([...blocks.keys()]).to.deep.equal([-1n]);
      const b = blocks.get(-1n);
      expect(b?.properties).to.deep.equal({});
      expect(b?.locations).to.deep.equal([{ ...loc('AAAAAAAA', { status: CLS_WRITING }), rev: 2 }]);
      expect((await store.getBlocks('other', [-1n])).size).to.equal(0);
    });

    it('§9.2 specs keep their stored order and any name (D-08: unregistered, `#`, `:`, `=`, non-ASCII), through put and replaceSpecsIf', async () => {
      // §5.3 merges a source's specs "in stored order", and §7.4 lets reporters name specs freely.
      const names = ['zeta', 'a#b', 'full_attention:group=0:tp=0', 'linear_0', 'ünï', 'alpha'];
      const specs = names.map((n, i) => ({ name: n, uri: `x://h/${i}?s_version=${'a'.repeat(32)}` }));
      const id = 'kvs#event_report_l2#mem#10.0.0.1:80';
      const put = await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 7n, location: loc(id, { type: 8, storageName: 'event_report_l2', specs }) }]);
      expect((await store.getBlocks(INST, [7n])).get(7n)?.locations[0]?.specs).to.deep.equal(specs);
      const reversed = [...specs].reverse();
      await store.apply([{ op: 'replaceSpecsIf', instanceId: INST, blockKey: 7n, locationId: id, specs: reversed, expectRev: put[0]?.rev }]);
      expect((await store.getBlocks(INST, [7n])).get(7n)?.locations[0]?.specs).to.deep.equal(reversed);
    });

    it('§9.2 int64 extremes are exact as block keys and create times', async () => {
      const keys = [-9223372036854775808n, 9223372036854775807n, 9007199254740993n];
      await store.apply(
        keys.map((k) => ({
          op: 'putLocation' as const,
          instanceId: INST,
          blockKey: k,
          location: loc('LOC00001', { createTimeUs: 9007199254740993n }),
        })),
      );
      const blocks = await store.getBlocks(INST, keys);
      expect([...blocks.keys()]).to.deep.equal(keys);
      expect(blocks.get(keys[2])?.locations[0].createTimeUs).to.equal(9007199254740993n);
    });

    it('§9.2 conditional ops compare rev; a mismatch or a missing row is applied=false', async () => {
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 1n, location: loc('L1', { status: CLS_WRITING }) }]);
      const res = await store.apply([
        { op: 'setStatusIf', instanceId: INST, blockKey: 1n, locationId: 'L1', status: CLS_SERVING, expectRev: 7 },
        { op: 'setStatusIf', instanceId: INST, blockKey: 1n, locationId: 'L1', status: CLS_SERVING, expectRev: 1 },
        { op: 'setStatusIf', instanceId: INST, blockKey: 1n, locationId: 'nope', status: CLS_SERVING },
        { op: 'replaceSpecsIf', instanceId: INST, blockKey: 1n, locationId: 'L1', specs: [{ name: 'a', uri: 'x://a' }], expectRev: 2 },
        { op: 'replaceSpecsIf', instanceId: INST, blockKey: 1n, locationId: 'L1', specs: [], expectRev: 2 },
        { op: 'deleteLocationIf', instanceId: INST, blockKey: 1n, locationId: 'L1', expectRev: 2 },
      ]);
      expect(res).to.deep.equal([
        { applied: false },
        { applied: true, rev: 2 },
        { applied: false },
        { applied: true, rev: 3 },
        { applied: false },
        { applied: false },
      ]);
      const l = (await store.getBlocks(INST, [1n])).get(1n)?.locations[0];
      expect(l?.status).to.equal(CLS_SERVING);
      expect(l?.specs).to.deep.equal([{ name: 'a', uri: 'x://a' }]);
      expect(l?.rev).to.equal(3);
      const del = await store.apply([{ op: 'deleteLocationIf', instanceId: INST, blockKey: 1n, locationId: 'L1', expectRev: 3 }]);
      expect(del[0].applied).to.equal(true);
      expect((await store.getBlocks(INST, [1n])).size).to.equal(0);
    });

    it('§9.2 unconditional ops ignore rev', async () => {
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 1n, location: loc('L1') }]);
      const res = await store.apply([
        { op: 'setStatusIf', instanceId: INST, blockKey: 1n, locationId: 'L1', status: CLS_DELETING },
        { op: 'deleteLocationIf', instanceId: INST, blockKey: 1n, locationId: 'L1' },
      ]);
      expect(res).to.deep.equal([{ applied: true, rev: 2 }, { applied: true }]);
    });

    it('§9.2 a block without locations keeps its properties; without both it is gone', async () => {
      await store.apply([
        { op: 'putLocation', instanceId: INST, blockKey: 2n, location: loc('L1') },
        { op: 'mergeProperties', instanceId: INST, blockKey: 2n, properties: { 'BP#prev_key': '', 'BP#hit_count': '1' } },
        { op: 'mergeProperties', instanceId: INST, blockKey: 2n, properties: { 'BP#hit_count': '2' } },
      ]);
      let b = (await store.getBlocks(INST, [2n])).get(2n);
      expect(b?.properties).to.deep.equal({ 'BP#prev_key': '', 'BP#hit_count': '2' });
      await store.apply([{ op: 'deleteLocationIf', instanceId: INST, blockKey: 2n, locationId: 'L1' }]);
      b = (await store.getBlocks(INST, [2n])).get(2n);
      expect(b?.locations).to.deep.equal([]);
      expect(b?.properties['BP#hit_count']).to.equal('2');
      await store.apply([{ op: 'deleteBlock', instanceId: INST, blockKey: 2n }]);
      expect((await store.getBlocks(INST, [2n])).size).to.equal(0);
    });

    it('§9.2 deleteBlock removes every location and the properties of that key only', async () => {
      await store.apply([
        { op: 'putLocation', instanceId: INST, blockKey: 3n, location: loc('L1') },
        { op: 'putLocation', instanceId: INST, blockKey: 3n, location: loc('kvs#event_report_l2#gpu#h:1', { type: 8 }) },
        { op: 'mergeProperties', instanceId: INST, blockKey: 3n, properties: { p: 'v' } },
        { op: 'putLocation', instanceId: INST, blockKey: 4n, location: loc('L1') },
        { op: 'putLocation', instanceId: 'other', blockKey: 3n, location: loc('L1') },
      ]);
      expect((await store.getBlocks(INST, [3n])).get(3n)?.locations.length).to.equal(2);
      await store.apply([{ op: 'deleteBlock', instanceId: INST, blockKey: 3n }]);
      expect([...(await store.getBlocks(INST, [3n, 4n])).keys()]).to.deep.equal([4n]);
      expect((await store.getBlocks('other', [3n])).size).to.equal(1);
    });

    it('§9.2 the forWrite hint never changes what getBlocks returns, before or after a write', async () => {
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 1n, location: loc('L1') }]);
      const plain = await store.getBlocks(INST, [1n, 2n]);
      const hinted = await store.getBlocks(INST, [1n, 2n, 1n], { forWrite: true });
      expect([...hinted.entries()]).to.deep.equal([...plain.entries()]);
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 2n, location: loc('L2') }]);
      expect([...(await store.getBlocks(INST, [2n], { forWrite: true })).keys()]).to.deep.equal([2n]);
      expect([...(await store.getBlocks(INST, [1n, 2n])).keys()]).to.deep.equal([1n, 2n]);
    });

    it('§9.2 a large batch of new, existing and repeated rows gives each op its row-by-row result', async () => {
      // 300 puts (several multi-row chunks in the SQLite store) over keys some of which exist,
      // one key repeated inside a chunk, and a non-put op in the middle.
      await store.apply([50n, 130n, 299n].map((k) => ({ op: 'putLocation' as const, instanceId: INST, blockKey: k, location: loc('L') })));
      const revs = new Map<bigint, number>([[50n, 1], [130n, 1], [299n, 1]]);
      const batch: Parameters<MetaStore['apply']>[0][number][] = [];
      for (let k = 0n; k < 300n; k++) {
        batch.push({ op: 'putLocation', instanceId: INST, blockKey: k === 70n ? 69n : k, location: loc('L', { createTimeUs: k }) });
        if (k === 200n) batch.push({ op: 'setStatusIf', instanceId: INST, blockKey: 199n, locationId: 'L', status: CLS_WRITING });
      }
      const expected = batch.map((m) => {
        const rev = (revs.get(m.blockKey) ?? 0) + 1;
        revs.set(m.blockKey, rev);
        return { applied: true, rev };
      });
      expect(await store.apply(batch)).to.deep.equal(expected);
      const blocks = await store.getBlocks(INST, [0n, 69n, 70n, 130n, 199n, 299n]);
      expect([...blocks.keys()]).to.deep.equal([0n, 69n, 130n, 199n, 299n]);
      expect(blocks.get(69n)?.locations[0]).to.deep.include({ createTimeUs: 70n, rev: 2 });
      expect(blocks.get(130n)?.locations[0]).to.deep.include({ createTimeUs: 130n, rev: 2 });
      expect(blocks.get(199n)?.locations[0]).to.deep.include({ status: CLS_WRITING, rev: 2 });
      // A row that cannot be bound inside a full chunk still fails the whole batch.
      const bad = Array.from({ length: 100 }, (_, i) => ({ op: 'putLocation' as const, instanceId: INST, blockKey: i === 10 ? 1n << 70n : 1000n + BigInt(i), location: loc('L') }));
      let err: unknown;
      await store.apply(bad).catch((e: unknown) => (err = e));
      expect(err).to.be.instanceOf(StoreError);
      expect((await store.getBlocks(INST, [1000n, 1099n])).size).to.equal(0);
    });

    it('§9.2 apply is atomic: a failing op rolls back the whole batch', async () => {
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 1n, location: loc('L1') }]);
      let err: unknown;
      try {
        await store.apply([
          { op: 'deleteLocationIf', instanceId: INST, blockKey: 1n, locationId: 'L1' },
          { op: 'putLocation', instanceId: INST, blockKey: 2n, location: loc('L2') },
          // a bigint outside int64 cannot be bound: the store must fail the batch.
          { op: 'putLocation', instanceId: INST, blockKey: 1n << 70n, location: loc('L3') },
        ]);
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(StoreError);
      expect((err as StoreError).class).to.equal('store');
      const blocks = await store.getBlocks(INST, [1n, 2n]);
      expect([...blocks.keys()]).to.deep.equal([1n]);
    });

    it('§9.2 a read after each committed apply sees it (no stale reads, absent keys included)', async () => {
      expect((await store.getBlocks(INST, [5n, 6n])).size).to.equal(0);
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 5n, location: loc('L1') }]);
      expect([...(await store.getBlocks(INST, [5n, 6n])).keys()]).to.deep.equal([5n]);
      await store.apply([{ op: 'mergeProperties', instanceId: INST, blockKey: 5n, properties: { a: '1' } }]);
      expect((await store.getBlocks(INST, [5n])).get(5n)?.properties).to.deep.equal({ a: '1' });
      await store.apply([{ op: 'setStatusIf', instanceId: INST, blockKey: 5n, locationId: 'L1', status: CLS_DELETING }]);
      expect((await store.getBlocks(INST, [5n])).get(5n)?.locations[0].status).to.equal(CLS_DELETING);
      await store.apply([{ op: 'deleteBlock', instanceId: INST, blockKey: 5n }]);
      expect((await store.getBlocks(INST, [5n])).size).to.equal(0);
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 6n, location: loc('L2') }]);
      expect((await store.getBlocks(INST, [6n])).get(6n)?.locations.map((l) => l.locationId)).to.deep.equal(['L2']);
    });

    it('§9.2 getBlocks returns duplicate request keys once and lists a block’s locations in id order', async () => {
      await store.apply([
        { op: 'putLocation', instanceId: INST, blockKey: 9n, location: loc('Zz') },
        { op: 'putLocation', instanceId: INST, blockKey: 9n, location: loc('Aa') },
      ]);
      const blocks = await store.getBlocks(INST, [9n, 9n, 10n]);
      expect(blocks.size).to.equal(1);
      expect(blocks.get(9n)?.locations.map((l) => l.locationId)).to.deep.equal(['Aa', 'Zz']);
    });

    it('§9.2 scanLocations pages every match exactly once in a stable order, with filters', async () => {
      const muts = [];
      for (let k = 0; k < 25; k++) {
        muts.push({
          op: 'putLocation' as const,
          instanceId: k % 2 === 0 ? 'i1' : 'i2',
          blockKey: BigInt(k - 12),
          location: loc(`L${k % 3}`, { status: k % 5 === 0 ? CLS_WRITING : CLS_SERVING, createTimeUs: BigInt(1000 + k) }),
        });
        muts.push({
          op: 'putLocation' as const,
          instanceId: 'i1',
          blockKey: BigInt(k),
          location: loc(`kvs#event_report_l2#gpu#h${k % 2}`, { type: 8 }),
        });
      }
      await store.apply(muts);
      const all = await scanAll(store, null, {}, 7);
      expect(all.length).to.equal(50);
      const ids = all.map((s) => `${s.instanceId}/${s.blockKey}/${s.location.locationId}`);
      expect(new Set(ids).size).to.equal(50);

      const writing = await scanAll(store, null, { status: CLS_WRITING }, 2);
      expect(writing.length).to.equal(5);
      expect(writing.every((s) => s.location.status === CLS_WRITING)).to.equal(true);

      const h1 = await scanAll(store, 'i1', { locationIdPrefix: 'kvs#event_report_l2#gpu#h1' }, 3);
      expect(h1.length).to.equal(12);
      const exact = await scanAll(store, 'i1', { locationId: 'kvs#event_report_l2#gpu#h0' }, 100);
      expect(exact.length).to.equal(13);
      const timed = await scanAll(store, 'i2', { createdFromUs: 1005n, createdBeforeUs: 1011n }, 1);
      expect(timed.map((s) => s.location.createTimeUs)).to.deep.equal([1005n, 1007n, 1009n]);
      const page = await store.scanLocations('nobody', {}, null, 10);
      expect(page).to.deep.equal({ items: [], cursor: null });
    });

    it('§9.2 scanning while deleting the scanned rows still visits every row', async () => {
      const muts = [];
      for (let k = 0; k < 30; k++) muts.push({ op: 'putLocation' as const, instanceId: INST, blockKey: BigInt(k), location: loc('L1') });
      await store.apply(muts);
      let cursor: string | null = null;
      let seen = 0;
      do {
        const page: Awaited<ReturnType<MetaStore['scanLocations']>> = await store.scanLocations(INST, {}, cursor, 4);
        seen += page.items.length;
        await store.apply(
          page.items.map((s) => ({
            op: 'deleteLocationIf' as const,
            instanceId: s.instanceId,
            blockKey: s.blockKey,
            locationId: s.location.locationId,
            expectRev: s.location.rev,
          })),
        );
        cursor = page.cursor;
      } while (cursor !== null);
      expect(seen).to.equal(30);
      expect((await store.scanLocations(INST, {}, null, 10)).items.length).to.equal(0);
    });

    it('§7.5 mergeSpecs: ADD replaces a same-name spec in place and appends new ones, DELETE drops named ones, one row per (key, id)', async () => {
      const id = 'kvs#event_report_l2#gpu#10.0.0.1:80';
      const head: LocationHead = { locationId: id, storageName: 'event_report_l2', type: 8, status: CLS_SERVING, createTimeUs: 5n };
      const merge = (put: { name: string; uri: string }[], remove: string[] = [], createTimeUs = 5n) =>
        store.apply([{ op: 'mergeSpecs', instanceId: INST, blockKey: 11n, location: { ...head, createTimeUs }, put, remove }]);
      const specsOf = async () => (await store.getBlocks(INST, [11n])).get(11n)?.locations.map((l) => ({ specs: l.specs, ctime: l.createTimeUs, rev: l.rev }));
      // A missing row with only removes: nothing is written, every remove name is missing.
      expect(await merge([], ['tp9'])).to.deep.equal([{ applied: true, missing: 1 }]);
      expect((await store.getBlocks(INST, [11n])).size).to.equal(0);
      expect(await merge([{ name: 'tp0', uri: 'x://a/0' }, { name: 'tp1', uri: 'x://a/1' }])).to.deep.equal([{ applied: true, rev: 1 }]);
      // Same specs again: unchanged, no rev bump.
      expect(await merge([{ name: 'tp1', uri: 'x://a/1' }])).to.deep.equal([{ applied: true, rev: 1 }]);
      // tp0 replaced in place (ctime of the row kept), tp2 appended, a `"` and `\` in a name survive.
      const odd = 'q"\\x';
      expect(await merge([{ name: 'tp0', uri: 'x://b/0' }, { name: 'tp2', uri: 'x://b/2' }, { name: odd, uri: 'x://b/q' }], [], 99n)).to.deep.equal([{ applied: true, rev: 2 }]);
      expect(await specsOf()).to.deep.equal([
        {
          specs: [
            { name: 'tp0', uri: 'x://b/0' },
            { name: 'tp1', uri: 'x://a/1' },
            { name: 'tp2', uri: 'x://b/2' },
            { name: odd, uri: 'x://b/q' },
          ],
          ctime: 5n,
          rev: 2,
        },
      ]);
      expect(await merge([{ name: 'tp3', uri: 'x://c/3' }], [odd, 'tp1', 'nope'])).to.deep.equal([{ applied: true, rev: 3, missing: 1 }]);
      expect((await specsOf())?.[0]?.specs.map((x) => x.name)).to.deep.equal(['tp0', 'tp2', 'tp3']);
      // The last specs removed: the row goes (and the block, which has nothing else).
      expect(await merge([], ['tp0', 'tp2', 'tp3'])).to.deep.equal([{ applied: true }]);
      expect((await store.getBlocks(INST, [11n])).size).to.equal(0);
      expect((await store.scanLocations(INST, {}, null, 10)).items).to.deep.equal([]);
    });

    it('§7.5 putLocation keepCreateTime keeps a stored row\'s create_time and takes the given one for a new row', async () => {
      const put = (createTimeUs: bigint) =>
        store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 12n, location: loc('kvs#event_report_l2#gpu#h:1', { type: 8, createTimeUs }), keepCreateTime: true }]);
      expect(await put(10n)).to.deep.equal([{ applied: true, rev: 1 }]);
      expect(await put(20n)).to.deep.equal([{ applied: true, rev: 2 }]);
      expect((await store.getBlocks(INST, [12n])).get(12n)?.locations[0]).to.deep.include({ createTimeUs: 10n, rev: 2 });
    });

    it('§5.4 addHits adds to BP#hit_count, keeps the later BP#lru_time and skips a block without a location', async () => {
      await store.apply([{ op: 'putLocation', instanceId: INST, blockKey: 13n, location: loc('L1') }]);
      const hits = (count: number, lastHitUs: bigint, blockKey = 13n) => store.apply([{ op: 'addHits', instanceId: INST, blockKey, count, lastHitUs }]);
      expect(await hits(2, 1000n)).to.deep.equal([{ applied: true }]);
      expect(await hits(3, 900n)).to.deep.equal([{ applied: true }]);
      expect((await store.getBlocks(INST, [13n])).get(13n)?.properties).to.deep.equal({ 'BP#hit_count': '5', 'BP#lru_time': '1000' });
      expect(await hits(1, 10000n)).to.deep.equal([{ applied: true }]);
      expect((await store.getBlocks(INST, [13n])).get(13n)?.properties).to.deep.equal({ 'BP#hit_count': '6', 'BP#lru_time': '10000' });
      expect(await hits(1, 1n, 14n)).to.deep.equal([{ applied: false }]);
      expect((await store.getBlocks(INST, [14n])).size).to.equal(0);
    });

    it('C-04 createLocationIf refuses the whole batch when another writer allocated the key first', async () => {
      const create = (blockKey: bigint, id: string, storageName = 'local_file', maxWritable = 1) => ({
        op: 'createLocationIf' as const,
        instanceId: INST,
        blockKey,
        location: loc(id, { status: CLS_WRITING, storageName }),
        maxWritable,
      });
      expect(await store.apply([create(20n, 'A1'), { op: 'mergeProperties', instanceId: INST, blockKey: 20n, properties: { 'BP#prev_key': '' } }, create(21n, 'A2')])).to.deep.equal([
        { applied: true, rev: 1 },
        { applied: true },
        { applied: true, rev: 1 },
      ]);
      // 21 now holds a writable location: a second allocation of it fails the batch, 22 included.
      let err: unknown;
      await store.apply([create(22n, 'B1'), create(21n, 'B2')]).catch((e: unknown) => (err = e));
      expect(err).to.be.instanceOf(StoreConflictError);
      expect((err as StoreConflictError).index).to.equal(1);
      expect((await store.getBlocks(INST, [22n])).size).to.equal(0);
      // Another storage while below min_replica_count is fine; event-report and deleting rows never count.
      expect(await store.apply([create(21n, 'B3', 'other_file', 2)])).to.deep.equal([{ applied: true, rev: 1 }]);
      await store.apply([
        { op: 'putLocation', instanceId: INST, blockKey: 23n, location: loc('kvs#event_report_l2#gpu#h:1', { type: 8, storageName: 'event_report_l2' }) },
        { op: 'putLocation', instanceId: INST, blockKey: 23n, location: loc('OLD', { status: CLS_DELETING }) },
      ]);
      expect(await store.apply([create(23n, 'NEW')])).to.deep.equal([{ applied: true, rev: 1 }]);
      // The same id twice is a conflict too.
      err = undefined;
      await store.apply([create(24n, 'X', 'other_file', 5)]);
      await store.apply([create(24n, 'X', 'third_file', 5)]).catch((e: unknown) => (err = e));
      expect(err).to.be.instanceOf(StoreConflictError);
    });

    it('§9.2 calls after close throw StoreError', async () => {
      await store.close();
      let err: unknown;
      try {
        await store.getBlocks(INST, [1n]);
      } catch (e) {
        err = e;
      }
      expect(err).to.be.instanceOf(StoreError);
    });

    if (factory.reopen !== undefined) {
      const reopen = factory.reopen.bind(factory);
      it('§9.1 committed data survives close and reopen', async () => {
        await store.putInstance(instance('a'));
        await store.apply([
          { op: 'putLocation', instanceId: 'a', blockKey: 123n, location: loc('L1') },
          { op: 'mergeProperties', instanceId: 'a', blockKey: 123n, properties: { 'BP#prev_key': '' } },
        ]);
        await store.close();
        store = await reopen();
        expect(await store.getInstance('a')).to.deep.equal(instance('a'));
        const b = (await store.getBlocks('a', [123n])).get(123n);
        expect(b?.locations).to.deep.equal([{ ...loc('L1'), rev: 1 }]);
        expect(b?.properties).to.deep.equal({ 'BP#prev_key': '' });
      });
    }
  });
}

async function scanAll(
  store: MetaStore,
  instanceId: string | null,
  filter: Parameters<MetaStore['scanLocations']>[1],
  limit: number,
): Promise<Awaited<ReturnType<MetaStore['scanLocations']>>['items'][number][]> {
  const out = [];
  let cursor: string | null = null;
  do {
    const page: Awaited<ReturnType<MetaStore['scanLocations']>> = await store.scanLocations(instanceId, filter, cursor, limit);
    expect(page.items.length).to.be.at.most(limit);
    out.push(...page.items);
    cursor = page.cursor;
  } while (cursor !== null);
  return out;
}

function sqliteFactory(): MetaStoreFactory {
  let dir = '';
  return {
    async create() {
      dir = mkdtempSync(join(tmpdir(), 'kvcm-store-'));
      return SqliteMetaStore.open(join(dir, 'nested', 'kvcm.db'));
    },
    async reopen() {
      return SqliteMetaStore.open(join(dir, 'nested', 'kvcm.db'), { synchronous: 'FULL' });
    },
    async cleanup() {
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    },
  };
}

describeMetaStoreContract('SqliteMetaStore', sqliteFactory());

/** One redis-server for the file; every store gets its own key namespace, so tests never share data. */
function redisFactory(): MetaStoreFactory {
  let server: RedisServer | null = null;
  let namespace = '';
  let seq = 0;
  before(async () => {
    server = await RedisServer.start();
  });
  after(async () => {
    await server?.destroy();
  });
  const open = (): Promise<MetaStore> => RedisMetaStore.open({ host: '127.0.0.1', port: server!.port, db: 0, namespace });
  return {
    async create() {
      namespace = `contract-${process.pid}-${++seq}`;
      return open();
    },
    reopen: open,
    async cleanup() {},
  };
}

describe('Redis', () => {
  describeMetaStoreContract('RedisMetaStore', redisFactory());
});

// §9.3: the timing wrapper must keep the contract; every call observes its op.
const observedOps = new Set<string>();
function instrumentedFactory(): MetaStoreFactory {
  const inner = sqliteFactory();
  const wrap = (s: MetaStore): MetaStore => new InstrumentedMetaStore(s, { observe: (l) => observedOps.add(l.op) });
  return {
    create: async () => wrap(await inner.create()),
    reopen: async () => wrap(await (inner.reopen as () => Promise<MetaStore>)()),
    cleanup: () => inner.cleanup(),
  };
}
describeMetaStoreContract('InstrumentedMetaStore(SqliteMetaStore)', instrumentedFactory());
describe('InstrumentedMetaStore (kvcm-meta §9.3 store_tx_duration_seconds)', () => {
  it('§9.3 every store method is observed under its op name', () => {
    for (const op of ['getInstance', 'putInstance', 'listInstances', 'countInstances', 'getBlocks', 'apply', 'scanLocations']) {
      expect(observedOps.has(op), op).to.equal(true);
    }
  });
});

describe('SqliteMetaStore specifics (kvcm-meta §9.1)', () => {
  let dir: string;
  const opened: SqliteMetaStore[] = [];
  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'kvcm-store-'));
  });
  afterEach(async () => {
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    rmSync(dir, { recursive: true, force: true });
  });

  it('§9.1 opens with WAL, busy_timeout 5000, the requested synchronous and the current schema version', async () => {
    const path = join(dir, 'a', 'b', 'kvcm.db');
    opened.push(SqliteMetaStore.open(path, { synchronous: 'FULL' }));
    await opened[0].close();
    const db = new Database(path, { readonly: true });
    try {
      expect(db.pragma('journal_mode', { simple: true })).to.equal('wal');
      expect(db.pragma('user_version', { simple: true })).to.equal(SCHEMA_VERSION);
      const indexes = db.prepare("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'locations' AND sql IS NOT NULL").all();
      expect(indexes).to.deep.equal([{ name: 'locations_by_status' }]);
    } finally {
      db.close();
    }
  });

  it('§9.1 a version-1 database is migrated at open and keeps its rows', async () => {
    const path = join(dir, 'v1.db');
    const db = new Database(path);
    db.exec(`CREATE TABLE instances (instance_id TEXT PRIMARY KEY NOT NULL, instance_group TEXT NOT NULL, record TEXT NOT NULL) WITHOUT ROWID;
      CREATE INDEX instances_by_group ON instances(instance_group);
      CREATE TABLE locations (instance_id TEXT NOT NULL, block_key INTEGER NOT NULL, location_id TEXT NOT NULL, storage_name TEXT NOT NULL,
        type INTEGER NOT NULL, status INTEGER NOT NULL, create_time_us INTEGER NOT NULL, rev INTEGER NOT NULL, specs TEXT NOT NULL,
        PRIMARY KEY (instance_id, block_key, location_id)) WITHOUT ROWID;
      CREATE INDEX locations_by_status ON locations(status, instance_id, block_key, location_id);
      CREATE INDEX locations_by_id ON locations(location_id, instance_id, block_key);
      CREATE INDEX locations_by_create_time ON locations(instance_id, create_time_us);
      CREATE TABLE block_properties (instance_id TEXT NOT NULL, block_key INTEGER NOT NULL, properties TEXT NOT NULL,
        PRIMARY KEY (instance_id, block_key)) WITHOUT ROWID;
      INSERT INTO locations VALUES ('a', 7, 'L1', 'local_file', 4, 3, 5, 1, '[["tp0","file://x"]]');
      PRAGMA user_version = 1;`);
    db.close();
    const store = SqliteMetaStore.open(path);
    opened.push(store);
    const b = (await store.getBlocks('a', [7n])).get(7n);
    expect(b?.locations[0]).to.deep.equal({ ...loc('L1', { createTimeUs: 5n, specs: [{ name: 'tp0', uri: 'file://x' }] }), rev: 1 });
  });

  it('§9.2 a tiny block cache evicts and still answers exactly', async () => {
    const store = SqliteMetaStore.open(join(dir, 'small.db'), { blockCacheEntries: 4 });
    opened.push(store);
    const keys = Array.from({ length: 10 }, (_, i) => BigInt(i));
    await store.apply(keys.map((k) => ({ op: 'putLocation' as const, instanceId: 'a', blockKey: k, location: loc('L1') })));
    for (let round = 0; round < 3; round++) {
      expect((await store.getBlocks('a', [...keys, 99n])).size).to.equal(10);
      await store.apply([{ op: 'deleteBlock', instanceId: 'a', blockKey: BigInt(round) }]);
      expect((await store.getBlocks('a', keys)).size).to.equal(9);
      await store.apply([{ op: 'putLocation', instanceId: 'a', blockKey: BigInt(round), location: loc('L2') }]);
      expect((await store.getBlocks('a', [BigInt(round)])).get(BigInt(round))?.locations.map((l) => l.locationId)).to.deep.equal(['L2']);
    }
  });

  it('issue 28 rows staged on the worker\'s connection stay invisible until commitStage lands them in one transaction, create_time kept', async () => {
    const path = join(dir, 'kvcm.db');
    const main = SqliteMetaStore.open(path);
    const worker = SqliteMetaStore.open(path, { blockCacheEntries: 0 });
    opened.push(main, worker);
    const id = 'kvs#event_report_l2#gpu#h:1';
    const put = (k: bigint, uri: string, createTimeUs: bigint) => ({
      op: 'putLocation' as const,
      instanceId: 'a',
      blockKey: k,
      location: loc(id, { type: 8, storageName: 'event_report_l2', createTimeUs, specs: [{ name: 'tp0', uri }] }),
      keepCreateTime: true,
    });
    await main.apply([put(1n, 'x://old', 5n)]);
    expect((await main.getBlocks('a', [1n, 2n])).size).to.equal(1);
    worker.stageRows('s1', [put(1n, 'x://new/1', 99n), put(2n, 'x://new/2', 99n)]);
    worker.stageRows('s2', [put(3n, 'x://dropped', 99n)]);
    // Staged rows are invisible, and staging holds no lock: the main handle still writes.
    await main.apply([put(4n, 'x://main', 7n)]);
    expect([...(await main.getBlocks('a', [1n, 2n, 3n])).keys()]).to.deep.equal([1n]);
    expect((await main.getBlocks('a', [1n])).get(1n)?.locations[0]?.specs[0]?.uri).to.equal('x://old');
    // While the worker's write runs, the main handle's writes wait for it (without blocking).
    let landed = false;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const external = main.externalWrite('a', async () => {
      await gate;
      landed = true;
      return worker.commitStage('s1', 10);
    }, (r) => r.touched);
    const held = main.apply([put(5n, 'x://after', 7n)]).then(() => landed);
    release();
    expect((await external).rows).to.equal(2);
    expect(await held).to.equal(true);
    const b = await main.getBlocks('a', [1n, 2n]);
    expect(b.get(1n)?.locations[0]).to.deep.include({ createTimeUs: 5n, rev: 2 });
    expect(b.get(1n)?.locations[0]?.specs[0]?.uri).to.equal('x://new/1');
    expect(b.get(2n)?.locations[0]).to.deep.include({ createTimeUs: 99n, rev: 1 });
    worker.dropStage('s2');
    expect(worker.commitStage('s2', 10).rows).to.equal(0);
    expect((await main.getBlocks('a', [3n])).size).to.equal(0);
  });

  it('§9.1 a database with a newer schema version is refused with a StoreError', () => {
    const path = join(dir, 'kvcm.db');
    const db = new Database(path);
    db.pragma('user_version = 99');
    db.close();
    let err: unknown;
    try {
      opened.push(SqliteMetaStore.open(path));
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(StoreError);
    expect((err as Error).message).to.match(/schema version 99/);
  });

  it('§9.1 an unopenable path is a StoreError', () => {
    const path = join(dir, 'kvcm.db');
    new Database(path).close();
    let err: unknown;
    try {
      opened.push(SqliteMetaStore.open(join(path, 'x.db')));
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(StoreError);
  });
});
