/**
 * kvcm-meta §6 write sessions and §5.2 removeCache / trimCache (W-01..W-07, C-04) over a real
 * HTTP server and a real SQLite file, default config (§8) unless a scenario needs a quota.
 *
 *   test ──startWriteCache / finishWriteCache / removeCache / trimCache──▶ MetaService ──▶ SQLite
 *   test ──getCacheLocation / getCacheMetaDetail──▶ (observes the outcome)
 */
import { expect } from 'chai';
import { MetaHarness, code, type MetaHarnessOptions } from '../helpers/meta-data-path-harness.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import type { Json } from '../helpers/meta-data-path-harness.js';

const I = 'test_instance';
const URI = (k: bigint | number, s: string, size: number): string =>
  `file://local_file/data/kvcm/${I}/${k}_${s}?offset=0&size=${size}`;
const SESSION_ID = /^[A-Za-z0-9]{32}$/;

const QUOTA_CONFIG = JSON.stringify({
  storages: [
    { global_unique_name: 'local_file', type: 'file', root_path: '/data/kvcm/' },
    { global_unique_name: 'event_report_l2', type: 'event_report_l2' },
  ],
  instance_groups: [
    { name: 'quota_group', storage_candidates: ['local_file'], event_report_storage_candidates: ['event_report_l2'], quota_bytes: 1000 },
  ],
  bootstrap_instances: [
    { instance_group: 'quota_group', instance_id: 'qa', block_size: 4, location_spec_infos: [{ name: 'tp0', size: 400 }] },
    { instance_group: 'quota_group', instance_id: 'qb', block_size: 4, location_spec_infos: [{ name: 'tp0', size: 400 }] },
  ],
});

// One suite per store (kvcm-meta §9.4); the body keeps its indentation so merges stay small.
for (const kind of STORE_KINDS) describe(`kvcm-meta §6 write sessions, §5.2 removeCache/trimCache on ${kind}`, () => {
  const stores = storeSuite(kind);
  const startOn = (o: MetaHarnessOptions = {}): Promise<MetaHarness> => MetaHarness.start({ ...o, redis: kind === 'redis' ? stores.redis : undefined });
  let h: MetaHarness;
  beforeEach(async () => {
    h = await startOn();
  });
  afterEach(async () => {
    await h.close();
    h.removeDir();
  });

  const start = (keys: (number | string)[], extra: Record<string, unknown> = {}, instance = I): Promise<Json> =>
    h.call('startWriteCache', { instance_id: instance, block_keys: keys, ...extra });
  const finish = (id: string, success?: unknown, instance = I): Promise<Json> =>
    h.call('finishWriteCache', { instance_id: instance, write_session_id: id, ...(success === undefined ? {} : { success_blocks: success }) });
  const detail = (keys: (number | string)[], instance = I): Promise<Json> =>
    h.call('getCacheMetaDetail', { instance_id: instance, block_keys: keys });
  const batchGet = (keys: (number | string)[], instance = I): Promise<Json> =>
    h.call('getCacheLocation', { instance_id: instance, query_type: 'QT_BATCH_GET', block_keys: keys });
  const hits = async (keys: (number | string)[], instance = I): Promise<boolean[]> =>
    ((await batchGet(keys, instance)).locations as Json[]).map((l) => l.type !== 'ST_UNSPECIFIED');
  const serve = async (keys: (number | string)[], instance = I): Promise<void> => {
    const s = await start(keys, {}, instance);
    expect(code(s)).to.equal('OK');
    expect(code(await finish(s.write_session_id, { offset: s.locations.length }, instance))).to.equal('OK');
  };

  it('W-01 startWriteCache of 2 new keys: 32-char id, {"offset":0}, 2 locations with §4.5 URIs, CLS_WRITING', async () => {
    const r = await start([123, 456]);
    expect(code(r)).to.equal('OK');
    expect(r.write_session_id).to.match(SESSION_ID);
    expect(r.block_mask).to.deep.equal({ offset: 0 });
    const d = await detail([123, 456]);
    expect(r.locations).to.deep.equal(
      [123, 456].map((k, i) => ({
        type: 'ST_NFS',
        spec_size: 2,
        location_specs: [
          { name: 'tp0', uri: URI(k, 'tp0', 4096000) },
          { name: 'full_attention:group=0:tp=0', uri: URI(k, 'full_attention:group=0:tp=0', 4096) },
        ],
        // §6 step 4: the new location's own id, CLS_WRITING (KVCM parity).
        id: d.items[i].locations[0].location_id,
        status: 'CLS_WRITING',
      })),
    );
    expect(d.items.map((it: Json) => it.locations.map((l: Json) => l.status))).to.deep.equal([['CLS_WRITING'], ['CLS_WRITING']]);
    expect(d.items[0].locations[0].location_id).to.match(/^[A-Za-z0-9]{8}$/);
    expect(d.items[1].prev_block_key).to.equal('123');
    expect(d.items[0].prev_block_key).to.equal('');
    expect(await hits([123, 456])).to.deep.equal([false, false]);
  });

  it('W-02 existing keys are masked: offset, bool_masks, repeated keys, all existing then finish', async () => {
    await serve([1]);
    const a = await start([1, 2, 3]);
    expect(a.block_mask).to.deep.equal({ offset: 1 });
    expect(a.locations).to.have.length(2);
    expect(a.locations[0].location_specs[0].uri).to.equal(URI(2, 'tp0', 4096000));

    await serve([20]);
    const b = await start([10, 20, 30]);
    expect(b.block_mask).to.deep.equal({ bool_masks: { values: [false, true, false] } });
    expect(b.locations).to.have.length(2);

    const c = await start([1234, 4567, 1234], {}, 'test_instance_id_2');
    expect(c.block_mask).to.deep.equal({ bool_masks: { values: [false, false, true] } });
    expect(c.locations).to.have.length(2);

    const d = await start([1, 20]);
    expect(code(d)).to.equal('OK');
    expect(d.write_session_id).to.match(SESSION_ID);
    expect(d.block_mask).to.deep.equal({ offset: 2 });
    expect(d.locations).to.deep.equal([]);
    expect(code(await finish(d.write_session_id))).to.equal('OK');
  });

  it('W-03 finish {"offset":1} and values [true] with m = 2: key 0 serving and a hit, key 1 without location', async () => {
    for (const [keys, success] of [
      [[100, 101], { offset: 1 }],
      [[200, 201], { bool_masks: { values: [true] } }],
    ] as const) {
      const s = await start([...keys]);
      expect(code(await finish(s.write_session_id, success))).to.equal('OK');
      const d = await detail([...keys]);
      expect(d.items[0].locations.map((l: Json) => l.status)).to.deep.equal(['CLS_SERVING']);
      expect(d.items[1].locations.map((l: Json) => l.status)).to.deep.equal(['CLS_NOT_FOUND']);
      expect(await hits([...keys])).to.deep.equal([true, false]);
    }
  });

  it('W-04 invalid finishes are INVALID_ARGUMENT; an invalid mask leaves the session finishable; expiry deletes', async () => {
    const s = await start([300, 301]);
    const id = s.write_session_id as string;
    expect(code(await finish(id, { bool_masks: { values: [true, true, true] } }))).to.equal('INVALID_ARGUMENT');
    expect(code(await finish(id, { offset: 3 }))).to.equal('INVALID_ARGUMENT');
    expect(code(await finish('x'.repeat(32), { offset: 2 }))).to.equal('INVALID_ARGUMENT');
    const missingId = await h.call('finishWriteCache', { instance_id: I });
    expect(code(missingId)).to.equal('INVALID_ARGUMENT');
    expect(missingId.header.status.message).to.equal('missing or invalid fields: {FinishWriteCache: {write_session_id}}');
    expect(code(await finish(id, { offset: 2 }))).to.equal('OK');
    const twice = await finish(id, { offset: 2 });
    expect(code(twice)).to.equal('INVALID_ARGUMENT');
    expect(twice.header.status.message).to.equal('write session not found or expired');
    expect(await hits([300, 301])).to.deep.equal([true, true]);

    const t = await start([400, 401], { write_timeout_seconds: 1 });
    expect((await detail([400])).items[0].locations[0].status).to.equal('CLS_WRITING');
    h.timers.advance(2000);
    expect(code(await finish(t.write_session_id, { offset: 2 }))).to.equal('INVALID_ARGUMENT');
    const d = await detail([400, 401]);
    expect(d.items.map((it: Json) => it.locations[0].status)).to.deep.equal(['CLS_NOT_FOUND', 'CLS_NOT_FOUND']);
    expect(await h.metrics.writeSessionsExpiredTotal.get()).to.have.nested.property('values[0].value', 1);
    expect(code(await start([1], { write_timeout_seconds: -1 }))).to.equal('INVALID_ARGUMENT');
  });

  it('W-05 location_spec_group_names: wrong length / unknown name rejected; valid → only the group specs', async () => {
    const reg = await h.call('registerInstance', {
      instance_group: 'test_group',
      instance_id: 'spec_groups',
      block_size: 4,
      location_spec_infos: [
        { name: 'tp0', size: 100 },
        { name: 'tp1', size: 200 },
      ],
      location_spec_groups: [
        { name: 'g0', spec_names: ['tp0'] },
        { name: 'g1', spec_names: ['tp1'] },
      ],
    });
    expect(code(reg)).to.equal('OK');
    expect(code(await start([1, 2], { location_spec_group_names: ['g0'] }, 'spec_groups'))).to.equal('INVALID_ARGUMENT');
    expect(code(await start([1, 2], { location_spec_group_names: ['g0', 'zz'] }, 'spec_groups'))).to.equal('INVALID_ARGUMENT');
    expect((await detail([1, 2], 'spec_groups')).items.map((it: Json) => it.locations[0].status)).to.deep.equal([
      'CLS_NOT_FOUND',
      'CLS_NOT_FOUND',
    ]);
    const ok = await start([1, 2], { location_spec_group_names: ['g0', 'g1'] }, 'spec_groups');
    expect(code(ok)).to.equal('OK');
    expect(ok.locations.map((l: Json) => l.location_specs.map((s: Json) => s.name))).to.deep.equal([['tp0'], ['tp1']]);
    expect(ok.locations[1].location_specs[0].uri).to.equal('file://local_file/data/kvcm/spec_groups/2_tp1?offset=0&size=200');
  });

  it('W-05 allocation beyond the group quota_bytes: REACH_MAX_ENTITY_CAPACITY, nothing allocated', async () => {
    await h.close();
    h.removeDir();
    h = await startOn({ configJson: QUOTA_CONFIG });
    const a = await start([1], {}, 'qa');
    expect(code(a)).to.equal('OK');
    expect(a.locations[0].location_specs[0].uri).to.equal('file://local_file/data/kvcm/qa/1_tp0?offset=0&size=400');
    expect(code(await finish(a.write_session_id, { offset: 1 }, 'qa'))).to.equal('OK');
    const b = await start([7, 8], {}, 'qb');
    expect(code(b)).to.equal('REACH_MAX_ENTITY_CAPACITY');
    const d = await detail([7, 8], 'qb');
    expect(d.items.map((it: Json) => it.locations[0].status)).to.deep.equal(['CLS_NOT_FOUND', 'CLS_NOT_FOUND']);
    expect(code(await start([7], {}, 'qb'))).to.equal('OK');
  });

  it('W-06 finish with another existing instance_id: OK on the session instance, mismatch counted', async () => {
    const s = await start([1234, 4567, 1234], {}, 'test_instance_id_2');
    expect(code(await finish(s.write_session_id, { bool_masks: { values: [true] } }, I))).to.equal('OK');
    expect(await hits([1234, 4567], 'test_instance_id_2')).to.deep.equal([true, false]);
    expect(await hits([1234], I)).to.deep.equal([false]);
    const m = await h.metrics.writeSessionInstanceMismatchTotal.get();
    expect(m.values[0]?.value).to.equal(1);
    const unknown = await start([1]);
    expect(code(await finish(unknown.write_session_id, { offset: 1 }, 'nobody'))).to.equal('INSTANCE_NOT_EXIST');
  });

  it('W-07 removeCache {"offset":1} over 2 serving keys: key 0 kept, key 1 a miss at once', async () => {
    await serve([1, 2]);
    const r = await h.call('removeCache', { instance_id: I, block_keys: [1, 2], block_mask: { offset: 1 } });
    expect(code(r)).to.equal('OK');
    expect(await hits([1, 2])).to.deep.equal([true, false]);
    expect((await detail([2])).items[0].locations[0].status).to.equal('CLS_NOT_FOUND');
    expect(code(await h.call('removeCache', { instance_id: I, block_keys: [1, 2], block_mask: { offset: 3 } }))).to.equal(
      'INVALID_ARGUMENT',
    );
    expect(code(await h.call('removeCache', { instance_id: I, block_keys: [999] }))).to.equal('OK');
  });

  it('W-07 trimCache ALL_CACHE and ALL_META remove everything at once; the instance stays registered', async () => {
    for (const strategy of ['TS_REMOVE_ALL_CACHE', 'TS_REMOVE_ALL_META']) {
      await serve([1, 2]);
      const open = await start([3]);
      expect(code(await h.call('trimCache', { instance_id: I, strategy, begin_timestamp: 0, end_timestamp: 0 }))).to.equal('OK');
      expect(await hits([1, 2, 3])).to.deep.equal([false, false, false]);
      expect((await detail([1, 2, 3])).items.map((it: Json) => it.locations[0].status)).to.deep.equal([
        'CLS_NOT_FOUND',
        'CLS_NOT_FOUND',
        'CLS_NOT_FOUND',
      ]);
      expect(code(await finish(open.write_session_id, { offset: 1 }))).to.equal('INVALID_ARGUMENT');
      expect(code(await h.call('getInstanceInfo', { instance_id: I }))).to.equal('OK');
    }
  });

  it('W-07 trimCache TS_TIMESTAMP removes [t1, t2) only; end ≤ begin and TS_UNSPECIFIED are INVALID_ARGUMENT', async () => {
    const t0 = Math.floor(h.timers.ms / 1000);
    await serve([1]); // t0
    h.timers.advance(10_000);
    await serve([2]); // t0 + 10
    h.timers.advance(10_000);
    await serve([3]); // t0 + 20
    const r = await h.call('trimCache', { instance_id: I, strategy: 'TS_TIMESTAMP', begin_timestamp: t0 + 5, end_timestamp: t0 + 20 });
    expect(code(r)).to.equal('OK');
    expect(await hits([1, 2, 3])).to.deep.equal([true, false, true]);
    const open = await h.call('trimCache', { instance_id: I, strategy: 'TS_TIMESTAMP', begin_timestamp: t0 + 20, end_timestamp: 0 });
    expect(code(open)).to.equal('OK');
    expect(await hits([1, 3])).to.deep.equal([true, false]);
    const bad = { instance_id: I, strategy: 'TS_TIMESTAMP', begin_timestamp: t0 + 20, end_timestamp: t0 + 20 };
    expect(code(await h.call('trimCache', bad))).to.equal('INVALID_ARGUMENT');
    expect(code(await h.call('trimCache', { instance_id: I, strategy: 'TS_UNSPECIFIED' }))).to.equal('INVALID_ARGUMENT');
    expect(code(await h.call('trimCache', { instance_id: I, strategy: 'TS_TIMESTAMP', begin_timestamp: -1 }))).to.equal(
      'INVALID_ARGUMENT',
    );
    expect(await hits([1])).to.deep.equal([true]);
  });

  it('C-04 two concurrent startWriteCache on key K give exactly one location', async () => {
    const [a, b] = await Promise.all([start([777]), start([777])]);
    expect([code(a), code(b)]).to.deep.equal(['OK', 'OK']);
    expect(a.locations.length + b.locations.length).to.equal(1);
    const d = await detail([777]);
    expect(d.items[0].locations).to.have.length(1);
  });

  it('§5.2 a write session whose location was removed meanwhile skips it at finish', async () => {
    const s = await start([50, 51]);
    expect(code(await h.call('removeCache', { instance_id: I, block_keys: [50] }))).to.equal('OK');
    expect(code(await finish(s.write_session_id, { offset: 2 }))).to.equal('OK');
    expect(await hits([50, 51])).to.deep.equal([false, true]);
    expect((await detail([50])).items[0].locations[0].status).to.equal('CLS_NOT_FOUND');
  });

  it('C-04 overlapping concurrent sessions [1,2] and [2,3]: key 2 gets exactly one location', async () => {
    const [a, b] = await Promise.all([start([1, 2]), start([2, 3])]);
    expect(a.locations.length + b.locations.length).to.equal(3);
    const d = await detail([1, 2, 3]);
    expect(d.items.map((it: Json) => it.locations.length)).to.deep.equal([1, 1, 1]);
  });
});
