// kvcm-meta §4.1, §4.2, §5.2: registerInstance, getInstanceInfo and getClusterInfo over the
// real MetaService (HTTP on a free port, SQLite in a temp dir), conformance rows I-01..I-04, Q-11.
import { rmSync } from 'node:fs';
import { expect } from 'chai';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import { clusterInfo } from '../../meta-svc/rpc/instances.js';
import { MetaHarness, registration, type MetaHarnessOptions } from '../helpers/meta-service-harness.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import type { AnyJson } from '../helpers/meta-service-harness.js';

const GROUPS_CONFIG = JSON.stringify({
  storages: [
    { global_unique_name: 'local_file', type: 'file', root_path: './data/kvcm' },
    { global_unique_name: 'pool', type: 'pace_ssd', spec: { endpoint: 'tcp://x:1', key_count_per_file: 9 } },
    { global_unique_name: 'event_report_l2', type: 'event_report_l2' },
  ],
  instance_groups: [
    {
      name: 'test_group',
      quota_group_name: 'q1',
      storage_candidates: ['local_file', 'pool'],
      event_report_storage_candidates: ['event_report_l2'],
      extra_info: { a: 1 },
    },
    { name: 'other_group', storage_candidates: ['local_file'] },
    { name: 'tiny', storage_candidates: ['local_file'], max_instance_count: 1 },
  ],
});

// One suite per store (kvcm-meta §9.4); the body keeps its indentation so merges stay small.
for (const kind of STORE_KINDS) describe(`kvcm-meta §4.1/§5.2 instances on ${kind}`, () => {
  const stores = storeSuite(kind);
  const startOn = (o: MetaHarnessOptions = {}): Promise<MetaHarness> => MetaHarness.start({ ...o, redis: kind === 'redis' ? stores.redis : undefined });
  let h: MetaHarness | null = null;

  afterEach(async () => {
    await h?.close();
    h?.removeDir();
    h = null;
  });

  const info = async (id: string): Promise<AnyJson> => (await h!.rpc('getInstanceInfo', { instance_id: id })).body;

  it('I-01 registers a new instance in test_group; getInstanceInfo shows it, an unknown id is INSTANCE_NOT_EXIST', async () => {
    h = await startOn();
    const reg = await h.rpc('registerInstance', registration());
    expect(reg.status).to.equal(200);
    expect(reg.body.header.status).to.deep.equal({ code: 'OK', message: '' });
    expect(reg.body.header.request_id).to.match(/^[0-9a-f]{32}$/);
    const configs = JSON.parse(reg.body.storage_configs as string) as AnyJson[];
    expect(configs).to.deep.equal([
      { global_unique_name: 'local_file', nfs: { root_path: './data/kvcm', key_count_per_file: 1 }, check_storage_available_when_open: false },
    ]);
    expect(reg.body.extra_info).to.equal('');

    const got = await info('inst_a');
    expect(got.header.status.code).to.equal('OK');
    expect(got.instance_group).to.equal('test_group');
    expect(got.instance_info).to.deep.equal({
      quota_group_name: 'test_group',
      instance_group_name: 'test_group',
      instance_id: 'inst_a',
      block_size: 16,
      location_spec_infos: [
        { name: 'tp0', size: '1024' },
        { name: 'tp1', size: '2048' },
      ],
      model_deployment: {
        model_name: 'm',
        dtype: 'bf16',
        use_mla: false,
        tp_size: 2,
        dp_size: 1,
        lora_name: '',
        pp_size: 1,
        extra: 'e',
        user_data: 'u1',
        use_eagle_pop: false,
      },
      location_spec_groups: [{ name: 'g0', spec_names: ['tp0'] }],
      default_query_type: 'QT_BATCH_GET',
    });

    const unknown = await h.rpc('getInstanceInfo', { instance_id: 'nobody' });
    expect(unknown.status).to.equal(200);
    expect(unknown.body.header.status.code).to.equal('INSTANCE_NOT_EXIST');
    expect(unknown.body.instance_group).to.equal('');
    expect(unknown.body).not.to.have.property('instance_info');

    const missing = await h.rpc('getInstanceInfo', {});
    expect(missing.body.header.status).to.deep.equal({ code: 'INVALID_ARGUMENT', message: 'missing or invalid fields: {GetInstanceInfo: {instance_id}}' });
  });

  it('I-01 storage_configs lists every writable candidate in order with the group extra_info and quota group', async () => {
    h = await startOn({ configText: GROUPS_CONFIG });
    const reg = await h.rpc('registerInstance', registration());
    expect(reg.body.header.status.code).to.equal('OK');
    expect(reg.body.storage_configs).to.equal(
      '[{"global_unique_name":"local_file","nfs":{"root_path":"./data/kvcm","key_count_per_file":1},"check_storage_available_when_open":false},' +
        '{"global_unique_name":"pool","tair_mem_pool":{"key_count_per_file":1,"endpoint":"tcp://x:1","media_type":5},"check_storage_available_when_open":false}]',
    );
    expect(reg.body.extra_info).to.equal('{"a":1}');
    const got = await info('inst_a');
    expect(got.instance_info.quota_group_name).to.equal('q1');
    expect(got.instance_info.instance_group_name).to.equal('test_group');
  });

  it('I-01 registrations survive a restart', async () => {
    h = await startOn();
    const dir = h.dir;
    expect((await h.rpc('registerInstance', registration())).body.header.status.code).to.equal('OK');
    await h.close();
    h = await startOn({ dir });
    expect((await info('inst_a')).instance_info.block_size).to.equal(16);
    await h.close();
    h = null;
    // The second harness was given the dir, so it does not own it.
    rmSync(dir, { recursive: true, force: true });
  });

  it('I-02 re-registering the same identity is OK and replaces user_data and default_query_type', async () => {
    h = await startOn();
    expect((await h.rpc('registerInstance', registration())).body.header.status.code).to.equal('OK');
    // Same identity, spec and group lists in another order, camelCase spelling.
    const same = await h.rpc('registerInstance', {
      instanceGroup: 'test_group',
      instanceId: 'inst_a',
      blockSize: 16,
      defaultQueryType: 1,
      locationSpecInfos: [
        { name: 'tp1', size: '2048' },
        { name: 'tp0', size: 1024 },
      ],
      locationSpecGroups: [{ name: 'g0', specNames: ['tp0'] }],
      modelDeployment: { modelName: 'm', dtype: 'bf16', tpSize: 2, dpSize: 1, ppSize: 1, extra: 'e', userData: 'u1' },
    });
    expect(same.body.header.status.code).to.equal('OK');
    const changed = await h.rpc(
      'registerInstance',
      registration({
        default_query_type: 'QT_REVERSE_ROLL_SW_MATCH',
        model_deployment: { model_name: 'm', dtype: 'bf16', tp_size: 2, dp_size: 1, pp_size: 1, extra: 'e', user_data: 'u2' },
      }),
    );
    expect(changed.body.header.status.code).to.equal('OK');
    const got = await info('inst_a');
    expect(got.instance_info.default_query_type).to.equal('QT_REVERSE_ROLL_SW_MATCH');
    expect(got.instance_info.model_deployment.user_data).to.equal('u2');
    expect(got.instance_info.location_spec_infos.map((s: AnyJson) => s.name)).to.deep.equal(['tp0', 'tp1']);
  });

  it('I-03 another block_size, spec set, extra or group is DUPLICATE_ENTITY and changes nothing', async () => {
    h = await startOn({ configText: GROUPS_CONFIG });
    expect((await h.rpc('registerInstance', registration())).body.header.status.code).to.equal('OK');
    const before = await info('inst_a');
    const md = { model_name: 'm', dtype: 'bf16', tp_size: 2, dp_size: 1, pp_size: 1, extra: 'other', user_data: 'u9' };
    for (const overrides of [
      { block_size: 32, default_query_type: 'QT_PREFIX_MATCH' },
      { location_spec_infos: [{ name: 'tp0', size: 1024 }], location_spec_groups: [] },
      { location_spec_infos: [{ name: 'tp0', size: 1024 }, { name: 'tp1', size: 4096 }] },
      { location_spec_groups: [{ name: 'g0', spec_names: ['tp0', 'tp1'] }] },
      { model_deployment: md },
      { instance_group: 'other_group' },
    ]) {
      const r = await h.rpc('registerInstance', registration(overrides));
      expect(r.body.header.status.code, JSON.stringify(overrides)).to.equal('DUPLICATE_ENTITY');
      expect(r.body.storage_configs).to.equal('');
    }
    const after = await info('inst_a');
    expect(after.instance_info).to.deep.equal(before.instance_info);
  });

  it('I-04 unknown or missing group, block_size 0, bad spec lists → INVALID_ARGUMENT naming the fields', async () => {
    h = await startOn({ configText: GROUPS_CONFIG });
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ instance_group: 'nope' }, '{RegisterInstance: {instance_group="nope"}}'],
      [{ instance_group: undefined }, '{RegisterInstance: {instance_group}}'],
      [{ block_size: 0 }, '{RegisterInstance: {block_size=0}}'],
      [{ location_spec_infos: [{ name: 'tp0', size: 1 }, { name: 'tp0', size: 2 }], location_spec_groups: [] }, '{RegisterInstance: {location_spec_infos=[{"name":"tp0","size":"1"},{"name":"tp0","size":"2"}]}}'],
      [{ location_spec_infos: [], location_spec_groups: [] }, '{RegisterInstance: {location_spec_infos}}'],
      [{ location_spec_infos: [{ name: 'tp0', size: 0 }], location_spec_groups: [] }, '{RegisterInstance: {location_spec_infos=[{"name":"tp0","size":"0"}]}}'],
      [{ location_spec_groups: [{ name: 'g0', spec_names: ['zz'] }] }, '{RegisterInstance: {location_spec_groups=[{"name":"g0","spec_names":["zz"]}]}}'],
      [{ location_spec_groups: [{ name: 'g0', spec_names: [] }] }, '{RegisterInstance: {location_spec_groups=[{"name":"g0","spec_names":[]}]}}'],
      [{ instance_id: '' }, '{RegisterInstance: {instance_id}}'],
      [{ instance_id: 'a\nb' }, '{RegisterInstance: {instance_id="a\\nb"}}'],
      [{ instance_id: 'x'.repeat(257) }, `{RegisterInstance: {instance_id="${'x'.repeat(127)}}}`],
      [{ instance_group: 'nope', block_size: -1 }, '{RegisterInstance: {instance_group="nope", block_size=-1}}'],
    ];
    for (const [overrides, fields] of cases) {
      const r = await h.rpc('registerInstance', registration(overrides));
      expect(r.status).to.equal(200);
      expect(r.body.header.status, JSON.stringify(overrides)).to.deep.equal({ code: 'INVALID_ARGUMENT', message: `missing or invalid fields: ${fields}` });
    }
    expect((await h.rpc('getInstanceInfo', { instance_id: 'inst_a' })).body.header.status.code).to.equal('INSTANCE_NOT_EXIST');
    // A wrong JSON type is a §1.3 violation, not a business error.
    const typed = await h.rpc('registerInstance', registration({ block_size: 'sixteen' }));
    expect(typed.status).to.equal(400);
    expect(typed.text).to.equal('{}');
  });

  it('I-04 a second instance in a group with max_instance_count 1 → REACH_MAX_ENTITY_CAPACITY', async () => {
    h = await startOn({ configText: GROUPS_CONFIG });
    expect((await h.rpc('registerInstance', registration({ instance_group: 'tiny', instance_id: 'one' }))).body.header.status.code).to.equal('OK');
    // Re-registering the one member is still fine.
    expect((await h.rpc('registerInstance', registration({ instance_group: 'tiny', instance_id: 'one' }))).body.header.status.code).to.equal('OK');
    const second = await h.rpc('registerInstance', registration({ instance_group: 'tiny', instance_id: 'two' }));
    expect(second.body.header.status.code).to.equal('REACH_MAX_ENTITY_CAPACITY');
    expect((await info('two')).header.status.code).to.equal('INSTANCE_NOT_EXIST');
  });

  it('I-04 concurrent registrations into a one-instance group admit exactly one', async () => {
    h = await startOn({ configText: GROUPS_CONFIG });
    const codes = await Promise.all(
      ['a', 'b', 'c', 'd'].map(async (id) => (await h!.rpc('registerInstance', registration({ instance_group: 'tiny', instance_id: id }))).body.header.status.code as string),
    );
    expect(codes.filter((c) => c === 'OK')).to.have.length(1);
    expect(codes.filter((c) => c === 'REACH_MAX_ENTITY_CAPACITY')).to.have.length(3);
  });

  it('Q-11 getClusterInfo: the node is its own leader on the HTTP port', async () => {
    h = await startOn();
    const r = await h.rpc('getClusterInfo', { instance_id: 'ignored' });
    expect(r.body.header.status.code).to.equal('OK');
    expect(r.body.self_node_id).to.equal(h.config.nodeId);
    expect(r.body.leader_node_id).to.equal(r.body.self_node_id);
    expect(r.body.leader_endpoint).to.deep.equal({
      node_id: h.config.nodeId,
      host: '127.0.0.1',
      meta_rpc_port: 0,
      meta_http_port: h.service.port,
      custom_info: '',
    });
    // Under the built-in default config the advertised port is 6382 and node_id <hostname>:6382.
    const parsed = parseMetaConfig({ fileText: null, hostname: 'node-a', firstIpv4: '10.1.2.3' });
    expect(parsed.ok).to.equal(true);
    if (!parsed.ok) return;
    const fields = clusterInfo(parsed.config).fields as AnyJson;
    expect(fields.self_node_id).to.equal('node-a:6382');
    expect(fields.leader_endpoint.meta_http_port).to.equal(6382);
    expect(fields.leader_endpoint.host).to.equal('10.1.2.3');
  });
});
