// kvcm-meta §8 configuration: the built-in default (CFG-01), validation with one
// `config error at <json.path>` line per problem and exit 2 (CFG-02), and bootstrap/group
// changes across restarts over a real SQLite file (CFG-03).
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import type { MetaConfig, MetaConfigInput } from '../../meta-svc/config/meta-config.js';
import { loadMetaConfig } from '../../meta-svc/config/load-meta-config.js';
import { checkStorageAvailability } from '../../meta-svc/config/storage-availability.js';
import { runToCompletion, type CompletedRun } from '../helpers/run-cli.js';
import { MetaHarness, capturingLogger } from '../helpers/meta-service-harness.js';
import type { AnyJson } from '../helpers/meta-service-harness.js';
import { freePort } from '../helpers/ports.js';

const HOST: Omit<MetaConfigInput, 'fileText'> = { hostname: 'box', firstIpv4: '10.0.0.7' };

function parse(config: unknown): MetaConfig {
  const r = parseMetaConfig({ ...HOST, fileText: typeof config === 'string' ? config : JSON.stringify(config) });
  if (!r.ok) throw new Error(r.errors.join('\n'));
  return r.config;
}

function errorsOf(config: unknown): readonly string[] {
  const r = parseMetaConfig({ ...HOST, fileText: typeof config === 'string' ? config : JSON.stringify(config) });
  expect(r.ok, 'config should be rejected').to.equal(false);
  return r.ok ? [] : r.errors;
}

const STORAGES = [
  { global_unique_name: 'local_file', type: 'file', root_path: './data/kvcm' },
  { global_unique_name: 'l1', type: 'event_report_l1p5' },
  { global_unique_name: 'l2', type: 'event_report_l2' },
  { global_unique_name: 'l2b', type: 'event_report_l2' },
];
const group = (extra: Record<string, unknown> = {}): Record<string, unknown> => ({
  name: 'g',
  storage_candidates: ['local_file'],
  event_report_storage_candidates: ['l1', 'l2'],
  ...extra,
});

describe('kvcm-meta §8 configuration', () => {
  let h: MetaHarness | null = null;
  const dirs: string[] = [];

  afterEach(async () => {
    await h?.close();
    h = null;
    for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
  });

  it('CFG-01 without a config file the §8 defaults and the built-in storages, groups and bootstrap instances apply', async () => {
    const r = parseMetaConfig({ ...HOST, fileText: null });
    expect(r.ok).to.equal(true);
    if (!r.ok) return;
    const c = r.config;
    expect(c.nodeId).to.equal('box:6382');
    expect(c.http).to.deep.equal({ host: '0.0.0.0', port: 6382, advertiseHost: '10.0.0.7', maxBodyBytes: 67108864 });
    expect(c.store).to.deep.equal({ type: 'sqlite', path: './data/kvcm.db', synchronous: 'NORMAL' });
    expect(c.eventReport).to.deep.equal({
      heartbeatTimeoutMs: 30000,
      cleanupGraceMs: 300000,
      livenessCheckIntervalMs: 5000,
      snapshotMinIntervalMs: 30000,
      snapshotDeltaDrainTimeoutMs: 10000,
    });
    expect(c.write).to.deep.equal({ defaultTimeoutSeconds: 30, maxTimeoutSeconds: 3600 });
    expect(c.limits).to.deep.equal({ maxKeysPerRequest: 100000, maxEventsPerRequest: 100000 });
    expect(c.storages.map((s) => [s.globalUniqueName, s.kind, s.storageType, s.eventReport])).to.deep.equal([
      ['local_file', 'file', 4, false],
      ['event_report_l1p5', 'event_report_l1p5', 7, true],
      ['event_report_l2', 'event_report_l2', 8, true],
    ]);
    const file = c.storages[0]!;
    expect([file.rootPath, file.keyCountPerFile, file.checkStorageAvailableWhenOpen, file.available, file.spec.size]).to.deep.equal([
      './data/kvcm',
      1,
      false,
      true,
      0,
    ]);
    expect(c.instanceGroups.map((g) => g.name)).to.deep.equal(['default', 'test_group']);
    const tg = c.instanceGroups[1]!;
    expect(tg).to.deep.equal({
      name: 'test_group',
      quotaGroupName: 'test_group',
      storageCandidates: ['local_file'],
      eventReportStorageCandidates: ['event_report_l1p5', 'event_report_l2'],
      maxInstanceCount: 0,
      quotaBytes: 0n,
      extraInfo: '',
      userData: '',
    });
    expect(c.bootstrapInstances.map((b) => [b.instanceId, b.blockSize, b.locationSpecInfos.length, b.defaultQueryType])).to.deep.equal([
      ['test_instance', 8, 2, 2],
      ['test_instance_id_2', 8, 1, 2],
    ]);
    expect(Object.isFrozen(c) && Object.isFrozen(c.http) && Object.isFrozen(tg.storageCandidates)).to.equal(true);

    // The flags override http.port and store.path (and node_id follows the port).
    const o = parseMetaConfig({ ...HOST, fileText: null, httpPortOverride: 7000, dbPathOverride: '/tmp/x.db' });
    expect(o.ok && [o.config.http.port, o.config.store.path, o.config.nodeId]).to.deep.equal([7000, '/tmp/x.db', 'box:7000']);

    // And the running service registers the bootstrap instances (E2E-01 runs on this config in kvcm-meta.e2e.test.ts).
    h = await MetaHarness.start();
    dirs.push(h.dir);
    for (const id of ['test_instance', 'test_instance_id_2']) {
      const got = await h.rpc('getInstanceInfo', { instance_id: id });
      expect(got.body.header.status.code).to.equal('OK');
      expect(got.body.instance_info.block_size).to.equal(8);
      expect(got.body.instance_info.model_deployment.user_data).to.equal('custom_user_data');
    }
  });

  it('CFG-02 heartbeat_timeout_ms 0 / -1, unknown storage, L2 twice, event storage as a candidate, unknown key: one line per error', () => {
    expect(errorsOf({ event_report: { heartbeat_timeout_ms: 0 } })).to.deep.equal([
      'config error at event_report.heartbeat_timeout_ms: must be in [1, 2147483647], got 0',
    ]);
    expect(errorsOf({ event_report: { heartbeat_timeout_ms: -1 } })).to.deep.equal([
      'config error at event_report.heartbeat_timeout_ms: must be in [1, 2147483647], got -1',
    ]);
    expect(errorsOf({ storages: STORAGES, instance_groups: [group({ storage_candidates: ['nowhere'] })] })).to.deep.equal([
      'config error at instance_groups[0].storage_candidates[0]: unknown storage "nowhere"',
    ]);
    expect(errorsOf({ storages: STORAGES, instance_groups: [group({ event_report_storage_candidates: ['l2', 'l2b'] })] })).to.deep.equal([
      'config error at instance_groups[0].event_report_storage_candidates[1]: a second event_report_l2 storage ("l2" already listed)',
    ]);
    expect(errorsOf({ storages: STORAGES, instance_groups: [group({ event_report_storage_candidates: ['l2', 'l2'] })] })).to.deep.equal([
      'config error at instance_groups[0].event_report_storage_candidates[1]: storage "l2" listed twice',
    ]);
    expect(errorsOf({ storages: STORAGES, instance_groups: [group({ storage_candidates: ['local_file', 'l1'] })] })).to.deep.equal([
      'config error at instance_groups[0].storage_candidates[1]: event-report storage "l1" cannot be a writable candidate',
    ]);
    expect(errorsOf({ storages: STORAGES, instance_groups: [group({ event_report_storage_candidates: ['local_file'] })] })).to.deep.equal([
      'config error at instance_groups[0].event_report_storage_candidates[0]: storage "local_file" is not an event-report storage',
    ]);
    expect(errorsOf({ bogus: 1, http: { port: 1, prot: 2 }, storages: [{ ...STORAGES[0], extra: true }] })).to.deep.equal([
      'config error at bogus: unknown key',
      'config error at http.prot: unknown key',
      'config error at storages[0].extra: unknown key',
    ]);
  });

  it('CFG-02 every other §8 rule names its field; several problems give several lines', () => {
    const errors = errorsOf({
      node_id: 5,
      http: { port: 70000, max_body_bytes: 0 },
      store: { type: 'redis', synchronous: 'OFF', path: '' },
      storages: [
        { global_unique_name: 'bad name', type: 'file', root_path: '/x' },
        { global_unique_name: 'f', type: 'file' },
        { global_unique_name: 'f', type: 'floppy' },
        { global_unique_name: 'k', type: 'dummy', key_count_per_file: 2, spec: 3 },
        { global_unique_name: 'w', type: 'mooncake', event_report: { heartbeat_timeout_ms: 5 } },
      ],
      instance_groups: [
        { name: 'g', max_instance_count: -1, quota_bytes: -5 },
        { name: 'g' },
        { name: '' },
      ],
      event_report: { liveness_check_interval_ms: 30000 },
      write: { default_timeout_seconds: 0 },
      limits: { max_keys_per_request: 1.5, max_events_per_request: '10' },
      bootstrap_instances: [{ instance_group: 'nope', instance_id: 'b', block_size: 0, location_spec_infos: [{ name: 'tp0', size: 1 }] }, 7],
    });
    expect(errors).to.deep.equal([
      'config error at http.port: must be in [1, 65535], got 70000',
      'config error at http.max_body_bytes: must be in [1, 536870888], got 0',
      'config error at store.type: must be "sqlite", got "redis"',
      'config error at store.path: must not be empty',
      'config error at store.synchronous: must be "NORMAL" or "FULL", got "OFF"',
      'config error at event_report.liveness_check_interval_ms: must be < heartbeat_timeout_ms (30000 ≥ 30000)',
      'config error at storages[0].global_unique_name: must match ^[A-Za-z0-9_.-]{1,64}$, got "bad name"',
      'config error at storages[1].root_path: required for type file',
      'config error at storages[2].global_unique_name: duplicate storage name "f"',
      'config error at storages[2].type: unknown storage type "floppy" (expected one of file, nfs, dummy, hf3fs, vcns_hf3fs, mooncake, pace, pace_ssd, event_report_l1p5, event_report_l2)',
      'config error at storages[3].key_count_per_file: must be 1, got 2',
      'config error at storages[3].spec: expected an object',
      'config error at storages[4].event_report: only event-report storages may override event_report (type mooncake)',
      'config error at instance_groups[0].max_instance_count: must be ≥ 0, got -1',
      'config error at instance_groups[0].quota_bytes: expected an integer ≥ 0, got -5',
      'config error at instance_groups[1].name: duplicate group name "g"',
      'config error at instance_groups[2].name: must not be empty',
      'config error at write.default_timeout_seconds: must be in [1, 2147483647], got 0',
      'config error at limits.max_keys_per_request: expected an integer, got 1.5',
      'config error at limits.max_events_per_request: expected an integer, got string',
      'config error at bootstrap_instances[0].instance_group: missing or invalid fields: {RegisterInstance: {instance_group="nope"}}',
      'config error at bootstrap_instances[0].block_size: missing or invalid fields: {RegisterInstance: {block_size=0}}',
      'config error at bootstrap_instances[1]: expected a registerInstance request object',
      'config error at node_id: expected a string, got number',
    ]);
    expect(errorsOf('{"storages": [}')).to.deep.equal(["config error at $: not valid JSON: unexpected character \"}\" at offset 14"]);
    expect(errorsOf('[]')).to.deep.equal(['config error at $: expected an object, got array']);
    expect(errorsOf({ bootstrap_instances: [{ instance_group: 'test_group', instance_id: 'b', block_size: 'x' }] })).to.deep.equal([
      'config error at bootstrap_instances[0].block_size: expected int32 (an integer), got string "x"',
    ]);
  });

  it('CFG-02 a per-storage event_report override takes effect for that storage only; extra_info JSON is kept compact', () => {
    const text = JSON.stringify({
      storages: [STORAGES[0], { global_unique_name: 'l2', type: 'event_report_l2', event_report: { heartbeat_timeout_ms: 9000, cleanup_grace_ms: 1000 } }, STORAGES[1]],
      instance_groups: [group({ extra_info: '@EXTRA@', quota_group_name: 'q', quota_bytes: '@QUOTA@', user_data: 'ud' })],
      event_report: { snapshot_min_interval_ms: 1234 },
    });
    // Numbers JSON.stringify cannot write: the config keeps both exactly.
    const c = parse(text.replace('"@EXTRA@"', '{"a":[1,null,"x"],"b":2.50}').replace('"@QUOTA@"', '9007199254740993'));
    const l2 = c.storages.find((s) => s.globalUniqueName === 'l2')!;
    const l1 = c.storages.find((s) => s.globalUniqueName === 'l1')!;
    expect(l2.eventReportTimings).to.deep.equal({
      heartbeatTimeoutMs: 9000,
      cleanupGraceMs: 1000,
      livenessCheckIntervalMs: 5000,
      snapshotMinIntervalMs: 1234,
      snapshotDeltaDrainTimeoutMs: 10000,
    });
    expect(l1.eventReportTimings).to.deep.equal(c.eventReport);
    expect(c.eventReport.snapshotMinIntervalMs).to.equal(1234);
    const g = c.instanceGroups[0]!;
    expect([g.extraInfo, g.quotaGroupName, g.quotaBytes, g.userData]).to.deep.equal(['{"a":[1,null,"x"],"b":2.50}', 'q', 9007199254740993n, 'ud']);
    expect(errorsOf({ storages: [{ global_unique_name: 'l2', type: 'event_report_l2', event_report: { liveness_check_interval_ms: 40000 } }] })).to.deep.equal([
      'config error at storages[0].event_report.liveness_check_interval_ms: must be < heartbeat_timeout_ms (40000 ≥ 30000)',
    ]);
  });

  it('CFG-02 a missing file is a config error; meta-svc prints one line per error and exits 2', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvcm-cfg-'));
    dirs.push(dir);
    const missing = loadMetaConfig({ configFile: join(dir, 'absent.json') });
    expect(missing).to.deep.equal({ ok: false, errors: [`config error at $: cannot read --meta_config_file ${join(dir, 'absent.json')} (ENOENT)`] });

    const bad = join(dir, 'bad.json');
    writeFileSync(bad, JSON.stringify({ event_report: { heartbeat_timeout_ms: 0 }, unknown_key: true }));
    const expected = parseMetaConfig({ ...HOST, fileText: JSON.stringify({ event_report: { heartbeat_timeout_ms: 0 }, unknown_key: true }) });
    const run = async (args: string[], env: NodeJS.ProcessEnv = {}): Promise<CompletedRun> => runToCompletion('meta-svc/main.ts', [`--http_port=${await freePort()}`, ...args], env);
    const viaFlag = await run([`--meta_config_file=${bad}`]);
    expect(viaFlag.code).to.equal(2);
    expect(viaFlag.stderr.trim().split('\n')).to.deep.equal(expected.ok ? [] : [...expected.errors]);
    const viaEnv = await run([], { KVCM_META_CONFIG_FILE: join(dir, 'absent.json') });
    expect(viaEnv.code).to.equal(2);
    expect(viaEnv.stderr.trim()).to.equal(`config error at $: cannot read --meta_config_file ${join(dir, 'absent.json')} (ENOENT)`);
  });

  it('CFG-02 check_storage_available_when_open with a missing root_path marks the storage unavailable', () => {
    const c = parse({
      storages: [
        { global_unique_name: 'present', type: 'file', root_path: '/exists', check_storage_available_when_open: true },
        { global_unique_name: 'absent', type: 'file', root_path: '/missing', check_storage_available_when_open: true },
        { global_unique_name: 'unchecked', type: 'file', root_path: '/missing' },
      ],
    });
    const checked = checkStorageAvailability(c, (p) => p === '/exists');
    expect(checked.config.storages.map((s) => s.available)).to.deep.equal([true, false, true]);
    expect(checked.warnings).to.have.length(1);
    expect(checked.warnings[0]).to.contain('absent');
  });

  it('CFG-03 a bootstrap instance conflicting with the persisted one: WARN, persisted kept; a removed group: INSTANCE_NOT_EXIST, data kept', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvcm-cfg3-'));
    dirs.push(dir);
    const boot = (blockSize: number): Record<string, unknown> => ({
      instance_group: 'test_group',
      instance_id: 'boot',
      block_size: blockSize,
      location_spec_infos: [{ name: 'tp0', size: 64 }],
    });
    const config = (bootBlockSize: number, groups: string[]): string =>
      JSON.stringify({
        storages: [{ global_unique_name: 'local_file', type: 'file', root_path: '/data' }],
        instance_groups: groups.map((name) => ({ name, storage_candidates: ['local_file'] })),
        bootstrap_instances: groups.includes('test_group') ? [boot(bootBlockSize)] : [],
      });

    // First start registers `boot` (block_size 8) and writes a block on it.
    h = await MetaHarness.start({ dir, configText: config(8, ['test_group', 'other']) });
    const start = await h.rpc('startWriteCache', { instance_id: 'boot', block_keys: [77] });
    expect(start.body.header.status.code).to.equal('OK');
    const fin = await h.rpc('finishWriteCache', { instance_id: 'boot', write_session_id: start.body.write_session_id, success_blocks: { offset: 1 } });
    expect(fin.body.header.status.code).to.equal('OK');
    await h.close();

    // Restart with a conflicting bootstrap identity (block_size 16): WARN, the persisted one is kept.
    const cap = capturingLogger();
    h = await MetaHarness.start({ dir, configText: config(16, ['test_group', 'other']), logger: cap.logger });
    expect(cap.lines.some((l) => l.level === 40 && l.instance_id === 'boot' && /conflicts/.test(l.msg as string))).to.equal(true);
    expect((await h.rpc('getInstanceInfo', { instance_id: 'boot' })).body.instance_info.block_size).to.equal(8);
    await h.close();

    // Restart without test_group: WARN at startup, INSTANCE_NOT_EXIST for every RPC on it.
    const cap2 = capturingLogger();
    h = await MetaHarness.start({ dir, configText: config(8, ['other']), logger: cap2.logger });
    expect(cap2.lines.some((l) => l.level === 40 && l.instance_id === 'boot' && l.instance_group === 'test_group')).to.equal(true);
    expect((await h.rpc('getInstanceInfo', { instance_id: 'boot' })).body.header.status.code).to.equal('INSTANCE_NOT_EXIST');
    expect((await h.rpc('getCacheLocation', { instance_id: 'boot', block_keys: [77] })).body.header.status.code).to.equal('INSTANCE_NOT_EXIST');
    const reReg = await h.rpc('registerInstance', boot(8));
    expect(reReg.body.header.status.code).to.equal('INVALID_ARGUMENT');
    await h.close();

    // The group returns: the registration and its block are still there.
    h = await MetaHarness.start({ dir, configText: config(8, ['test_group', 'other']) });
    expect((await h.rpc('getInstanceInfo', { instance_id: 'boot' })).body.instance_info.block_size).to.equal(8);
    const hit = await h.rpc('getCacheLocation', { instance_id: 'boot', block_keys: [77] });
    expect(hit.body.header.status.code).to.equal('OK');
    expect(hit.body.locations).to.have.length(1);
  });
});
