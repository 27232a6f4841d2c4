/**
 * kvcm-meta §7 reportEvent over a real HTTP edge and a real SQLite file: register (R), delta
 * (D), snapshot (S), concurrency (C), validation (V) and the reporter half of I-05.
 *
 *   test ──POST /api/reportEvent──▶ MetaHttpServer ──▶ executor ──▶ FaultyMetaStore ──▶ SQLite
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'chai';
import { parseMetaConfig } from '../../meta-svc/config/meta-config.js';
import { startMetaService, type MetaServiceHandle } from '../../meta-svc/meta-service.js';
import { SqliteMetaStore } from '../../meta-svc/store/sqlite-meta-store.js';
import { silentLogger } from '../../shared/log/logger.js';
import { freePort } from '../helpers/ports.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import { ReportHarness, HEX32, add, del, heartbeat, hostDown, register, snapshot, spec } from '../helpers/report-event-harness.js';

for (const kind of STORE_KINDS) {
  describe(`kvcm-meta §7 reportEvent on ${kind}`, () => {
    const stores = storeSuite(kind);
    let h: ReportHarness;
    beforeEach(async () => {
      h = await ReportHarness.start({ timings: { snapshotDeltaDrainTimeoutMs: 200 }, redis: kind === 'redis' ? stores.redis : undefined });
    });
    afterEach(async () => {
      await h.close();
      h.removeDir();
    });

    describe('register (§7.5, §7.6)', () => {
      it('R-01 REGISTER merges media; two REGISTERs share one result, an invalid one is INVALID_ARGUMENT', async () => {
        const a = await h.report([register(['gpu'])]);
        expect(a.header.status.code).to.equal('OK');
        expect(a.snapshot_required).to.equal(true);
        expect(a.committed_snapshot_version).to.equal('');
        const b = await h.report([register(['disk'])]);
        expect(b.header.status.code).to.equal('OK');
        const r = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000');
        expect([...(r?.media ?? [])].sort()).to.deep.equal(['disk', 'gpu']);
        const c = await h.report([register(['ssd']), register(['bad#medium']), register(['NVME'])]);
        expect(c.header.status.code).to.equal('INVALID_ARGUMENT');
        expect(c.item_results).to.deep.equal(['OK', 'INVALID_ARGUMENT', 'OK']);
        expect([...(r?.media ?? [])].sort()).to.deep.equal(['disk', 'gpu', 'nvme', 'ssd']);
      });

      it('R-02 fresh [REGISTER, ADD, HEARTBEAT]; fresh ADD alone; fresh [REGISTER, SNAPSHOT, HEARTBEAT]', async () => {
        const a = await h.report([register(), add(1, [spec('tp0')]), heartbeat()]);
        expect(a.header.status.code).to.equal('OK');
        expect(a.item_results).to.deep.equal([]);
        expect(a.committed_snapshot_version).to.match(HEX32);
        expect(a.snapshot_required).to.equal(true);
        const b = await h.report([add(2, [spec('tp0')])], '10.0.0.2:8000');
        expect(b.header.status.code).to.equal('OK');
        expect(await h.visible(2n)).to.have.length(1);
        const c = await h.report([register(), snapshot([{ key: 3, specs: [spec('tp0')] }]), heartbeat()], '10.0.0.3:8000');
        expect(c.header.status.code).to.equal('OK');
        expect(c.snapshot_required).to.equal(false);
        expect(c.committed_snapshot_version).to.match(HEX32);
      });

      it('R-03 events=[] with an unknown instance is a default OK; extra_info on success and partial failure', async () => {
        const a = await h.post({ instance_id: 'nobody', events: [] });
        expect(a.header.status.code).to.equal('OK');
        expect(a).to.include({ committed_snapshot_version: '', retry_after_ms: '0', snapshot_required: false, extra_info: '' });
        expect(a.item_results).to.deep.equal([]);
        const ok = await h.report([heartbeat()]);
        expect(ok.extra_info).to.equal('{"a":1}');
        const partial = await h.report([add(1, [spec('tp0')]), add(1, [spec('tp0')], 'a#b')]);
        expect(partial.header.status.code).to.equal('INVALID_ARGUMENT');
        expect(partial.extra_info).to.equal('{"a":1}');
      });
    });

    describe('deltas (§7.5)', () => {
      it('D-01 tombstoned reporter: [ADD] NODE_NOT_REGISTERED; [ADD, REGISTER] → [NODE_NOT_REGISTERED, OK]; [REGISTER, ADD] OK', async () => {
        await h.report([register()]);
        await h.report([hostDown()]);
        const a = await h.report([add(1, [spec('tp0')])]);
        expect(a.header.status.code).to.equal('NODE_NOT_REGISTERED');
        expect(a.item_results).to.deep.equal(['NODE_NOT_REGISTERED']);
        await h.report([hostDown()]);
        const b = await h.report([add(1, [spec('tp0')]), register()]);
        expect(b.item_results).to.deep.equal(['NODE_NOT_REGISTERED', 'OK']);
        await h.report([hostDown()]);
        const c = await h.report([register(), add(1, [spec('tp0')])]);
        expect(c.header.status.code).to.equal('OK');
        expect(await h.visible(1n)).to.have.length(1);
      });

      it('D-02 first ADD then second ADD; first DELETE of a missing key; first request with invalid items only', async () => {
        const a = await h.report([add(1, [spec('tp0')])]);
        const b = await h.report([add(2, [spec('tp0')])]);
        expect(a.snapshot_required).to.equal(true);
        expect(b.snapshot_required).to.equal(false);
        expect(b.committed_snapshot_version).to.equal(a.committed_snapshot_version).and.match(HEX32);
        const c = await h.report([del(99, ['tp0'])], '10.0.0.2:8000');
        expect(c.header.status.code).to.equal('OK');
        expect(c.committed_snapshot_version).to.match(HEX32).and.not.equal(a.committed_snapshot_version);
        const d = await h.report([add('+1', [spec('tp0')])], '10.0.0.3:8000');
        expect(d.header.status.code).to.equal('INVALID_ARGUMENT');
        expect(d.committed_snapshot_version).to.equal('');
        expect(d.snapshot_required).to.equal(true);
      });

      it('D-03 [ADD ok, ADD bad medium, DELETE ok]: per-item results, valid items applied', async () => {
        await h.report([add(2, [spec('tp0')])]);
        const r = await h.report([add(1, [spec('tp0')]), add(3, [spec('tp0')], 'a#b'), del(2, ['tp0'])]);
        expect(r.item_results).to.deep.equal(['OK', 'INVALID_ARGUMENT', 'OK']);
        expect(r.header.status.code).to.equal('INVALID_ARGUMENT');
        expect(r.header.status.message).to.equal('ReportEvent partially failed');
        expect(await h.visible(1n)).to.have.length(1);
        expect(await h.locations(2n)).to.have.length(0);
        expect(await h.locations(3n)).to.have.length(0);
      });

      it('D-04 50 concurrent first ADDs on one reporter share one version', async () => {
        const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => h.report([add(i + 1, [spec('tp0')])])));
        const versions = new Set(rs.map((r) => r.committed_snapshot_version));
        expect(rs.every((r) => r.header.status.code === 'OK')).to.equal(true);
        expect(versions.size).to.equal(1);
        expect([...versions][0]).to.match(HEX32);
      });

      it('D-05 ADD replaces same-name specs only; folded [ADD A, DELETE A, ADD A(uri2)]; s_version appended', async () => {
        await h.report([add(1, [spec('tp0', 'x://h/old')])]);
        await h.report([add(1, [spec('tp1')])]);
        const r = await h.report([add(1, [spec('tp0', 'x://h/new')])]);
        const [loc] = await h.locations(1n);
        const byName = new Map(loc?.specs.map((s) => [s.name, s.uri]));
        expect(byName.get('tp0')).to.equal(`x://h/new?s_version=${r.committed_snapshot_version}`);
        expect(byName.has('tp1')).to.equal(true);
        const applies = h.store.applied.length;
        const f = await h.report([add(2, [spec('tp0', 'x://h/a1')]), del(2, ['tp0']), add(2, [spec('tp0', 'x://h/uri2')])]);
        expect(f.item_results).to.deep.equal([]);
        expect(h.store.applied.length - applies).to.equal(1); // one transaction per run
        expect((await h.locations(2n))[0]?.specs.map((s) => s.uri)).to.deep.equal([`x://h/uri2?s_version=${f.committed_snapshot_version}`]);
        const v = await h.report([add(3, [spec('tp0', 'x://h/p?size=1')])]);
        expect((await h.locations(3n))[0]?.specs[0]?.uri).to.equal(`x://h/p?size=1&s_version=${v.committed_snapshot_version}`);
        await h.report([add(4, [spec('tp0', 'x://h/p?')]), add(5, [spec('tp0', 'x://h/p?a=1&')])]);
        expect((await h.locations(4n))[0]?.specs[0]?.uri).to.equal(`x://h/p?s_version=${v.committed_snapshot_version}`);
        expect((await h.locations(5n))[0]?.specs[0]?.uri).to.equal(`x://h/p?a=1&s_version=${v.committed_snapshot_version}`);
      });

      it('D-06 DELETE removes named specs; the last spec removes location and block; set semantics', async () => {
        await h.report([add(1, [spec('tp0'), spec('tp1')])]);
        await h.report([del(1, ['tp0'])]);
        expect((await h.locations(1n))[0]?.specs.map((s) => s.name)).to.deep.equal(['tp1']);
        await h.report([del(1, ['tp1'])]);
        expect(await h.locations(1n)).to.have.length(0);
        expect((await h.store.inner.getBlocks('test_instance', [1n])).size).to.equal(0);
        await h.report([add(2, [spec('tp0')])]);
        await h.report([add(2, [spec('tp0')])]);
        await h.report([del(2, ['tp0'])]);
        expect(await h.locations(2n)).to.have.length(0);
      });

      it('D-07 first delta with an injected store failure, then retry with the same version', async () => {
        h.store.failNext('apply');
        const a = await h.report([add(1, [spec('tp0')])]);
        expect(a.header.status.code).to.equal('INTERNAL_ERROR');
        expect(a.item_results).to.deep.equal(['INTERNAL_ERROR']);
        const b = await h.report([add(1, [spec('tp0')])]);
        expect(b.header.status.code).to.equal('OK');
        expect(b.committed_snapshot_version).to.match(HEX32);
        // The generation was created under the lease before the failed write (§7.6), so the retry keeps it.
        expect(b.committed_snapshot_version).to.equal(a.committed_snapshot_version);
        expect(await h.visible(1n)).to.have.length(1);
      });
    });

    describe('snapshots (§7.5, §7.7, §7.8)', () => {
      it('S-01 snapshot with gpu and disk blocks commits a 32-hex version in strict mode', async () => {
        const r = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }, { key: 2, medium: 'DISK', specs: [spec('tp0')] }])]);
        expect(r.header.status.code).to.equal('OK');
        expect(r.committed_snapshot_version).to.match(HEX32);
        const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000');
        expect(rep?.fence).to.equal(r.committed_snapshot_version);
        expect((await h.locations(2n))[0]?.locationId).to.equal('kvs#event_report_l2#disk#10.0.0.1:8000');
        expect(await h.visible(1n)).to.have.length(1);
        expect(await h.visible(2n)).to.have.length(1);
      });

      it('S-02 one key in two media is fine; duplicate key+medium, duplicate or empty spec names and empty specs are INVALID_ARGUMENT', async () => {
        const ok = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }, { key: 1, medium: 'disk', specs: [spec('tp0')] }])]);
        expect(ok.header.status.code).to.equal('OK');
        expect(await h.locations(1n)).to.have.length(2);
        const bads = [
          [{ key: '5', specs: [spec('tp0')] }, { key: '05', specs: [spec('tp0')] }],
          [{ key: 5, specs: [spec('tp0'), spec('tp0')] }],
          [{ key: 5, specs: [{ name: '', uri: 'x://h/p' }] }],
          [{ key: 5, specs: [] }],
        ];
        for (const blocks of bads) {
          const r = await h.report([snapshot(blocks)], '10.0.0.9:1');
          expect(r.header.status.code).to.equal('INVALID_ARGUMENT');
          expect(r.item_results).to.deep.equal(['INVALID_ARGUMENT']);
        }
        expect(await h.locations(5n)).to.have.length(0);
      });

      it('S-03 empty snapshot hides everything; an omitted block X is hidden and cleaned, an ADD on omitted Y keeps it', async () => {
        await h.report([add(1, [spec('tp0')]), add(2, [spec('tp0')]), add(3, [spec('tp0')])]);
        const e = await h.report([snapshot([])]);
        expect(e.header.status.code).to.equal('OK');
        expect(await h.visible(1n)).to.have.length(0);
        await h.reporting.cleanup.idle();
        expect(await h.locations(1n)).to.have.length(0);

        h.clock.advance(31_000);
        await h.report([heartbeat()]);
        await h.report([add(10, [spec('tp0')]), add(11, [spec('tp0')]), add(12, [spec('tp0')])]);
        h.clock.advance(31_000);
        await h.report([heartbeat()]);
        // Pause the cleanup's delete so the ADD on Y lands between the commit and the cleanup.
        h.store.failNext('scanLocations');
        const s = await h.report([snapshot([{ key: 10, specs: [spec('tp0')] }])]);
        expect(s.header.status.code).to.equal('OK');
        expect(await h.visible(11n)).to.have.length(0);
        expect(await h.visible(10n)).to.have.length(1);
        await h.reporting.cleanup.idle();
        await h.report([add(12, [spec('tp0')])]);
        expect(await h.visible(12n)).to.have.length(1);
        h.reporting.cleanup.afterSnapshot(h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')!);
        await h.reporting.cleanup.idle();
        expect(await h.locations(11n)).to.have.length(0);
        expect(await h.visible(12n)).to.have.length(1);
        expect(await h.visible(10n)).to.have.length(1);
      });

      it('S-04 second snapshot while one holds the gate; rate limit; failed snapshot then immediate retry', async () => {
        await h.report([add(1, [spec('tp0')])]);
        const pause = h.store.pauseNextApply();
        const first = h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])]);
        await pause.started;
        const second = await h.report([snapshot([{ key: 2, specs: [spec('tp0')] }])]);
        expect(second.header.status.code).to.equal('SNAPSHOT_IN_PROGRESS');
        pause.release();
        expect((await first).header.status.code).to.equal('OK');

        h.clock.advance(1000);
        const limited = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])]);
        expect(limited.header.status.code).to.equal('SNAPSHOT_RATE_LIMITED');
        expect(limited.item_results).to.deep.equal(['SNAPSHOT_RATE_LIMITED']);
        expect(Number(limited.retry_after_ms)).to.be.greaterThan(0).and.at.most(29000);

        h.store.failNext('apply');
        const failed = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])], '10.0.0.2:8000');
        expect(failed.header.status.code).to.equal('INTERNAL_ERROR');
        const retry = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])], '10.0.0.2:8000');
        expect(retry.header.status.code).to.equal('OK');
        expect(retry.retry_after_ms).to.equal('0');
      });

      it('S-05 snapshot with an injected store failure: INTERNAL_ERROR, soft mode, old version; full retry OK and strict', async () => {
        const first = await h.report([snapshot([{ key: 1, specs: [spec('tp0')] }])]);
        h.clock.advance(31_000);
        await h.report([heartbeat()]);
        h.store.failNext('apply');
        const failed = await h.report([snapshot([{ key: 2, specs: [spec('tp0')] }])]);
        expect(failed.header.status.code).to.equal('INTERNAL_ERROR');
        expect(failed.committed_snapshot_version).to.equal(first.committed_snapshot_version);
        const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000');
        expect(rep?.fence).to.equal('');
        expect(await h.visible(1n)).to.have.length(1);
        const retry = await h.report([snapshot([{ key: 2, specs: [spec('tp0')] }])]);
        expect(retry.header.status.code).to.equal('OK');
        expect(rep?.fence).to.equal(retry.committed_snapshot_version);
        expect(await h.visible(2n)).to.have.length(1);
        expect(await h.visible(1n)).to.have.length(0);
      });

      it('S-06 cleanup after HOST_DOWN and after a snapshot removes metadata without any outbound request', async () => {
        // The stored URIs point at a live HTTP server: cleanup must never contact it.
        let contacted = 0;
        const sink = createServer((_req, res) => {
          contacted++;
          res.end();
        });
        const port = await freePort();
        await new Promise<void>((r) => sink.listen(port, '127.0.0.1', r));
        try {
          const uri = (k: number): string => `http://127.0.0.1:${port}/kv/${k}`;
          await h.report([add(1, [spec('tp0', uri(1))]), add(2, [spec('tp0', uri(2))])]);
          await h.report([snapshot([{ key: 1, specs: [spec('tp0', uri(1))] }])]);
          await h.reporting.cleanup.idle();
          expect(await h.locations(2n)).to.have.length(0);
          expect(await h.locations(1n)).to.have.length(1);
          await h.report([hostDown()]);
          await h.reporting.cleanup.idle();
          expect(await h.locations(1n)).to.have.length(0);
          expect(contacted).to.equal(0);
        } finally {
          await new Promise<void>((r) => sink.close(() => r()));
        }
      });

      it('S-07 [SNAPSHOT, ADD], [SNAPSHOT, SNAPSHOT], [HOST_DOWN, HEARTBEAT] are whole-request INVALID_ARGUMENT', async () => {
        for (const events of [
          [snapshot([]), add(1, [spec('tp0')])],
          [snapshot([]), snapshot([])],
          [hostDown(), heartbeat()],
          [hostDown(), hostDown()],
        ]) {
          const r = await h.report(events);
          expect(r.header.status.code).to.equal('INVALID_ARGUMENT');
          expect(r.item_results).to.deep.equal([]);
          expect(r.committed_snapshot_version).to.equal('');
        }
        expect(h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')).to.equal(undefined);
      });
    });

    describe('concurrency (§7.7)', () => {
      it('C-01 HOST_DOWN while a snapshot and a delta wait wakes both with SNAPSHOT_REQUIRED; two reporters snapshot at once', async () => {
        await h.report([add(1, [spec('tp0')])]);
        const pause = h.store.pauseNextApply();
        const leased = h.report([add(2, [spec('tp0')])]);
        await pause.started;
        const snap = h.report([snapshot([{ key: 3, specs: [spec('tp0')] }])]);
        // Snapshot is draining; a new delta waits behind it.
        const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')!;
        await waitUntil(() => rep.gate.isSnapshotHeld);
        const waiting = h.report([add(4, [spec('tp0')])]);
        await waitUntil(() => rep.gate.waitingDeltas === 1);
        await h.report([hostDown()]);
        expect((await snap).header.status.code).to.equal('SNAPSHOT_REQUIRED');
        expect((await waiting).header.status.code).to.equal('SNAPSHOT_REQUIRED');
        pause.release();
        await leased;

        const [a, b] = await Promise.all([
          h.report([snapshot([{ key: 5, specs: [spec('tp0')] }])], '10.0.1.1:1'),
          h.report([snapshot([{ key: 5, specs: [spec('tp0')] }])], '10.0.1.2:1'),
        ]);
        expect(a?.header.status.code).to.equal('OK');
        expect(b?.header.status.code).to.equal('OK');
      });

      it('C-02 snapshot while a delta lease outlives the drain timeout: SNAPSHOT_IN_PROGRESS, version unchanged, gate reopened', async () => {
        const first = await h.report([add(1, [spec('tp0')])]);
        const pause = h.store.pauseNextApply();
        const leased = h.report([add(2, [spec('tp0')])]);
        await pause.started;
        const snap = await h.report([snapshot([{ key: 3, specs: [spec('tp0')] }])]);
        expect(snap.header.status.code).to.equal('SNAPSHOT_IN_PROGRESS');
        expect(snap.committed_snapshot_version).to.equal(first.committed_snapshot_version);
        const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')!;
        expect(rep.gate.isSnapshotHeld).to.equal(false);
        expect(rep.fence).to.equal('');
        pause.release();
        expect((await leased).header.status.code).to.equal('OK');
        expect((await h.report([add(4, [spec('tp0')])])).header.status.code).to.equal('OK');
      });

      it('C-03 delta waiting beyond the drain timeout gets SNAPSHOT_IN_PROGRESS; a leased delta applies before the snapshot', async () => {
        await h.report([add(1, [spec('tp0')])]);
        // A leased delta: the snapshot drains it, then commits.
        const pause = h.store.pauseNextApply();
        const leased = h.report([add(2, [spec('tp0')])]);
        await pause.started;
        const snapP = h.report([snapshot([{ key: 2, specs: [spec('tp1')] }])]);
        const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')!;
        await waitUntil(() => rep.gate.isSnapshotHeld);
        pause.release();
        expect((await leased).header.status.code).to.equal('OK');
        const s = await snapP;
        expect(s.header.status.code).to.equal('OK');
        // The snapshot replaced the delta's spec set: the delta applied first.
        expect((await h.locations(2n))[0]?.specs.map((x) => x.name)).to.deep.equal(['tp1']);

        // A snapshot writing beyond the drain timeout: the waiting delta times out, the snapshot commits.
        h.clock.advance(31_000);
        await h.report([heartbeat()]);
        const pause2 = h.store.pauseNextApply();
        const snap2 = h.report([snapshot([{ key: 7, specs: [spec('tp0')] }])]);
        await pause2.started;
        const d = await h.report([add(8, [spec('tp0')])]);
        expect(d.header.status.code).to.equal('SNAPSHOT_IN_PROGRESS');
        pause2.release();
        expect((await snap2).header.status.code).to.equal('OK');
        expect(await h.locations(8n)).to.have.length(0);
      });
    });

    describe('validation (§7.2, §7.4)', () => {
      it('V-01 `#` in host or medium, ST_NFS, group without L2', async () => {
        const a = await h.report([add(1, [spec('tp0')])], 'h#1:80');
        expect(a.header.status.code).to.equal('INVALID_ARGUMENT');
        expect(a.header.status.message).to.equal('missing or invalid fields: {ReportEvent: {host_ip_port="h#1:80"}}');
        const b = await h.report([add(1, [spec('tp0')], 'g#pu')]);
        expect(b.item_results).to.deep.equal(['INVALID_ARGUMENT']);
        const c = await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_NFS');
        expect(c.header.status).to.deep.equal({ code: 'INVALID_ARGUMENT', message: 'missing or invalid fields: {ReportEvent: {storage_type="ST_NFS"}}' });
        const d = await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L2', 'l1p5_only');
        expect(d.header.status.code).to.equal('INSTANCE_NOT_EXIST');
        const e = await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L2', 'nobody');
        expect(e.header.status.code).to.equal('INSTANCE_NOT_EXIST');
        expect(await h.locations(1n)).to.have.length(0);
        expect(h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')?.generation ?? '').to.equal('');
      });

      it('V-02 ADD carrying a block_delete payload; HEARTBEAT without heartbeat; other items applied', async () => {
        const r = await h.report([
          { event_type: 'EVENT_BLOCK_ADD', block_add: { block_key: '1', medium: 'gpu', specs: [spec('tp0')] }, block_delete: {} },
          { event_type: 'EVENT_HEARTBEAT' },
          { event_type: 'EVENT_UNSPECIFIED', heartbeat: {} },
          add(2, [spec('tp0')]),
        ]);
        expect(r.item_results).to.deep.equal(['INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'INVALID_ARGUMENT', 'OK']);
        expect(await h.locations(1n)).to.have.length(0);
        expect(await h.locations(2n)).to.have.length(1);
      });

      it('V-03 malformed keys, specs and URIs are INVALID_ARGUMENT; "18446744073709551615" ≡ "-1"', async () => {
        const bad = [
          add('+1', [spec('tp0')]),
          add(' 1', [spec('tp0')]),
          add('18446744073709551616', [spec('tp0')]),
          add('-9223372036854775809', [spec('tp0')]),
          add('', [spec('tp0')]),
          add(1, []),
          add(1, [spec('tp0', 'not a uri')]),
          add(1, [spec('tp0', 'x://h/p?s_version=0123456789abcdef0123456789abcdef')]),
          add(1, [spec('tp0', `x://h/${'a'.repeat(4096)}`)]),
          del(1, []),
          del(1, ['tp0', 'tp0']),
        ];
        const r = await h.report(bad);
        expect(r.item_results).to.deep.equal(bad.map(() => 'INVALID_ARGUMENT'));
        const ok = await h.report([add('18446744073709551615', [spec('tp0')]), add('007', [spec('tp0', 'event_report://x')])]);
        expect(ok.header.status.code).to.equal('OK');
        expect(await h.locations(-1n)).to.have.length(1);
        expect(await h.locations(7n)).to.have.length(1);
        await h.report([del('-1', ['tp0'])]);
        expect(await h.locations(-1n)).to.have.length(0);
      });
    });

    it('§9.3 drain wakes gate waiters with SNAPSHOT_REQUIRED; metrics count items and snapshots', async () => {
      await h.report([add(1, [spec('tp0')])]);
      const pause = h.store.pauseNextApply();
      const snap = h.report([snapshot([{ key: 2, specs: [spec('tp0')] }])]);
      await pause.started;
      const rep = h.reporting.registry.get('test_instance', 8, '10.0.0.1:8000')!;
      const waiting = h.report([add(3, [spec('tp0')])]);
      await waitUntil(() => rep.gate.waitingDeltas === 1);
      const text = await (await fetch(`${h.url}/metrics`)).text();
      expect(text).to.match(/kvcm_report_event_items_total\{event_type="EVENT_BLOCK_ADD",code="OK"\} 1/);
      const closing = h.server.close();
      expect((await waiting).header.status.code).to.equal('SNAPSHOT_REQUIRED');
      pause.release();
      expect((await snap).header.status.code).to.equal('SNAPSHOT_REQUIRED');
      await closing;
      expect(rep.fence).to.equal('');
      const snapshots = await h.metrics.snapshotTotal.get();
      expect(snapshots.values.find((v) => v.labels.result === 'snapshot_required')?.value).to.equal(1);
    });

    it('I-05 one host in two instances, and L1P5 vs L2 of one host, are independent reporters', async () => {
      await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L2');
      await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L1P5');
      await h.report([add(1, [spec('tp0')])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L2', 'other_instance');
      await h.report([hostDown()], '10.0.0.1:8000', 'ST_EVENT_REPORT_L2');
      await h.reporting.cleanup.idle();
      const locs = await h.visible(1n);
      expect(locs.map((l) => l.locationId)).to.deep.equal(['kvs#event_report_l1p5#gpu#10.0.0.1:8000']);
      expect(await h.visible(1n, 'other_instance')).to.have.length(1);
      await h.report([del(1, ['tp0'])], '10.0.0.1:8000', 'ST_EVENT_REPORT_L1P5');
      expect(await h.visible(1n, 'other_instance')).to.have.length(1);
    });
  });

  async function waitUntil(cond: () => boolean): Promise<void> {
    // Event-loop turns for SQLite; on Redis every step is a round trip, so the turns are spaced 1 ms apart.
    for (let i = 0; i < 500 && !cond(); i++) await new Promise((r) => (kind === 'redis' ? setTimeout(r, 1) : setImmediate(r)));
    if (!cond()) throw new Error('condition not reached');
  }
}

describe('kvcm-meta §7 reportEvent through startMetaService (§10.1 E2E-01 steps 10–11)', () => {
  let handle: MetaServiceHandle | null = null;
  let dir = '';
  afterEach(async () => {
    await handle?.close();
    handle = null;
    rmSync(dir, { recursive: true, force: true });
  });

  it('R-03 / E2E-01 steps 10-11 L2 snapshot on the default config, then the rate limit', async () => {
    dir = mkdtempSync(join(tmpdir(), 'kvcm-report-svc-'));
    const port = await freePort();
    const parsed = parseMetaConfig({ fileText: null, httpPortOverride: port, dbPathOverride: join(dir, 'kvcm.db'), hostname: 'test', firstIpv4: '127.0.0.1' });
    if (!parsed.ok) throw new Error(parsed.errors.join('\n'));
    const config = { ...parsed.config, http: { ...parsed.config.http, host: '127.0.0.1' } };
    handle = await startMetaService({ config, store: SqliteMetaStore.open(config.store.path), logger: silentLogger });
    const body = JSON.stringify({
      trace_id: 'trace_report_event',
      instance_id: 'test_instance',
      host_ip_port: '192.168.2.1:8080',
      storage_type: 'ST_EVENT_REPORT_L2',
      events: [{ event_type: 'EVENT_BLOCK_SNAPSHOT', block_snapshot: { blocks: [{ block_key: '123', medium: 'gpu', specs: [{ name: 'tp0', uri: 'event_report://192.168.2.1:8080/123' }] }] } }],
    });
    const post = async (): Promise<Record<string, unknown>> => (await (await fetch(`http://127.0.0.1:${port}/api/reportEvent`, { method: 'POST', body })).json()) as Record<string, unknown>;
    const first = await post();
    expect(first).to.deep.include({ item_results: [], snapshot_required: false, retry_after_ms: '0', extra_info: '' });
    expect((first['header'] as { status: { code: string } }).status.code).to.equal('OK');
    expect(first['committed_snapshot_version']).to.match(HEX32);
    const second = await post();
    expect((second['header'] as { status: { code: string } }).status.code).to.equal('SNAPSHOT_RATE_LIMITED');
    expect(second['item_results']).to.deep.equal(['SNAPSHOT_RATE_LIMITED']);
    expect(Number(second['retry_after_ms'])).to.be.greaterThan(0);
  });
});
