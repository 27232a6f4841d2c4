/**
 * Issue 28: a reportEvent parsed, planned and written by the report worker answers and stores
 * exactly what the event loop's path does (kvcm-meta §7 unchanged), on both stores; and a
 * snapshot staged on Redis is landed exactly once, also when its writer dies after the commit.
 *
 *   test ──same requests──▶ harness A (event loop)  ──▶ store A
 *                       └─▶ harness B (worker, every body) ──▶ store B
 *
 * Responses and stored rows are compared after mapping each version token to its order of
 * first appearance (tokens are random per process, §7.6).
 */
import { expect } from 'chai';
import { CLS_SERVING, type StoreMutation, type StoredLocation } from '../../meta-svc/store/meta-store.js';
import { RedisMetaStore } from '../../meta-svc/store/redis-meta-store.js';
import { reporterKey } from '../../meta-svc/report/reporter-registry.js';
import { STORE_KINDS, storeSuite } from '../helpers/meta-stores.js';
import { ReportHarness, add, del, heartbeat, hostDown, register, snapshot, spec, type ReportResponse } from '../helpers/report-event-harness.js';

const H = '10.0.0.1:8000';
const L2 = 8;

/** Replaces every 32-hex token by `v<n>`, n = order of first appearance (shared across calls). */
class Tokens {
  private readonly seen = new Map<string, string>();
  norm(text: string): string {
    return text.replace(/[0-9a-f]{32}/g, (t) => {
      let v = this.seen.get(t);
      if (v === undefined) this.seen.set(t, (v = `v${this.seen.size}`));
      return v;
    });
  }
}

function normResponse(r: ReportResponse, tokens: Tokens): unknown {
  const { header, ...rest } = r;
  return JSON.parse(tokens.norm(JSON.stringify({ code: header.status.code, message: header.status.message, ...rest })));
}

function normRows(rows: readonly StoredLocation[], tokens: Tokens): unknown {
  return JSON.parse(tokens.norm(JSON.stringify(rows, (_k, v: unknown) => (typeof v === 'bigint' ? v.toString() : v))));
}

type Step = { readonly kind: 'report'; readonly events: unknown[]; readonly host?: string } | { readonly kind: 'raw'; readonly body: string } | { readonly kind: 'tick'; readonly ms: number };

/** Request sequences covering every unit kind, per-item failures, whole-request errors and 400s. */
const SCENARIOS: Record<string, { readonly steps: readonly Step[]; readonly keys: readonly bigint[] }> = {
  'R-01/R-02 register, merged media, first delta, heartbeat': {
    steps: [
      { kind: 'report', events: [register(['gpu'])] },
      { kind: 'report', events: [register(['ssd']), register(['bad#medium']), add(1, [spec('tp0')]), heartbeat()] },
      { kind: 'report', events: [add(2, [spec('tp0'), spec('tp1')]), add(2, [spec('tp2')], 'ssd'), del(2, ['tp0']), heartbeat()] },
    ],
    keys: [1n, 2n],
  },
  'D-03/D-05/D-06 partial failure, folding, deletes of missing and last specs': {
    steps: [
      { kind: 'report', events: [add(3, [spec('tp0')]), add(3, [spec('tp0')], 'a#b'), del(3, ['nope'])] },
      { kind: 'report', events: [add(4, [spec('a', 'x://h/1')]), del(4, ['a']), add(4, [spec('a', 'x://h/2')]), add(5, [spec('tp0'), spec('tp1')])] },
      { kind: 'report', events: [del(5, ['tp0', 'tp1']), del(6, ['tp0']), add(7, [spec('tp0', 'x://h/p?size=1')])] },
    ],
    keys: [3n, 4n, 5n, 6n, 7n],
  },
  'S-01/S-02/S-03/S-04 snapshots: commit, invalid, omitted blocks, rate limit': {
    steps: [
      { kind: 'report', events: [add(10, [spec('tp0')]), add(11, [spec('tp0')])] },
      { kind: 'report', events: [snapshot([{ key: 10, specs: [spec('tp0', 'x://s/10')] }, { key: '010', specs: [spec('tp0')] }])] },
      { kind: 'report', events: [register(['gpu']), snapshot([{ key: 10, specs: [spec('tp0', 'x://s/10')] }, { key: 12, medium: 'disk', specs: [spec('tp9')] }]), heartbeat()] },
      { kind: 'report', events: [add(11, [spec('tp1')])] },
      { kind: 'report', events: [snapshot([])] },
      { kind: 'tick', ms: 31_000 },
      { kind: 'report', events: [heartbeat(), snapshot(Array.from({ length: 300 }, (_, i) => ({ key: 100 + i, specs: [spec('tp0', `x://s/${i}`)] })))] },
    ],
    keys: [10n, 11n, 12n, 100n, 399n],
  },
  'S-07/V-01/V-03 whole-request and item validation': {
    steps: [
      { kind: 'report', events: [snapshot([{ key: 1, specs: [spec('tp0')] }]), add(1, [spec('tp0')])] },
      { kind: 'report', events: [hostDown(), heartbeat()] },
      { kind: 'report', events: [add('+1', [spec('tp0')]), add('18446744073709551615', [spec('tp0')]), add(20, []), add(21, [spec('tp0', 'no-scheme')])] },
      { kind: 'report', events: [add(22, [spec('tp0')])], host: 'bad host' },
      { kind: 'raw', body: JSON.stringify({ instance_id: 'nobody', events: [] }) },
      { kind: 'raw', body: JSON.stringify({ instance_id: 'test_instance', host_ip_port: '10.0.9.1:1', storage_type: 'ST_NFS', events: [heartbeat()] }) },
      { kind: 'raw', body: JSON.stringify({ instance_id: 'l1p5_only', host_ip_port: '10.0.9.1:1', storage_type: 'ST_EVENT_REPORT_L2', events: [heartbeat()] }) },
    ],
    keys: [-1n, 20n, 21n, 22n],
  },
  'L-05/D-01 HOST_DOWN, a tombstoned reporter, REGISTER again': {
    steps: [
      { kind: 'report', events: [add(30, [spec('tp0')])] },
      { kind: 'report', events: [hostDown()] },
      { kind: 'report', events: [add(31, [spec('tp0')]), register(['gpu'])] },
      { kind: 'report', events: [register(['gpu']), add(32, [spec('tp0')])] },
    ],
    keys: [30n, 31n, 32n],
  },
};

/** Bodies that are not a valid ReportEventRequest: HTTP 400 `{}` on both paths (§1.2, §1.3). */
const BAD_BODIES = ['{bad', '[]', '{"events":[{"event_type":"EVENT_BLOCK_ADD","block_add":{"block_key":5}}]}', '{"trace_id":7}', '{"events":{}}'];

for (const kind of STORE_KINDS) {
  describe(`issue 28 reportEvent through the report worker on ${kind}`, function () {
    this.timeout(60000);
    const stores = storeSuite(kind);
    // One pair for the whole block: both get every request in the same order, so their states
    // stay equal; each scenario reports as its own host (reporters are independent, §7).
    let loop: ReportHarness;
    let worker: ReportHarness;
    const tokens = { loop: new Tokens(), worker: new Tokens() };
    before(async () => {
      const redis = kind === 'redis' ? stores.redis : undefined;
      loop = await ReportHarness.start({ redis });
      worker = await ReportHarness.start({ redis, offloadMinBytes: 0 });
    });
    after(async () => {
      for (const h of [loop, worker]) {
        await h.close();
        h.removeDir();
      }
    });

    Object.entries(SCENARIOS).forEach(([name, scenario], n) => {
      const host = `10.0.${n}.1:8000`;
      it(`${name}: the worker's answers and rows equal the event loop's`, async () => {
        for (const step of scenario.steps) {
          if (step.kind === 'tick') {
            loop.clock.advance(step.ms);
            worker.clock.advance(step.ms);
            continue;
          }
          const [a, b] =
            step.kind === 'raw'
              ? await Promise.all([loop.post(step.body), worker.post(step.body)])
              : await Promise.all([loop.report(step.events, step.host ?? host), worker.report(step.events, step.host ?? host)]);
          expect(normResponse(b, tokens.worker), JSON.stringify(step).slice(0, 200)).to.deep.equal(normResponse(a, tokens.loop));
        }
        for (const h of [loop, worker]) await h.reporting.cleanup.idle();
        for (const key of scenario.keys) {
          expect(normRows(await worker.locations(key), tokens.worker), `key ${key}`).to.deep.equal(normRows(await loop.locations(key), tokens.loop));
        }
      });
    });

    it('§1.2 a body that is not a ReportEventRequest is HTTP 400 `{}` from the worker too', async () => {
      for (const body of BAD_BODIES) {
        for (const h of [loop, worker]) {
          const res = await fetch(`${h.url}/api/reportEvent`, { method: 'POST', body });
          expect(res.status, body).to.equal(400);
          expect(await res.text()).to.equal('{}');
        }
      }
      const notUtf8 = Buffer.from([0x7b, 0x22, 0xff, 0x22, 0x3a, 0x31, 0x7d]);
      expect((await fetch(`${worker.url}/api/reportEvent`, { method: 'POST', body: notUtf8 })).status).to.equal(400);
    });

    it('D-04 50 concurrent first ADDs through the worker share one version', async () => {
      const all = await Promise.all(Array.from({ length: 50 }, (_, i) => worker.report([add(500 + i, [spec('tp0')])], '10.0.99.1:8000')));
      expect(new Set(all.map((r) => r.committed_snapshot_version)).size).to.equal(1);
      expect(all.every((r) => r.header.status.code === 'OK')).to.equal(true);
    });
  });
}

describe('issue 28 Redis snapshot stages: landed exactly once, by whoever holds the gate next', function () {
  this.timeout(60000);
  const stores = storeSuite('redis');
  let h: ReportHarness;
  let store: RedisMetaStore;
  beforeEach(async () => {
    h = await ReportHarness.start({ redis: stores.redis, offloadMinBytes: 0 });
    store = h.store.inner as RedisMetaStore;
  });
  afterEach(async () => {
    await h.close();
    h.removeDir();
  });

  const target = { instanceId: 'test_instance', storageType: L2 as 8, hostIpPort: H, storageName: 'event_report_l2' };
  const owner = reporterKey(target.instanceId, L2, H);
  const staged = (candidate: string, keys: number[]): StoreMutation[] =>
    keys.map((k) => ({
      op: 'putLocation',
      instanceId: target.instanceId,
      blockKey: BigInt(k),
      location: { locationId: `kvs#event_report_l2#gpu#${H}`, storageName: 'event_report_l2', type: L2, status: CLS_SERVING, createTimeUs: 1n, specs: [spec('tp0', `x://s/${k}?s_version=${candidate}`)] },
      keepCreateTime: true,
    }));

  /** A writer that committed `candidate` and died after landing `landed` rows of it. */
  async function deadWriter(candidate: string, keys: number[], landed: number): Promise<void> {
    expect((await h.report([add(keys[0] as number, [spec('tp0', 'x://old')])])).header.status.code).to.equal('OK');
    await store.stageRows(candidate, owner, staged(candidate, keys));
    if (landed > 0) await store.applyStaged(candidate, landed);
    await h.reporting.sync.transition(target, () => {
      const r = h.reporting.registry.get(target.instanceId, L2, H);
      if (!r) throw new Error('no reporter');
      r.generation = r.fence = r.applying = candidate;
    });
  }

  it('a delta after a dead writer\'s commit lands the rest of the stage first, then writes over it', async () => {
    const c = 'c'.repeat(32);
    const keys = Array.from({ length: 1200 }, (_, i) => 2000 + i);
    await deadWriter(c, keys, 700);
    const r = await h.report([add(2001, [spec('tp0', 'x://delta')])]);
    expect(r.header.status.code).to.equal('OK');
    expect(r.committed_snapshot_version).to.equal(c);
    expect((await store.stages()).size).to.equal(0);
    for (const k of [2000n, 2699n, 2700n, 2002n, 3199n]) {
      expect((await h.visible(k)).map((l) => l.specs[0]?.uri), `key ${k}`).to.deep.equal([`x://s/${k}?s_version=${c}`]);
    }
    expect((await h.visible(2001n)).map((l) => l.specs[0]?.uri)).to.deep.equal([`x://delta?s_version=${c}`]);
    expect(h.reporting.registry.get(target.instanceId, L2, H)?.applying).to.equal('');
  });

  it('the background pass lands a dead writer\'s committed stage and drops a stage nobody will commit', async () => {
    const c = 'd'.repeat(32);
    await deadWriter(c, Array.from({ length: 900 }, (_, i) => 5000 + i), 0);
    await store.stageRows('e'.repeat(32), reporterKey(target.instanceId, L2, '10.0.0.2:1'), staged('e'.repeat(32), [9000]));
    await h.reporting.executor.maintainStages();
    expect((await store.stages()).size).to.equal(0);
    expect(await h.visible(5899n)).to.have.length(1);
    expect(await h.locations(9000n)).to.deep.equal([]);
    // The blocks the snapshot left out (key 5000's old ADD was overwritten; nothing else) stay clean.
    await h.reporting.cleanup.idle();
    expect((await h.visible(5000n))[0]?.specs[0]?.uri).to.equal(`x://s/5000?s_version=${c}`);
  });

  it('two replicas landing one stage at once write each row once', async () => {
    const c = 'f'.repeat(32);
    const keys = Array.from({ length: 2000 }, (_, i) => 8000 + i);
    await store.stageRows(c, owner, staged(c, keys));
    const other = await RedisMetaStore.open({ host: '127.0.0.1', port: stores.redis.port, db: 0, namespace: (store.keyPrefix.match(/^kvcm:\{(.*)\}:$/) as RegExpMatchArray)[1] as string });
    try {
      const land = async (s: RedisMetaStore): Promise<void> => {
        while ((await s.applyStaged(c, 100)) > 0) {
          // keep landing
        }
      };
      await Promise.all([land(store), land(other)]);
    } finally {
      await other.close();
    }
    const blocks = await store.getBlocks(target.instanceId, keys.map(BigInt));
    expect(blocks.size).to.equal(2000);
    expect([...blocks.values()].every((b) => b.locations.length === 1 && b.locations[0]?.rev === 1)).to.equal(true);
  });
});
