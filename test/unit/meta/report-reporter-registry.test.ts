/** kvcm-meta §7.5 / §7.9 reporter state, evaluated at read time with an injected clock. */
import { expect } from 'chai';
import { ReporterRegistry, type ReporterIdentity } from '../../../meta-svc/report/reporter-registry.js';
import { DEFAULT_EVENT_REPORT_TIMINGS } from '../../../meta-svc/config/event-report-timings.js';

const ID: ReporterIdentity = { instanceId: 'i', storageType: 8, hostIpPort: 'h:1', storageName: 'event_report_l2' };
const T = DEFAULT_EVENT_REPORT_TIMINGS;

describe('kvcm-meta §7.9 reporter registry', () => {
  let reg: ReporterRegistry;
  let tombstones: number[];
  beforeEach(() => {
    reg = new ReporterRegistry();
    tombstones = [];
    reg.onTombstone((_r, epoch) => tombstones.push(epoch));
  });

  it('UNKNOWN → AVAILABLE on first contact; UNAVAILABLE after the timeout; TOMBSTONED after timeout + grace', () => {
    expect(reg.livenessOf('i', 8, 'h:1', 0)).to.equal('UNKNOWN');
    reg.heartbeat(ID, 0);
    expect(reg.livenessOf('i', 8, 'h:1', T.heartbeatTimeoutMs)).to.equal('AVAILABLE');
    expect(reg.livenessOf('i', 8, 'h:1', T.heartbeatTimeoutMs + 1)).to.equal('UNAVAILABLE');
    expect(reg.livenessOf('i', 8, 'h:1', T.heartbeatTimeoutMs + T.cleanupGraceMs + 1)).to.equal('TOMBSTONED');
  });

  it('admission never refreshes last_seen; HEARTBEAT does and keeps the generation', () => {
    const r = reg.admit(ID, 0)!;
    const g = reg.ensureGeneration(r);
    reg.admit(ID, 20_000);
    expect(reg.liveness(r, 31_000)).to.equal('UNAVAILABLE');
    reg.heartbeat(ID, 31_000);
    expect(reg.liveness(r, 31_000)).to.equal('AVAILABLE');
    expect(r.generation).to.equal(g).and.match(/^[0-9a-f]{32}$/);
  });

  it('HOST_DOWN tombstones: generation and fence cleared, epoch bumped, cleanup queued; repeats re-queue at the same epoch', () => {
    const r = reg.register(ID, ['gpu'], 0);
    reg.ensureGeneration(r);
    r.fence = r.generation;
    const epoch = r.epoch;
    reg.hostDown(ID, 1);
    expect(r.tombstoned).to.equal(true);
    expect(r.generation).to.equal('');
    expect(r.fence).to.equal('');
    expect(r.epoch).to.equal(epoch + 1);
    reg.hostDown(ID, 2);
    expect(tombstones).to.deep.equal([epoch + 1, epoch + 1]);
    expect(reg.admit(ID, 3)).to.equal(null);
    expect(reg.heartbeat(ID, 3)).to.equal(null);
  });

  it('REGISTER after a tombstone starts a new lifecycle without generation; a live REGISTER keeps it', () => {
    const r = reg.register(ID, ['gpu'], 0);
    const g = reg.ensureGeneration(r);
    reg.register(ID, ['disk'], 1);
    expect(r.generation).to.equal(g);
    expect([...r.media].sort()).to.deep.equal(['disk', 'gpu']);
    reg.hostDown(ID, 2);
    reg.register(ID, ['ssd'], 3);
    expect(r.tombstoned).to.equal(false);
    expect(r.generation).to.equal('');
    expect([...r.media]).to.deep.equal(['ssd']);
  });

  it('expire() applies grace expiry with HOST_DOWN effects; an unknown HOST_DOWN leaves a tombstoned record', () => {
    reg.heartbeat(ID, 0);
    reg.expire(T.heartbeatTimeoutMs + T.cleanupGraceMs + 1);
    expect(reg.get('i', 8, 'h:1')?.tombstoned).to.equal(true);
    expect(tombstones).to.have.length(1);
    reg.hostDown({ ...ID, hostIpPort: 'new:1' }, 0);
    expect(reg.livenessOf('i', 8, 'new:1', 0)).to.equal('TOMBSTONED');
  });

  it('D-04 creation and first generation are atomic: concurrent first ADDs see one generation', async () => {
    const gens = await Promise.all(
      Array.from({ length: 50 }, async () => {
        await Promise.resolve();
        const r = reg.admit(ID, 0)!;
        return reg.ensureGeneration(r);
      }),
    );
    expect(new Set(gens).size).to.equal(1);
  });

  it('reporters are per instance + storage type + host', () => {
    reg.heartbeat(ID, 0);
    expect(reg.livenessOf('i', 7, 'h:1', 0)).to.equal('UNKNOWN');
    expect(reg.livenessOf('j', 8, 'h:1', 0)).to.equal('UNKNOWN');
    expect(reg.livenessOf('i', 8, 'h:2', 0)).to.equal('UNKNOWN');
  });
});
