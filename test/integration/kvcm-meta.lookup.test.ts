/**
 * kvcm-meta §5.3–§5.5 lookups (Q-01..Q-08, Q-10) over a real HTTP server and a real SQLite file
 * with the default config (§8): `test_instance` (block_size 8, specs tp0 and
 * full_attention:group=0:tp=0, default QT_PREFIX_MATCH). Serving data is written through
 * startWriteCache/finishWriteCache, event-report data through reportEvent.
 *
 *   test ──write / reportEvent──▶ MetaService ──▶ SQLite
 *   test ──getCacheLocation(Len) / getCacheMeta(Detail) / getHostCacheState──▶ (asserts)
 */
import { expect } from 'chai';
import { CLS_WRITING } from '../../meta-svc/store/meta-store.js';
import { FaultyMetaStore } from '../helpers/faulty-meta-store.js';
import { MetaHarness, code, type MetaHarnessOptions } from '../helpers/meta-data-path-harness.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import type { Json } from '../helpers/meta-data-path-harness.js';

const I = 'test_instance';
const SPECS = ['tp0', 'full_attention:group=0:tp=0'];
const Q01_KEYS = ['-3034435009196788647', '4952800032557538615'];

// One suite per store (kvcm-meta §9.4); the body keeps its indentation so merges stay small.
for (const kind of STORE_KINDS) describe(`kvcm-meta §5.3–§5.5 lookups on ${kind}`, () => {
  const stores = storeSuite(kind);
  const startOn = (o: MetaHarnessOptions = {}): Promise<MetaHarness> => MetaHarness.start({ ...o, redis: kind === 'redis' ? stores.redis : undefined });
  let h: MetaHarness;
  let faulty: FaultyMetaStore | null;
  beforeEach(async () => {
    faulty = null;
    h = await startOn({
      wrapStore: (s) => {
        faulty = new FaultyMetaStore(s);
        return faulty;
      },
    });
  });
  afterEach(async () => {
    await h.close();
    h.removeDir();
  });

  const serve = async (keys: (number | string)[], instance = I): Promise<void> => {
    const s = await h.call('startWriteCache', { instance_id: instance, block_keys: keys });
    expect(code(s)).to.equal('OK');
    const f = await h.call('finishWriteCache', { instance_id: instance, write_session_id: s.write_session_id, success_blocks: { offset: s.locations.length } });
    expect(code(f)).to.equal('OK');
  };
  const locate = (body: Record<string, unknown>): Promise<Json> => h.call('getCacheLocation', { instance_id: I, ...body });
  const len = async (body: Record<string, unknown>): Promise<string> => {
    const r = await h.call('getCacheLocationLen', { instance_id: I, ...body });
    expect(code(r)).to.equal('OK');
    return r.cache_location_len as string;
  };
  const uriKeys = (r: Json): string[] => (r.locations as Json[]).map((l) => (l.location_specs[0]?.uri ?? '').replace(/^.*\/(-?\d+)_.*$/, '$1'));

  it('Q-01 token_ids 1..19 with block_size 8 give the same result as the §4.3 block keys', async () => {
    await serve(Q01_KEYS);
    const byKeys = await locate({ block_keys: Q01_KEYS });
    const byTokens = await locate({ token_ids: Array.from({ length: 19 }, (_, i) => i + 1) });
    expect(code(byTokens)).to.equal('OK');
    expect(byTokens.locations).to.deep.equal(byKeys.locations);
    expect(byTokens.locations).to.have.length(2);
    expect(uriKeys(byTokens)).to.deep.equal(Q01_KEYS);
    const short = await locate({ token_ids: [1, 2, 3] });
    expect(code(short)).to.equal('OK');
    expect(short.locations).to.deep.equal([]);
    expect(code(await locate({ token_ids: [2147483648, 1, 2, 3, 4, 5, 6, 7] }))).to.equal('INVALID_ARGUMENT');
    const none = await locate({});
    expect(code(none)).to.equal('INVALID_ARGUMENT');
    expect(none.header.status.message).to.equal('missing or invalid fields: {GetCacheLocation: {block_keys, token_ids}}');
  });

  it('Q-02 PREFIX over [hit,hit,miss,hit]; with offset 1; with all-true bool_masks', async () => {
    await serve([1, 2, 4]);
    const a = await locate({ query_type: 'QT_PREFIX_MATCH', block_keys: [1, 2, 3, 4] });
    expect(uriKeys(a)).to.deep.equal(['1', '2']);
    expect(a.locations[0].id).to.match(/^[A-Za-z0-9]{8}_merged$/);
    expect(a.locations[0]).to.deep.equal({
      type: 'ST_NFS',
      spec_size: 2,
      location_specs: SPECS.map((s) => ({ name: s, uri: `file://local_file/data/kvcm/${I}/1_${s}?offset=0&size=${s === 'tp0' ? 4096000 : 4096}` })),
      id: a.locations[0].id,
      status: 'CLS_SERVING',
    });
    const b = await locate({ query_type: 'QT_PREFIX_MATCH', block_keys: [3, 1, 2, 3], block_mask: { offset: 1 } });
    expect(uriKeys(b)).to.deep.equal(['1', '2']);
    const c = await locate({ block_keys: [1, 2, 3, 4], block_mask: { bool_masks: { values: [true, true, true, true] } } });
    expect(code(c)).to.equal('OK');
    expect(c.locations).to.deep.equal([]);
    expect(code(await locate({ block_keys: [1, 2], block_mask: { bool_masks: { values: [true] } } }))).to.equal('INVALID_ARGUMENT');
    expect(code(await locate({ block_keys: [1, 2], block_mask: { offset: 3 } }))).to.equal('INVALID_ARGUMENT');
  });

  it('Q-03 BATCH_GET [hit, miss]; location_spec_names ["tp0"]; ["zz"]', async () => {
    await serve([1]);
    const a = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1, 2] });
    expect(a.locations).to.have.length(2);
    expect(a.locations[0].type).to.equal('ST_NFS');
    expect(a.locations[1]).to.deep.equal({ type: 'ST_UNSPECIFIED', spec_size: 2, location_specs: SPECS.map((name) => ({ name, uri: '' })), id: '', status: 'CLS_NOT_FOUND' });
    const b = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1, 2], location_spec_names: ['tp0'] });
    expect(b.locations[0].spec_size).to.equal(1);
    expect(b.locations[0].location_specs.map((s: Json) => s.name)).to.deep.equal(['tp0']);
    expect(b.locations[1]).to.deep.equal({ type: 'ST_UNSPECIFIED', spec_size: 1, location_specs: [{ name: 'tp0', uri: '' }], id: '', status: 'CLS_NOT_FOUND' });
    const c = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1], location_spec_names: ['zz'] });
    expect(c.locations).to.deep.equal([{ type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [], id: '', status: 'CLS_NOT_FOUND' }]);
    const masked = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1, 2], block_mask: { offset: 1 } });
    expect(masked.locations[0]).to.deep.equal({ type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [], id: '', status: 'CLS_NOT_FOUND' });
  });

  it('Q-04 REVERSE_ROLL with hits [1,1,0,1,1], sw_size 2: window [3,5) filled, length 5; sw_size 6 → INVALID_ARGUMENT', async () => {
    await serve([1, 2, 4, 5]);
    const keys = [1, 2, 3, 4, 5];
    const r = await locate({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 2 });
    expect(r.locations.map((l: Json) => l.type)).to.deep.equal(['ST_UNSPECIFIED', 'ST_UNSPECIFIED', 'ST_UNSPECIFIED', 'ST_NFS', 'ST_NFS']);
    expect(r.locations[0].location_specs.map((s: Json) => s.uri)).to.deep.equal(['', '']);
    expect(code(await locate({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 6 }))).to.equal('INVALID_ARGUMENT');
    const zero = await locate({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 0 });
    expect(zero.locations.every((l: Json) => l.type === 'ST_UNSPECIFIED')).to.equal(true);
    const none = await locate({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 3 });
    expect(none.locations.every((l: Json) => l.type === 'ST_UNSPECIFIED')).to.equal(true);
  });

  it('Q-05 QT_UNSPECIFIED uses the instance default, then PREFIX; MAMBA → UNSUPPORTED', async () => {
    const reg = (id: string, dq?: string): Promise<Json> =>
      h.call('registerInstance', {
        instance_group: 'test_group',
        instance_id: id,
        block_size: 8,
        location_spec_infos: [{ name: 'tp0', size: 10 }],
        ...(dq ? { default_query_type: dq } : {}),
      });
    expect(code(await reg('batch_default', 'QT_BATCH_GET'))).to.equal('OK');
    expect(code(await reg('no_default'))).to.equal('OK');
    await serve([2], 'batch_default');
    await serve([2], 'no_default');
    const a = await h.call('getCacheLocation', { instance_id: 'batch_default', block_keys: [1, 2] });
    expect(a.locations.map((l: Json) => l.type)).to.deep.equal(['ST_UNSPECIFIED', 'ST_NFS']);
    const b = await h.call('getCacheLocation', { instance_id: 'no_default', query_type: 0, block_keys: [2, 1] });
    expect(b.locations.map((l: Json) => l.type)).to.deep.equal(['ST_NFS']);
    const c = await locate({ query_type: 'QT_PREFIX_MATCH_WITH_MAMBA', block_keys: [1] });
    expect(code(c)).to.equal('UNSUPPORTED');
    expect(code(await h.call('getCacheLocationLen', { instance_id: I, query_type: 4, block_keys: [1] }))).to.equal('UNSUPPORTED');
  });

  it('Q-06 getCacheLocationLen matches getCacheLocation for the three types; a CLS_WRITING key misses', async () => {
    await serve([1, 2, 4, 5]);
    const keys = [1, 2, 3, 4, 5];
    expect(await len({ query_type: 'QT_PREFIX_MATCH', block_keys: keys })).to.equal('2');
    expect((await locate({ query_type: 'QT_PREFIX_MATCH', block_keys: keys })).locations).to.have.length(2);
    expect(await len({ query_type: 'QT_BATCH_GET', block_keys: keys })).to.equal('4');
    expect(await len({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 2 })).to.equal('5');
    expect(await len({ query_type: 'QT_REVERSE_ROLL_SW_MATCH', block_keys: keys, sw_size: 3 })).to.equal('0');
    expect(await len({ block_keys: keys })).to.equal('2');
    const writing = await h.call('startWriteCache', { instance_id: I, block_keys: [9] });
    expect(writing.locations).to.have.length(1);
    expect((await locate({ block_keys: [9] })).locations).to.deep.equal([]);
    expect(await len({ query_type: 'QT_BATCH_GET', block_keys: [9] })).to.equal('0');
  });

  it('Q-07 getCacheMeta detail_level 0 and 1 with one key missing: aligned arrays', async () => {
    await serve([1]);
    const a = await h.call('getCacheMeta', { instance_id: I, block_keys: [1, 2], detail_level: 0 });
    expect(code(a)).to.equal('OK');
    expect(a.locations[0].type).to.equal('ST_NFS');
    expect(a.locations[1]).to.deep.equal({ type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [], id: '', status: 'CLS_NOT_FOUND' });
    expect(a.metas[1]).to.equal('');
    expect(JSON.parse(a.metas[0])).to.deep.equal({ block_key: '1', properties: { 'BP#prev_key': '' } });
    const b = await h.call('getCacheMeta', { instance_id: I, block_keys: [1, 2], detail_level: 1 });
    const meta = JSON.parse(b.metas[0]);
    expect(meta.locations).to.have.length(1);
    expect(meta.locations[0]).to.include({ status: 'CLS_SERVING', type: 'ST_NFS' });
    expect(meta.locations[0].spec_names).to.deep.equal(SPECS);
    expect(meta.locations[0].create_time).to.equal(String(BigInt(h.timers.ms) * 1000n));
    const masked = await h.call('getCacheMeta', { instance_id: I, block_keys: [1, 2], block_mask: { offset: 1 } });
    expect(masked.metas).to.deep.equal(['', '']);
  });

  it('Q-08 getCacheMetaDetail [123,456]: both statuses, CLS_NOT_FOUND item, prev_block_key; store failure → INTERNAL_ERROR', async () => {
    await serve([100, 123]);
    await h.store.apply([
      {
        op: 'putLocation',
        instanceId: I,
        blockKey: 123n,
        location: { locationId: 'zzzzzzzz', storageName: 'local_file', type: 4, status: CLS_WRITING, createTimeUs: 5n, specs: [{ name: 'tp0', uri: 'file://x' }] },
      },
    ]);
    const d = await h.call('getCacheMetaDetail', { instance_id: I, block_keys: [123, 456] });
    expect(code(d)).to.equal('OK');
    expect(d.items).to.have.length(2);
    const [a, b] = d.items;
    expect(a.request_index).to.equal(0);
    expect(a.block_key).to.equal('123');
    expect(a.prev_block_key).to.equal('100');
    expect(a.properties).to.deep.equal({ 'BP#prev_key': '100' });
    expect(a.locations.map((l: Json) => l.status).sort()).to.deep.equal(['CLS_SERVING', 'CLS_WRITING']);
    expect(a.status.code).to.equal('OK');
    expect(b).to.deep.include({ request_index: 1, block_key: '456', prev_block_key: '', properties: {} });
    expect(b.status.code).to.equal('OK');
    expect(b.locations).to.deep.equal([
      { location_id: '', status: 'CLS_NOT_FOUND', type: 'ST_UNSPECIFIED', spec_size: 0, create_time: '0', location_specs: [] },
    ]);
    faulty?.failNext('getBlocks');
    const f = await h.call('getCacheMetaDetail', { instance_id: I, block_keys: [123, 456] });
    expect(code(f)).to.equal('INTERNAL_ERROR');
    expect(f.items).to.have.length(2);
    expect(f.items.map((it: Json) => it.status.code)).to.deep.equal(['INTERNAL_ERROR', 'INTERNAL_ERROR']);
  });

  it('Q-10 getHostCacheState: hosts of prefix 3, 1, 0; medium filter; default type; QT_BATCH_GET → INVALID_ARGUMENT', async () => {
    const add = (key: number, medium = 'gpu'): Json => ({
      event_type: 'EVENT_BLOCK_ADD',
      block_add: { block_key: String(key), medium, specs: [{ name: 'tp0', uri: `x://h/${key}` }] },
    });
    const report = (host: string, events: Json[]): Promise<Json> =>
      h.call('reportEvent', { instance_id: I, host_ip_port: host, storage_type: 'ST_EVENT_REPORT_L2', events });
    expect(code(await report('h3:1', [add(1), add(2), add(3, 'disk')]))).to.equal('OK');
    expect(code(await report('h1:1', [add(1), add(3)]))).to.equal('OK');
    expect(code(await report('h0:1', [add(2), add(3)]))).to.equal('OK');
    const state = (body: Record<string, unknown>): Promise<Json> => h.call('getHostCacheState', { instance_id: I, ...body });
    const a = await state({ query_type: 'QT_PREFIX_MATCH', block_cache_keys: [1, 2, 3] });
    expect(code(a)).to.equal('OK');
    expect(a.hosts).to.deep.equal([
      { host_ip_port: 'h3:1', local: '3', global: '3', prefix_match_blocks: '3' },
      { host_ip_port: 'h1:1', local: '1', global: '1', prefix_match_blocks: '1' },
    ]);
    const b = await state({ block_cache_keys: [1, 2, 3], medium: ['GPU'] });
    expect(b.hosts).to.deep.equal([
      { host_ip_port: 'h3:1', local: '2', global: '2', prefix_match_blocks: '2' },
      { host_ip_port: 'h1:1', local: '1', global: '1', prefix_match_blocks: '1' },
    ]);
    const c = await state({ block_cache_keys: [] });
    expect(code(c)).to.equal('OK');
    expect(c.hosts).to.deep.equal([]);
    expect(code(await state({ query_type: 'QT_BATCH_GET', block_cache_keys: [1] }))).to.equal('INVALID_ARGUMENT');
    expect(code(await state({ query_type: 'QT_PREFIX_MATCH_WITH_MAMBA', block_cache_keys: [1] }))).to.equal('UNSUPPORTED');
    // Event-report locations are lookup hits too (§5.3 rank: after the writable storages).
    const loc = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1] });
    expect(loc.locations[0].type).to.equal('ST_EVENT_REPORT_L2');
  });

  it('§5.3 selection prefers the writable storage over event-report locations of the same key', async () => {
    await serve([1]);
    await h.call('reportEvent', {
      instance_id: I,
      host_ip_port: 'h:1',
      storage_type: 'ST_EVENT_REPORT_L1P5',
      events: [{ event_type: 'EVENT_BLOCK_ADD', block_add: { block_key: '1', medium: 'gpu', specs: [{ name: 'tp0', uri: 'x://h/1' }] } }],
    });
    const r = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1] });
    expect(r.locations[0].type).to.equal('ST_NFS');
    const only = await locate({ query_type: 'QT_BATCH_GET', block_keys: [1], location_spec_names: ['full_attention:group=0:tp=0'] });
    expect(only.locations[0].type).to.equal('ST_NFS');
  });

  it('I-05 a write on one instance is a miss on another', async () => {
    await serve([1, 2]);
    const other = await h.call('getCacheLocation', { instance_id: 'test_instance_id_2', query_type: 'QT_BATCH_GET', block_keys: [1, 2] });
    expect(code(other)).to.equal('OK');
    expect(other.locations.map((l: Json) => l.type)).to.deep.equal(['ST_UNSPECIFIED', 'ST_UNSPECIFIED']);
    expect(code(await h.call('getCacheLocation', { instance_id: 'nobody', block_keys: [1] }))).to.equal('INSTANCE_NOT_EXIST');
  });

  it('§5.4 hit statistics are flushed on close and never resurrect a removed block', async () => {
    await serve([1, 2]);
    await locate({ block_keys: [1, 2] });
    await locate({ query_type: 'QT_BATCH_GET', block_keys: [1, 3] });
    expect(code(await h.call('removeCache', { instance_id: I, block_keys: [2] }))).to.equal('OK');
    const dir = h.dir;
    await h.close();
    h = await startOn({ dir, ownDir: true });
    const d = await h.call('getCacheMetaDetail', { instance_id: I, block_keys: [1, 2] });
    expect(d.items[0].properties['BP#hit_count']).to.equal('2');
    expect(d.items[0].properties['BP#lru_time']).to.equal(String(BigInt(h.timers.ms) * 1000n));
    expect(d.items[1].locations[0].status).to.equal('CLS_NOT_FOUND');
    expect(d.items[1].properties).to.deep.equal({});
  });
});
