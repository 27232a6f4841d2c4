/**
 * kvcm-meta §7.9 liveness lifecycle (L) and §7.13 restart behaviour (P) of reportEvent, with an
 * injected clock: the checker is driven by `lifecycle.tick()`, restarts reopen the same SQLite
 * file in a new service object (reporter state is process memory only).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { MetaProcess } from '../helpers/meta-process.js';
import { FakeClock, ReportHarness, HEX32, add, del, heartbeat, hostDown, register, snapshot, spec } from '../helpers/report-event-harness.js';

const TIMEOUT = 30_000;
const GRACE = 300_000;

describe('kvcm-meta §7.9/§7.13 reportEvent lifecycle and restart', () => {
  let h: ReportHarness;
  const opened: ReportHarness[] = [];
  let clock: FakeClock;

  async function start(dir?: string): Promise<ReportHarness> {
    const s = await ReportHarness.start({ clock, dir });
    opened.push(s);
    return s;
  }

  /** In-process restart over the same SQLite file: a fresh service object, same clock. */
  async function restart(): Promise<ReportHarness> {
    await h.close();
    h = await start(h.dir);
    return h;
  }

  beforeEach(async () => {
    clock = new FakeClock();
    h = await start();
  });
  afterEach(async () => {
    const dir = opened[0]?.dir;
    for (const s of opened.splice(0)) await s.close().catch(() => undefined);
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  describe('liveness (§7.9)', () => {
    it('L-01 no heartbeat for 31 s hides the reporter; a HEARTBEAT shows it again with the same version', async () => {
      const a = await h.report([register(), add(1, [spec('tp0')])]);
      expect(await h.visible(1n)).to.have.length(1);
      clock.advance(31_000);
      h.reporting.lifecycle.tick();
      expect(h.reporting.registry.livenessOf('test_instance', 8, '10.0.0.1:8000', clock.now())).to.equal('UNAVAILABLE');
      expect(await h.visible(1n)).to.have.length(0);
      const b = await h.report([heartbeat()]);
      expect(b.committed_snapshot_version).to.equal(a.committed_snapshot_version);
      expect(await h.visible(1n)).to.have.length(1);
    });

    it('L-02 ADDs alone do not refresh liveness; UNAVAILABLE mutations and snapshots stay hidden until HEARTBEAT', async () => {
      await h.report([register(), add(1, [spec('tp0')])]);
      for (let i = 0; i < 4; i++) {
        clock.advance(8_000);
        expect((await h.report([add(2 + i, [spec('tp0')])])).header.status.code).to.equal('OK');
      }
      expect(h.reporting.registry.livenessOf('test_instance', 8, '10.0.0.1:8000', clock.now())).to.equal('UNAVAILABLE');
      expect(await h.locations(5n)).to.have.length(1);
      expect(await h.visible(5n)).to.have.length(0);
      const snap = await h.report([snapshot([{ key: 9, specs: [spec('tp0')] }])]);
      expect(snap.header.status.code).to.equal('OK');
      expect(await h.visible(9n)).to.have.length(0);
      await h.report([heartbeat()]);
      expect(await h.visible(9n)).to.have.length(1);
    });

    it('L-03 beyond timeout + grace: NODE_NOT_REGISTERED and metadata cleaned; REGISTER starts over with version ""', async () => {
      await h.report([register(), add(1, [spec('tp0')])]);
      clock.advance(TIMEOUT + GRACE + 1);
      h.reporting.lifecycle.tick();
      await h.reporting.cleanup.idle();
      expect(await h.locations(1n)).to.have.length(0);
      const hb = await h.report([heartbeat()]);
      expect(hb.header.status.code).to.equal('NODE_NOT_REGISTERED');
      const add2 = await h.report([add(2, [spec('tp0')])]);
      expect(add2.header.status.code).to.equal('NODE_NOT_REGISTERED');
      const reg = await h.report([register()]);
      expect(reg.header.status.code).to.equal('OK');
      expect(reg.committed_snapshot_version).to.equal('');
      expect(reg.snapshot_required).to.equal(true);
    });

    it('L-04 HOST_DOWN twice: OK, hidden at once, cleaned async; host B of the same instance unaffected', async () => {
      await h.report([add(1, [spec('tp0')])], 'hostA:1');
      await h.report([add(1, [spec('tp0')])], 'hostB:1');
      h.store.failNext('scanLocations'); // the first cleanup pass fails: data must already be hidden
      const a = await h.report([hostDown()], 'hostA:1');
      expect(a.header.status.code).to.equal('OK');
      expect(a.committed_snapshot_version).to.equal('');
      expect((await h.visible(1n)).map((l) => l.locationId)).to.deep.equal(['kvs#event_report_l2#gpu#hostB:1']);
      expect((await h.report([hostDown()], 'hostA:1')).header.status.code).to.equal('OK');
      await h.reporting.cleanup.idle();
      expect((await h.locations(1n)).map((l) => l.locationId)).to.deep.equal(['kvs#event_report_l2#gpu#hostB:1']);
      expect((await h.report([hostDown()], 'never-seen:1')).header.status.code).to.equal('OK');
    });
  });

  describe('restart (§7.13)', () => {
    it('P-03 history hidden after restart; first HEARTBEAT exposes it soft; first ADD elsewhere makes a new version', async () => {
      const before = await h.report([snapshot([{ key: 1, specs: [spec('tp0'), spec('tp1')] }])], 'hostA:1');
      await h.report([add(2, [spec('tp0')])], 'hostB:1');
      await restart();
      expect(await h.visible(1n)).to.have.length(0);
      expect(await h.locations(1n)).to.have.length(1);
      const hb = await h.report([heartbeat()], 'hostA:1');
      expect(hb.header.status.code).to.equal('OK');
      expect(hb.snapshot_required).to.equal(true);
      expect(hb.committed_snapshot_version).to.equal('');
      expect(await h.visible(1n)).to.have.length(1);
      const add1 = await h.report([add(3, [spec('tp0')])], 'hostB:1');
      expect(add1.header.status.code).to.equal('OK');
      expect(add1.snapshot_required).to.equal(true);
      expect(add1.committed_snapshot_version).to.match(HEX32).and.not.equal(before.committed_snapshot_version);
      expect(await h.visible(2n)).to.have.length(1);
      await h.report([add(1, [spec('tp0')])], 'hostA:1');
      const specs = (await h.locations(1n))[0]?.specs ?? [];
      expect(specs.find((s) => s.name === 'tp1')?.uri).to.contain(before.committed_snapshot_version);
    });

    it('P-04 tombstone and rate limit are forgotten by a restart; a snapshot after restart is strict again', async () => {
      await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])]);
      await h.report([hostDown()]);
      await h.report([snapshot([{ key: 2, specs: [spec('tp0')] }])], 'hostB:1');
      await restart();
      const s = await h.report([snapshot([{ key: 3, specs: [spec('tp0')] }])]);
      expect(s.header.status.code).to.equal('OK');
      const s2 = await h.report([snapshot([{ key: 4, specs: [spec('tp0')] }])], 'hostB:1');
      expect(s2.header.status.code).to.equal('OK');
      const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000');
      expect(rep?.fence).to.equal(s.committed_snapshot_version);
      expect(await h.visible(3n)).to.have.length(1);
    });

    it('P-05 a reporter that never returns after restart loses its locations after timeout + grace', async () => {
      await h.report([add(1, [spec('tp0')])], 'gone:1');
      await h.report([add(1, [spec('tp0')])], 'back:1');
      await restart();
      await h.report([heartbeat()], 'back:1');
      clock.advance(TIMEOUT + GRACE - 1000);
      h.reporting.lifecycle.tick();
      await h.reporting.cleanup.idle();
      expect(await h.locations(1n)).to.have.length(2);
      await h.report([heartbeat()], 'back:1');
      clock.advance(2000);
      h.reporting.lifecycle.tick();
      await h.reporting.cleanup.idle();
      expect((await h.locations(1n)).map((l) => l.locationId)).to.deep.equal(['kvs#event_report_l2#gpu#back:1']);
      expect(await h.visible(1n)).to.have.length(1);
    });
  });

  it('§7.5 DELETE by an UNAVAILABLE reporter applies but does not refresh liveness', async () => {
    await h.report([add(1, [spec('tp0'), spec('tp1')])]);
    clock.advance(TIMEOUT + 1);
    expect((await h.report([del(1, ['tp0'])])).header.status.code).to.equal('OK');
    expect(h.reporting.registry.livenessOf('test_instance', 8, '10.0.0.1:8000', clock.now())).to.equal('UNAVAILABLE');
  });
});

describe('kvcm-meta §7.13 reportEvent restart (real processes)', function () {
  this.timeout(60000);
  let dir = '';
  let proc: MetaProcess | null = null;
  afterEach(async () => {
    await proc?.kill();
    proc = null;
    rmSync(dir, { recursive: true, force: true });
  });

  it('P-03 kill -9 after a snapshot: history hidden until the first HEARTBEAT, which exposes it in soft mode', async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvcm-report-restart-'));
    const db = join(dir, 'data', 'kvcm.db');
    const base = { instance_id: 'test_instance', host_ip_port: '192.168.2.1:8080', storage_type: 'ST_EVENT_REPORT_L2' };
    const lookup = { instance_id: 'test_instance', query_type: 'QT_BATCH_GET', block_keys: [123] };
    const hit = (r: { locations: Array<{ type: string }> }): boolean => r.locations[0]?.type === 'ST_EVENT_REPORT_L2';
    proc = await MetaProcess.start(db);
    const snap = await proc.call('reportEvent', {
      ...base,
      events: [snapshot([{ key: 123, specs: [spec('tp0', 'event_report://192.168.2.1:8080/123')] }])],
    });
    expect(snap.header.status.code).to.equal('OK');
    expect(hit(await proc.call('getCacheLocation', lookup))).to.equal(true);
    await proc.kill();

    proc = await MetaProcess.start(db);
    expect(hit(await proc.call('getCacheLocation', lookup))).to.equal(false);
    const hb = await proc.call('reportEvent', { ...base, events: [heartbeat()] });
    expect(hb.header.status.code).to.equal('OK');
    expect(hb.snapshot_required).to.equal(true);
    expect(hb.committed_snapshot_version).to.equal('');
    expect(hit(await proc.call('getCacheLocation', lookup))).to.equal(true);
  });
});
