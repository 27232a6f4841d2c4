/**
 * kvcm-meta §10 rows of the KVCM parity rules (I-06, W-08, Q-12..Q-18, R-04, D-08, L-05) over
 * real HTTP against one real meta-svc process (SQLite in a temp dir, a config file of our own).
 *
 *   test ──POST /api/*──▶ meta-svc (node meta-svc/main.ts) ──▶ <tmp>/kvcm.db
 *
 * Each test uses its own instance, keys or reporter hosts, so they share the process without
 * seeing each other. `fast_group` has a 1 s heartbeat timeout (Q-17, R-04 wait for it by polling,
 * never by asserting a duration).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { MetaProcess } from '../helpers/meta-process.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import { waitFor } from '../helpers/ports.js';
import { HEX32, add, heartbeat, hostDown, register, snapshot, spec } from '../helpers/report-event-harness.js';

// `any` on purpose: responses are loosely typed JSON read field by field.
type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any
const code = (r: Json): string => r.header.status.code as string;

const CONTRACT = { contract: 'report_event' };
const CONFIG = {
  storages: [
    { global_unique_name: 'local_file', type: 'file', root_path: '/data/kvcm' },
    { global_unique_name: 'event_report_l1p5', type: 'event_report_l1p5' },
    { global_unique_name: 'event_report_l2', type: 'event_report_l2' },
    { global_unique_name: 'fast_l2', type: 'event_report_l2', event_report: { heartbeat_timeout_ms: 1000, liveness_check_interval_ms: 100 } },
  ],
  instance_groups: [
    {
      name: 'test_group',
      storage_candidates: ['local_file'],
      event_report_storage_candidates: ['event_report_l1p5', 'event_report_l2'],
      extra_info: CONTRACT,
    },
    { name: 'fast_group', storage_candidates: ['local_file'], event_report_storage_candidates: ['fast_l2'], extra_info: CONTRACT },
  ],
};

const instance = (instanceId: string, specNames: string[], overrides: Record<string, unknown> = {}): Record<string, unknown> => ({
  instance_group: 'test_group',
  instance_id: instanceId,
  block_size: 4,
  location_spec_infos: specNames.map((name) => ({ name, size: 1024 })),
  model_deployment: { model_name: 'm', dtype: 'bf16', tp_size: 1, dp_size: 1, pp_size: 1 },
  ...overrides,
});

const L1P5 = 'ST_EVENT_REPORT_L1P5';
const L2 = 'ST_EVENT_REPORT_L2';

// One suite per store (kvcm-meta §9.4); the body keeps its indentation so merges stay small.
for (const kind of STORE_KINDS) describe(`kvcm-meta §10 KVCM parity rows (real meta-svc process) on ${kind}`, function () {
  this.timeout(60000);
  const stores = storeSuite(kind);
  let dir: string;
  let p: MetaProcess;

  const report = (instanceId: string, host: string, events: unknown[], storageType = L2): Promise<Json> =>
    p.call('reportEvent', { instance_id: instanceId, host_ip_port: host, storage_type: storageType, events });
  const batchGet = (instanceId: string, keys: number[], extra: Record<string, unknown> = {}): Promise<Json> =>
    p.call('getCacheLocation', { instance_id: instanceId, query_type: 'QT_BATCH_GET', block_keys: keys, ...extra });
  const byBackend = (instanceId: string, body: Record<string, unknown>): Promise<Json> =>
    p.call('getCacheLocationsByBackend', { instance_id: instanceId, query_type: 'QT_BATCH_GET', ...body });
  const uris = (loc: Json): string[] => loc.location_specs.map((s: Json) => s.uri.replace(/[?&]s_version=[0-9a-f]{32}$/, ''));
  const names = (loc: Json): string[] => loc.location_specs.map((s: Json) => s.name);
  /** Writes `keys` on the writable storage (start, then finish all). */
  const write = async (instanceId: string, keys: number[]): Promise<Json> => {
    const s = await p.call('startWriteCache', { instance_id: instanceId, block_keys: keys });
    expect(code(s)).to.equal('OK');
    expect(code(await p.call('finishWriteCache', { instance_id: instanceId, write_session_id: s.write_session_id, success_blocks: { offset: s.locations.length } }))).to.equal(
      'OK',
    );
    return s;
  };

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvcm-parity-'));
    const configFile = join(dir, 'meta.json');
    writeFileSync(configFile, JSON.stringify(CONFIG));
    p = await MetaProcess.start(await stores.fresh(dir), [`--meta_config_file=${configFile}`]);
    for (const body of [
      instance('parity', ['tp0', 'tp1']),
      instance('w08', ['tp0']),
      instance('d08', ['tp0']),
      instance('fast', ['tp0'], { instance_group: 'fast_group' }),
    ]) {
      expect(code(await p.call('registerInstance', body))).to.equal('OK');
    }
  });
  after(async () => {
    await p?.kill();
    rmSync(dir, { recursive: true, force: true });
  });

  it('I-06 messages name the unknown group, block_size, and the identity fields a re-registration changes', async () => {
    const group = await p.call('registerInstance', instance('i06_a', ['tp0'], { instance_group: 'absolutely_nonexistent_group_xyz' }));
    expect(code(group)).to.equal('INVALID_ARGUMENT');
    expect(group.header.status.message).to.contain('absolutely_nonexistent_group_xyz');
    const zero = await p.call('registerInstance', instance('i06_b', ['tp0'], { block_size: 0 }));
    expect(code(zero)).to.equal('INVALID_ARGUMENT');
    expect(zero.header.status.message).to.equal('missing or invalid fields: {RegisterInstance: {block_size=0}}');

    expect(code(await p.call('registerInstance', instance('instance_dup_test', ['tp0'])))).to.equal('OK');
    const md = await p.call('registerInstance', instance('instance_dup_test', ['tp0'], { model_deployment: { model_name: 'other', dtype: 'bf16', tp_size: 1, dp_size: 1, pp_size: 1 } }));
    expect(code(md)).to.equal('DUPLICATE_ENTITY');
    expect(md.header.status.message).to.equal('instance "instance_dup_test" already registered with different model_deployment');

    expect(code(await p.call('registerInstance', instance('i06_bs', ['tp0'], { block_size: 128 })))).to.equal('OK');
    const bs = await p.call('registerInstance', instance('i06_bs', ['tp0'], { block_size: 256 }));
    expect(code(bs)).to.equal('DUPLICATE_ENTITY');
    expect(bs.header.status.message).to.contain('i06_bs').and.to.contain('block_size');
    expect((await p.call('getInstanceInfo', { instance_id: 'i06_bs' })).instance_info.block_size).to.equal(128);
  });

  it('W-08 a startWriteCache location carries its id and CLS_WRITING; the later read is CLS_SERVING with an id', async () => {
    const s = await p.call('startWriteCache', { instance_id: 'w08', block_keys: [123] });
    expect(code(s)).to.equal('OK');
    const started = s.locations[0];
    const detail = await p.call('getCacheMetaDetail', { instance_id: 'w08', block_keys: [123] });
    expect(started.id).to.equal(detail.items[0].locations[0].location_id);
    expect(started.status).to.equal('CLS_WRITING');
    expect(code(await p.call('finishWriteCache', { instance_id: 'w08', write_session_id: s.write_session_id, success_blocks: { offset: 1 } }))).to.equal('OK');
    const read = await p.call('getCacheLocation', { instance_id: 'w08', query_type: 'QT_PREFIX_MATCH', block_keys: [123] });
    expect(read.locations).to.have.length(1);
    const entry = read.locations[0];
    expect({ type: entry.type, spec_size: entry.spec_size, location_specs: entry.location_specs }).to.deep.equal({
      type: started.type,
      spec_size: started.spec_size,
      location_specs: started.location_specs,
    });
    expect(entry.status).to.equal('CLS_SERVING');
    expect(entry.id).to.be.a('string').and.not.equal('');
  });

  it('Q-12 BATCH_GET merges one reporter across media, never other reporters, the other type or other keys', async () => {
    const mem = spec('mem_spec', 'x://10.0.12.1:80/mem/1200');
    const disk = spec('disk_spec', 'x://10.0.12.1:80/disk/1200');
    expect(code(await report('parity', '10.0.12.1:80', [add(1200, [mem], 'mem'), add(1200, [disk], 'disk')]))).to.equal('OK');
    const one = await batchGet('parity', [1200]);
    expect(one.locations).to.have.length(1);
    expect(one.locations[0].type).to.equal(L2);
    expect(names(one.locations[0]).sort()).to.deep.equal(['disk_spec', 'mem_spec']);
    expect(uris(one.locations[0]).sort()).to.deep.equal([disk.uri, mem.uri]);

    // Two reporters of one key: the entry holds one reporter's specs only.
    expect(code(await report('parity', '10.0.12.2:80', [add(1201, [spec('a_spec')], 'mem')]))).to.equal('OK');
    expect(code(await report('parity', '10.0.12.3:80', [add(1201, [spec('b_spec')], 'disk')]))).to.equal('OK');
    const two = await batchGet('parity', [1201]);
    expect(two.locations).to.have.length(1);
    // Same rank: the newer location wins, then the smaller id (disk < mem), both B's here.
    expect(names(two.locations[0])).to.deep.equal(['b_spec']);

    // One host's L1P5 and L2 on one key: an entry of one type only (L1P5 ranks first, §5.3).
    expect(code(await report('parity', '10.0.12.4:80', [add(1202, [spec('l2_spec')])], L2))).to.equal('OK');
    expect(code(await report('parity', '10.0.12.4:80', [add(1202, [spec('l1_spec')])], L1P5))).to.equal('OK');
    const types = await batchGet('parity', [1202]);
    expect(types.locations[0]).to.deep.include({ type: L1P5, spec_size: 1 });
    expect(names(types.locations[0])).to.deep.equal(['l1_spec']);

    // PREFIX over keys each held by one reporter on two media: one merged entry per key.
    const h5 = '10.0.12.5:80';
    const h6 = '10.0.12.6:80';
    expect(code(await report('parity', h5, [add(1203, [spec('m')], 'mem'), add(1203, [spec('d')], 'disk')]))).to.equal('OK');
    expect(code(await report('parity', h6, [add(1204, [spec('m')], 'mem'), add(1204, [spec('d')], 'disk')]))).to.equal('OK');
    const prefix = await p.call('getCacheLocation', { instance_id: 'parity', query_type: 'QT_PREFIX_MATCH', block_keys: [1203, 1204] });
    expect(prefix.locations).to.have.length(2);
    for (const loc of prefix.locations) expect(names(loc).sort()).to.deep.equal(['d', 'm']);
    // getCacheMeta locations are the same merged entries (§5.2).
    const meta = await p.call('getCacheMeta', { instance_id: 'parity', block_keys: [1200] });
    expect(names(meta.locations[0]).sort()).to.deep.equal(['disk_spec', 'mem_spec']);
  });

  it('Q-13 entries carry id and status: <location_id>_merged and CLS_SERVING for hits, "" and CLS_NOT_FOUND for misses', async () => {
    await write('parity', [1300]);
    const detail = await p.call('getCacheMetaDetail', { instance_id: 'parity', block_keys: [1300] });
    const r = await batchGet('parity', [1300, 1301]);
    expect(r.locations[0]).to.deep.include({ id: `${detail.items[0].locations[0].location_id}_merged`, status: 'CLS_SERVING' });
    expect(r.locations[1]).to.deep.include({ type: 'ST_UNSPECIFIED', id: '', status: 'CLS_NOT_FOUND' });
    expect(Object.keys(r.locations[1])).to.deep.equal(['type', 'spec_size', 'location_specs', 'id', 'status']);

    expect(code(await report('parity', '10.0.13.1:80', [add(1302, [spec('tp0')])]))).to.equal('OK');
    const er = await batchGet('parity', [1302]);
    expect(er.locations[0]).to.deep.include({ id: 'kvs#event_report_l2#gpu#10.0.13.1:80_merged', status: 'CLS_SERVING' });
  });

  it('Q-14 LSS_WEIGHTED_RANDOM: one location of each selected type, [] for misses and masked keys, spec filter, token_ids', async () => {
    const host = '10.0.14.1:80';
    expect(code(await report('parity', host, [add(1400, [spec('tp0')])], L1P5))).to.equal('OK');
    expect(code(await report('parity', host, [add(1400, [spec('tp0')])], L2))).to.equal('OK');
    const wr = (types: string[]): Array<Record<string, string>> => types.map((t) => ({ backend_type: t, strategy: 'LSS_WEIGHTED_RANDOM' }));
    for (const t of [L1P5, L2]) {
      const r = await byBackend('parity', { block_keys: [1400], backend_selectors: wr([t]) });
      expect(code(r)).to.equal('OK');
      expect(r.key_locations).to.have.length(1);
      expect(r.key_locations[0].locations.map((l: Json) => l.type)).to.deep.equal([t]);
      expect(r.key_locations[0].locations[0].id).to.match(/_merged$/);
    }
    const both = await byBackend('parity', { block_keys: [1400], backend_selectors: wr([L2, L1P5]) });
    expect(both.key_locations[0].locations.map((l: Json) => l.type)).to.deep.equal([L2, L1P5]);

    await write('parity', [100, 300]);
    const nfs = await byBackend('parity', { block_keys: [100, 200, 300], backend_selectors: wr(['ST_NFS']) });
    expect(nfs.key_locations.map((k: Json) => k.locations.length)).to.deep.equal([1, 0, 1]);
    expect(nfs.key_locations[0].locations[0]).to.deep.include({ type: 'ST_NFS', spec_size: 2, status: 'CLS_SERVING' });
    const masked = await byBackend('parity', { block_keys: [100, 300], block_mask: { offset: 1 }, backend_selectors: wr(['ST_NFS']) });
    expect(masked.key_locations.map((k: Json) => k.locations.length)).to.deep.equal([0, 1]);
    expect(masked.key_locations[0]).to.deep.equal({ locations: [] });
    const tp0 = await byBackend('parity', { block_keys: [100], location_spec_names: ['tp0'], backend_selectors: wr(['ST_NFS']) });
    expect(tp0.key_locations[0].locations[0].spec_size).to.equal(1);
    expect(names(tp0.key_locations[0].locations[0])).to.deep.equal(['tp0']);

    const tokens = Array.from({ length: 12 }, (_v, i) => i + 1);
    const byTokens = await byBackend('parity', { token_ids: tokens, backend_selectors: wr(['ST_NFS']) });
    expect(code(byTokens)).to.equal('OK');
    expect(byTokens.key_locations).to.have.length(3);
  });

  it('Q-15 V6D PREFIX and COVERAGE choose one L2 peer; the spec filter applies before the choice', async () => {
    const peerA = '10.0.15.1:80';
    const peerB = '10.0.15.2:80';
    const v6d = (strategy: string): Array<Record<string, string>> => [{ backend_type: L2, strategy }];
    expect(code(await report('parity', peerA, [add(1500, [spec('full_0')]), add(1501, [spec('full_0')])]))).to.equal('OK');
    expect(code(await report('parity', peerB, [add(1500, [spec('linear_1'), spec('full_0', 'x://b/full_0')])]))).to.equal('OK');
    for (const strategy of ['LSS_V6D_PREFIX', 'LSS_V6D_COVERAGE']) {
      const r = await byBackend('parity', { block_keys: [1500, 1501], location_spec_names: ['linear_1', 'linear_1'], backend_selectors: v6d(strategy) });
      expect(code(r), strategy).to.equal('OK');
      expect(r.key_locations[0].locations).to.have.length(1);
      expect(r.key_locations[0].locations[0]).to.deep.include({ id: `kvs#event_report_l2#gpu#${peerB}`, status: 'CLS_SERVING', spec_size: 1 });
      expect(names(r.key_locations[0].locations[0])).to.deep.equal(['linear_1']);
      expect(r.key_locations[1]).to.deep.equal({ locations: [] });
      const unknown = await byBackend('parity', { block_keys: [1500, 1501], location_spec_names: ['unknown_spec', 'unknown_spec'], backend_selectors: v6d(strategy) });
      expect(unknown.key_locations).to.deep.equal([{ locations: [] }, { locations: [] }]);
    }

    // PREFIX: A on [k0,k1,k3], B on [k0..k3] → B on all four keys.
    const pa = '10.0.15.3:80';
    const pb = '10.0.15.4:80';
    expect(code(await report('parity', pa, [1510, 1511, 1513].map((k) => add(k, [spec('tp0')]))))).to.equal('OK');
    expect(code(await report('parity', pb, [1510, 1511, 1512, 1513].map((k) => add(k, [spec('tp0')]))))).to.equal('OK');
    const prefix = await byBackend('parity', { block_keys: [1510, 1511, 1512, 1513], backend_selectors: v6d('LSS_V6D_PREFIX') });
    expect(prefix.key_locations.map((k: Json) => k.locations.map((l: Json) => l.id))).to.deep.equal(
      [0, 1, 2, 3].map(() => [`kvs#event_report_l2#gpu#${pb}`]),
    );

    // COVERAGE: A on [k0,k2,k3], B on [k1] → A on k0, k2, k3; k1 [].
    const ca = '10.0.15.5:80';
    const cb = '10.0.15.6:80';
    expect(code(await report('parity', ca, [1520, 1522, 1523].map((k) => add(k, [spec('tp0')]))))).to.equal('OK');
    expect(code(await report('parity', cb, [add(1521, [spec('tp0')])]))).to.equal('OK');
    const coverage = await byBackend('parity', { block_keys: [1520, 1521, 1522, 1523], backend_selectors: v6d('LSS_V6D_COVERAGE') });
    const idA = `kvs#event_report_l2#gpu#${ca}`;
    expect(coverage.key_locations.map((k: Json) => k.locations.map((l: Json) => l.id))).to.deep.equal([[idA], [], [idA], [idA]]);
  });

  it('Q-16 getCacheLocationsByBackend validation: INVALID_ARGUMENT without side effects; unknown instance → INSTANCE_NOT_EXIST', async () => {
    await write('parity', [1600]);
    const metricLines = async (): Promise<string> => {
      const text = await (await fetch(`${p.url}/metrics`)).text();
      return text
        .split('\n')
        .filter((l) => l.startsWith('kvcm_lookup_blocks_total') && l.includes('api="getCacheLocationsByBackend"'))
        .join('\n');
    };
    const before = await metricLines();
    const wr = { backend_type: 'ST_NFS', strategy: 'LSS_WEIGHTED_RANDOM' };
    const bad: Array<Record<string, unknown>> = [
      { block_keys: [1600] },
      { block_keys: [1600], backend_selectors: [] },
      { block_keys: [1600], backend_selectors: [{ backend_type: 263, strategy: 'LSS_WEIGHTED_RANDOM' }] },
      { block_keys: [1600], backend_selectors: [{ backend_type: 'ST_UNSPECIFIED', strategy: 'LSS_WEIGHTED_RANDOM' }] },
      { block_keys: [1600], backend_selectors: [wr, wr] },
      { block_keys: [1600], backend_selectors: [{ backend_type: 'ST_NFS', strategy: 'LSS_V6D_PREFIX' }] },
      { block_keys: [1600], backend_selectors: [{ backend_type: L1P5, strategy: 'LSS_V6D_COVERAGE' }] },
      { block_keys: [1600], backend_selectors: [{ backend_type: 'ST_NFS', strategy: 'LSS_UNSPECIFIED' }] },
      { block_keys: [1600], backend_selectors: [{ backend_type: 'ST_NFS' }] },
      { block_keys: [1600], query_type: 'QT_PREFIX_MATCH', backend_selectors: [wr] },
      { block_keys: [1600, 1601], location_spec_names: ['tp0'], backend_selectors: [wr] },
      { block_keys: [1600], location_spec_names: [''], backend_selectors: [wr] },
      { block_keys: [1600], block_mask: { offset: 2 }, backend_selectors: [wr] },
      { backend_selectors: [wr] },
    ];
    for (const body of bad) {
      const r = await byBackend('parity', body);
      expect(code(r), JSON.stringify(body)).to.equal('INVALID_ARGUMENT');
      expect(r.key_locations).to.deep.equal([]);
    }
    const unknownType = await byBackend('parity', { block_keys: [1600], backend_selectors: [{ backend_type: 263, strategy: 'LSS_WEIGHTED_RANDOM' }] });
    expect(unknownType.header.status.message).to.equal(
      'missing or invalid fields: {GetCacheLocationsByBackend: {backend_selectors=[{"backend_type":"ST_UNSPECIFIED","strategy":"LSS_WEIGHTED_RANDOM"}]}}',
    );
    expect(code(await byBackend('parity', { block_keys: [1600], query_type: 'QT_PREFIX_MATCH_WITH_MAMBA', backend_selectors: [wr] }))).to.equal('UNSUPPORTED');
    expect(code(await byBackend('nobody', { block_keys: [1600], backend_selectors: [wr] }))).to.equal('INSTANCE_NOT_EXIST');
    expect(await metricLines()).to.equal(before);
    // The valid request, for contrast.
    expect((await byBackend('parity', { block_keys: [1600], backend_selectors: [wr] })).key_locations[0].locations).to.have.length(1);
  });

  it('Q-17 getCacheLocationsByBackend hides a timed-out reporter, is visible again after HEARTBEAT, hides it after HOST_DOWN', async () => {
    const host = '10.0.17.1:80';
    const snap = await report('fast', host, [snapshot([{ key: 1700, specs: [spec('tp0', 'x://10.0.17.1:80/1700')] }])]);
    expect(code(snap)).to.equal('OK');
    const version = snap.committed_snapshot_version as string;
    const sel = { block_keys: [1700], backend_selectors: [{ backend_type: L2, strategy: 'LSS_V6D_PREFIX' }] };
    expect((await byBackend('fast', sel)).key_locations[0].locations).to.have.length(1);
    await waitFor(async () => (await byBackend('fast', sel)).key_locations[0].locations.length === 0, 10000, 'reporter timed out');
    expect(code(await report('fast', host, [heartbeat()]))).to.equal('OK');
    const back = await byBackend('fast', sel);
    expect(back.key_locations[0].locations[0].location_specs[0].uri).to.equal(`x://10.0.17.1:80/1700?s_version=${version}`);
    expect(code(await report('fast', host, [hostDown()]))).to.equal('OK');
    expect((await byBackend('fast', sel)).key_locations).to.deep.equal([{ locations: [] }]);
  });

  it('Q-18 getHostCacheState aggregates a host L1P5 and L2 locations; local == global == prefix_match_blocks, no p2p fields', async () => {
    const keys = [1800, 1801, 1802, 1803];
    const adds = (ks: number[]): unknown[] => ks.map((k) => add(k, [spec('tp0')]));
    const h1 = '10.0.18.1:80';
    const h2 = '10.0.18.2:80';
    const h3 = '10.0.18.3:80';
    for (const [host, ks, type] of [
      [h1, [1800, 1801], L1P5],
      [h1, [1800, 1803], L2],
      [h2, [1800, 1802], L1P5],
      [h2, [1800, 1801, 1803], L2],
      [h3, [1800], L2],
    ] as Array<[string, number[], string]>) {
      expect(code(await report('parity', host, adds(ks), type))).to.equal('OK');
    }
    const r = await p.call('getHostCacheState', { instance_id: 'parity', block_cache_keys: keys });
    expect(code(r)).to.equal('OK');
    expect(r.hosts).to.deep.equal([
      { host_ip_port: h2, local: '4', global: '4', prefix_match_blocks: '4' },
      { host_ip_port: h1, local: '2', global: '2', prefix_match_blocks: '2' },
      { host_ip_port: h3, local: '1', global: '1', prefix_match_blocks: '1' },
    ]);
  });

  it('R-04 events=[] for a registered instance returns the group extra_info and defaults, without refreshing liveness', async () => {
    const host = '10.0.4.1:80';
    const first = await report('fast', host, [add(400, [spec('tp0')])]);
    expect(first.committed_snapshot_version).to.match(HEX32);
    const sel = { block_keys: [400], backend_selectors: [{ backend_type: L2, strategy: 'LSS_WEIGHTED_RANDOM' }] };
    await waitFor(async () => (await byBackend('fast', sel)).key_locations[0].locations.length === 0, 10000, 'reporter timed out');
    const r = await report('fast', host, []);
    expect(code(r)).to.equal('OK');
    expect(r).to.deep.include({
      item_results: [],
      committed_snapshot_version: '',
      snapshot_required: false,
      retry_after_ms: '0',
      extra_info: JSON.stringify(CONTRACT),
    });
    // No liveness refresh: the timed-out reporter stays hidden.
    expect((await byBackend('fast', sel)).key_locations[0].locations).to.deep.equal([]);
    expect((await p.call('reportEvent', { instance_id: 'nobody', events: [] })).extra_info).to.equal('');
  });

  it('D-08 spec names need not be registered: linear_0, full_3, mamba_0, a#b are stored and visible; "" and a repeated name are INVALID_ARGUMENT', async () => {
    expect(code(await report('d08', '10.0.8.1:80', [add(801, [spec('linear_0')])]))).to.equal('OK');
    expect(code(await report('d08', '10.0.8.2:80', [snapshot([{ key: 802, specs: [spec('full_3'), spec('mamba_0')] }])]))).to.equal('OK');
    expect(code(await report('d08', '10.0.8.1:80', [add(803, [spec('a#b', 'x://h/ab')])]))).to.equal('OK');
    const r = await batchGet('d08', [801, 802, 803]);
    expect(r.locations.map(names)).to.deep.equal([['linear_0'], ['full_3', 'mamba_0'], ['a#b']]);
    const empty = await report('d08', '10.0.8.1:80', [add(804, [spec('')])]);
    expect([code(empty), empty.item_results]).to.deep.equal(['INVALID_ARGUMENT', ['INVALID_ARGUMENT']]);
    const twice = await report('d08', '10.0.8.1:80', [add(805, [spec('linear_0'), spec('linear_0', 'x://h/other')])]);
    expect([code(twice), twice.item_results]).to.deep.equal(['INVALID_ARGUMENT', ['INVALID_ARGUMENT']]);
    expect((await batchGet('d08', [804, 805])).locations.map((l: Json) => l.status)).to.deep.equal(['CLS_NOT_FOUND', 'CLS_NOT_FOUND']);
  });

  it('L-05 HOST_DOWN of a reporter with a generation, then HEARTBEAT, then REGISTER: snapshot_required true each time', async () => {
    const host = '10.0.5.1:80';
    expect((await report('parity', host, [add(500, [spec('tp0')])])).committed_snapshot_version).to.match(HEX32);
    const down = await report('parity', host, [hostDown()]);
    expect(code(down)).to.equal('OK');
    expect(down).to.deep.include({ item_results: [], snapshot_required: true, committed_snapshot_version: '' });
    const hb = await report('parity', host, [heartbeat()]);
    expect(code(hb)).to.equal('NODE_NOT_REGISTERED');
    expect(hb.snapshot_required).to.equal(true);
    const reg = await report('parity', host, [register(['gpu'])]);
    expect(code(reg)).to.equal('OK');
    expect(reg).to.deep.include({ snapshot_required: true, committed_snapshot_version: '' });
  });
});
