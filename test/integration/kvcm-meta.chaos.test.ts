/**
 * Issue 28, kvcm-meta §9.4 under faults: the short form of the MetaService chaos run
 * (test/chaos/meta-chaos.ts) on two real meta-svc processes and a real redis-server (append-only
 * file, fsync per write). A fault hits a big snapshot of reporter S mid-way while other reporters
 * keep sending deltas; afterwards S's state is exactly its last committed snapshot plus its
 * acknowledged deltas (again after it resends and sends more), and no acknowledged delta of
 * anyone is lost. The full run (all phases, both faults, SQLite too, 200,000 blocks) is
 * `node --import tsx test/chaos/meta-chaos-main.ts`.
 */
import { expect } from 'chai';
import { MetaChaosCluster, SHORT_META_CHAOS, runMetaChaosScenario, type MetaChaosRow } from '../chaos/meta-chaos.js';

describe('issue 28 meta chaos (short form): faults in the middle of a big snapshot', function () {
  this.timeout(180000);
  let cluster: MetaChaosCluster;
  before(async () => {
    cluster = await MetaChaosCluster.start('redis');
  });
  after(async () => {
    await cluster?.close();
  });

  const holds = (row: MetaChaosRow): void => {
    expect(row.lost_acked, 'acknowledged deltas lost').to.equal(0);
    expect(row.acked_deltas).to.be.greaterThan(0);
    expect(row.reporter_exact, 'state after the fault = committed snapshot + acknowledged deltas').to.equal(true);
    expect(row.reporter_exact_after_retry, 'state after the retry = X1 + D2').to.equal(true);
    // An acknowledged snapshot is never undone.
    if (row.snapshot_answer === 'OK') expect(row.committed).to.equal('new');
  };

  it('M1 SIGKILL of the replica landing a committed snapshot: the other replica lands it; nothing acknowledged lost', async () => {
    const row = await runMetaChaosScenario(cluster, 'replica_sigkill_landing', 1, SHORT_META_CHAOS);
    holds(row);
    expect(row.hit_phase, 'the kill came while the stage was landing').to.equal(true);
    expect(row.snapshot_answer).to.equal('connection_lost');
  });

  it('M2 Redis restart while a snapshot is staged: SERVICE_NOT_READY meanwhile, the old snapshot stands exactly, the resend commits', async () => {
    const row = await runMetaChaosScenario(cluster, 'redis_restart_staging', 2, SHORT_META_CHAOS);
    holds(row);
    expect(row.hit_phase, 'the restart came while the rows were staged').to.equal(true);
    expect(row.snapshot_answer).to.not.equal('OK');
    expect(row.committed).to.equal('old');
  });

  it('M3 a big snapshot under other reporters\' deltas commits, and every acknowledged delta stays readable', async () => {
    const row = await runMetaChaosScenario(cluster, 'none', 3, SHORT_META_CHAOS);
    holds(row);
    expect(row.snapshot_answer).to.equal('OK');
  });
});
