/**
 * kvcm-meta §10.1 E2E-01 and E2E-02: the published KVCM MetaService curl bodies, as written
 * (snake_case, trace ids included), against a fresh meta-svc process (on SQLite and on Redis) with the built-in
 * default config (§8) and a fresh data directory. Only `write_session_id` is replaced by the
 * value step 3 returned.
 *
 *   test ──curl bodies──▶ meta-svc (default config) ──▶ <tmp>/kvcm.db
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { MetaProcess } from '../helpers/meta-process.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';

// `any`: the responses are loosely typed JSON read field by field.
type Json = any;
const code = (r: Json): string => r.header.status.code as string;
const HEX32 = /^[0-9a-f]{32}$/;

/** The published bodies (KVCM docs/api/meta_service.md), keyed by step of §10.1. */
const published = {
  registerInstance: {
    trace_id: 'trace_id_123',
    instance_group: 'test_group',
    instance_id: 'test_instance_id',
    model_deployment: {
      model_name: 'test',
      dtype: 'fp16',
      use_mla: false,
      tp_size: 1,
      dp_size: 1,
      lora_name: 'custom_lora',
      pp_size: 1,
      extra: 'extra',
      user_data: 'custom_user_data',
    },
    block_size: 8,
    default_query_type: 'QT_PREFIX_MATCH',
    location_spec_infos: [{ name: 'tp0', size: 4096000 }],
  },
  getInstanceInfo: { trace_id: 'trace_id_124', instance_id: 'test_instance' },
  getCacheLocation: { trace_id: 'trace_id_125', instance_id: 'test_instance', block_keys: [123], block_mask: { offset: 0 } },
  startWriteCache: { trace_id: 'trace_id_126', instance_id: 'test_instance_id_2', block_keys: [1234, 4567, 1234], token_ids: [], write_timeout_seconds: 10 },
  finishWriteCache: {
    trace_id: 'trace_id_127',
    instance_id: 'test_instance',
    write_session_id: 'session_id_from_start_write',
    success_blocks: { bool_masks: { values: [true] } },
  },
  removeCache: { trace_id: 'trace_id_128', instance_id: 'test_instance', block_keys: [123], block_mask: { offset: 0 } },
  trimCache: { trace_id: 'trace_id_129', instance_id: 'test_instance', strategy: 'TS_REMOVE_ALL_CACHE', begin_timestamp: 0, end_timestamp: 0 },
  getCacheMeta: { trace_id: 'trace_id_130', instance_id: 'test_instance', block_keys: [123], block_mask: { offset: 0 }, detail_level: 1 },
  getCacheMetaDetail: { trace_id: 'trace_id_132', instance_id: 'test_instance', block_keys: [123, 456] },
  reportEvent: {
    trace_id: 'trace_id_131',
    instance_id: 'test_instance',
    host_ip_port: '192.168.2.1:8080',
    storage_type: 'ST_EVENT_REPORT_L2',
    events: [
      {
        event_type: 'EVENT_BLOCK_SNAPSHOT',
        block_snapshot: {
          blocks: [
            {
              block_key: '123',
              medium: 'gpu',
              specs: [{ name: 'full_attention:group=0:tp=0', uri: 'event_report://physical-storage:9600/gpu/123?size=4096' }],
            },
          ],
        },
      },
    ],
  },
};

for (const kind of STORE_KINDS) {
  describe(`kvcm-meta §10.1 E2E (published KVCM curl bodies, real process, default config) on ${kind}`, function () {
    this.timeout(60000);
    const stores = storeSuite(kind);
    let dir: string;
    let proc: MetaProcess | null = null;
    beforeEach(async () => {
      dir = mkdtempSync(join(tmpdir(), 'kvcm-e2e-'));
      proc = await MetaProcess.start(await stores.fresh(dir));
    });
    afterEach(async () => {
      await proc?.kill();
      proc = null;
      rmSync(dir, { recursive: true, force: true });
    });

    it('E2E-01 steps 1–11 in the §10.1 order', async () => {
      const p = proc as MetaProcess;
      const s1 = await p.call('registerInstance', published.registerInstance);
      expect(code(s1)).to.equal('OK');
      expect(JSON.parse(s1.storage_configs).map((s: Json) => s.global_unique_name)).to.deep.equal(['local_file']);

      const s2 = await p.call('getInstanceInfo', published.getInstanceInfo);
      expect(code(s2)).to.equal('OK');
      expect(s2.instance_group).to.equal('test_group');
      expect(s2.instance_info.block_size).to.equal(8);

      const s3 = await p.call('startWriteCache', published.startWriteCache);
      expect(code(s3)).to.equal('OK');
      expect(s3.write_session_id).to.match(/^[A-Za-z0-9]{32}$/);
      expect(s3.block_mask).to.deep.equal({ bool_masks: { values: [false, false, true] } });
      expect(s3.locations).to.have.length(2);
      expect(s3.locations.map((l: Json) => l.type)).to.deep.equal(['ST_NFS', 'ST_NFS']);
      expect(s3.locations[0].location_specs).to.deep.equal([
        { name: 'tp0', uri: 'file://local_file/data/kvcm/test_instance_id_2/1234_tp0?offset=0&size=4096000' },
      ]);

      const s4 = await p.call('finishWriteCache', { ...published.finishWriteCache, write_session_id: s3.write_session_id });
      expect(code(s4)).to.equal('OK');
      const onOwner = await p.call('getCacheMetaDetail', { instance_id: 'test_instance_id_2', block_keys: [1234, 4567] });
      expect(onOwner.items.map((it: Json) => it.locations.map((l: Json) => l.status))).to.deep.equal([['CLS_SERVING'], ['CLS_NOT_FOUND']]);
      // Rejects (fails the test) when the warning never comes.
      await p.waitForOutput(/finishWriteCache named another instance/);

      const s5 = await p.call('getCacheLocation', published.getCacheLocation);
      expect(code(s5)).to.equal('OK');
      expect(s5.locations).to.deep.equal([]);

      const s6 = await p.call('getCacheMeta', published.getCacheMeta);
      expect(code(s6)).to.equal('OK');
      expect(s6.locations).to.deep.equal([{ type: 'ST_UNSPECIFIED', spec_size: 0, location_specs: [], id: '', status: 'CLS_NOT_FOUND' }]);
      expect(s6.metas).to.deep.equal(['']);

      const s7 = await p.call('getCacheMetaDetail', published.getCacheMetaDetail);
      expect(code(s7)).to.equal('OK');
      expect(s7.items.map((it: Json) => [it.request_index, it.locations[0].status])).to.deep.equal([
        [0, 'CLS_NOT_FOUND'],
        [1, 'CLS_NOT_FOUND'],
      ]);

      expect(code(await p.call('removeCache', published.removeCache))).to.equal('OK');
      expect(code(await p.call('trimCache', published.trimCache))).to.equal('OK');

      const s10 = await p.call('reportEvent', published.reportEvent);
      expect(code(s10)).to.equal('OK');
      expect(s10.item_results).to.deep.equal([]);
      expect(s10.committed_snapshot_version).to.match(HEX32);
      expect(s10.snapshot_required).to.equal(false);
      expect(s10.retry_after_ms).to.equal('0');

      const s11 = await p.call('reportEvent', published.reportEvent);
      expect(code(s11)).to.equal('SNAPSHOT_RATE_LIMITED');
      expect(s11.item_results).to.deep.equal(['SNAPSHOT_RATE_LIMITED']);
      expect(BigInt(s11.retry_after_ms) > 0n).to.equal(true);
    });

    it('E2E-01 in the published order every call is OK', async () => {
      const p = proc as MetaProcess;
      const order = ['registerInstance', 'getInstanceInfo', 'getCacheLocation', 'startWriteCache'] as const;
      for (const rpc of order) expect(code(await p.call(rpc, published[rpc])), rpc).to.equal('OK');
      const start = await p.call('startWriteCache', { ...published.startWriteCache, block_keys: [77] });
      const fin = await p.call('finishWriteCache', { ...published.finishWriteCache, write_session_id: start.write_session_id });
      expect(code(fin)).to.equal('OK');
      for (const rpc of ['removeCache', 'reportEvent', 'trimCache', 'getCacheMeta'] as const) {
        expect(code(await p.call(rpc, published[rpc])), rpc).to.equal('OK');
      }
    });

    it('E2E-02 data path on test_instance: write [123,456], lookup, meta, remove, trim, report, host state', async () => {
      const p = proc as MetaProcess;
      const I = { instance_id: 'test_instance' };
      const s2 = await p.call('getInstanceInfo', published.getInstanceInfo);
      expect(code(s2)).to.equal('OK');

      const s3 = await p.call('startWriteCache', { ...published.startWriteCache, ...I, block_keys: [123, 456] });
      expect(code(s3)).to.equal('OK');
      expect(s3.block_mask).to.deep.equal({ offset: 0 });
      const s4 = await p.call('finishWriteCache', { ...published.finishWriteCache, write_session_id: s3.write_session_id, success_blocks: { offset: 2 } });
      expect(code(s4)).to.equal('OK');

      const s5 = await p.call('getCacheLocation', published.getCacheLocation);
      expect(code(s5)).to.equal('OK');
      expect(s5.locations[0].id).to.match(/^[A-Za-z0-9]{8}_merged$/);
      expect(s5.locations).to.deep.equal([
        {
          type: 'ST_NFS',
          spec_size: 2,
          location_specs: [
            { name: 'tp0', uri: 'file://local_file/data/kvcm/test_instance/123_tp0?offset=0&size=4096000' },
            {
              name: 'full_attention:group=0:tp=0',
              uri: 'file://local_file/data/kvcm/test_instance/123_full_attention:group=0:tp=0?offset=0&size=4096',
            },
          ],
          id: s5.locations[0].id,
          status: 'CLS_SERVING',
        },
      ]);

      const s6 = await p.call('getCacheMeta', published.getCacheMeta);
      expect(code(s6)).to.equal('OK');
      expect(s6.locations[0].type).to.equal('ST_NFS');
      expect(JSON.parse(s6.metas[0]).locations[0].status).to.equal('CLS_SERVING');

      const s7 = await p.call('getCacheMetaDetail', published.getCacheMetaDetail);
      expect(s7.items.map((it: Json) => it.locations.map((l: Json) => l.status))).to.deep.equal([['CLS_SERVING'], ['CLS_SERVING']]);
      expect(s7.items[1].prev_block_key).to.equal('123');

      expect(code(await p.call('removeCache', published.removeCache))).to.equal('OK');
      const after8 = await p.call('getCacheMetaDetail', published.getCacheMetaDetail);
      expect(after8.items.map((it: Json) => it.locations[0].status)).to.deep.equal(['CLS_NOT_FOUND', 'CLS_SERVING']);

      expect(code(await p.call('trimCache', published.trimCache))).to.equal('OK');
      const after9 = await p.call('getCacheMetaDetail', published.getCacheMetaDetail);
      expect(after9.items.map((it: Json) => it.locations[0].status)).to.deep.equal(['CLS_NOT_FOUND', 'CLS_NOT_FOUND']);

      const s10 = await p.call('reportEvent', published.reportEvent);
      expect(code(s10)).to.equal('OK');
      const hosts = await p.call('getHostCacheState', { instance_id: 'test_instance', block_cache_keys: [123] });
      expect(code(hosts)).to.equal('OK');
      expect(hosts.hosts).to.deep.equal([{ host_ip_port: '192.168.2.1:8080', local: '1', global: '1', prefix_match_blocks: '1' }]);
    });
  });
}
