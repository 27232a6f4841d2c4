// discovery.md "From instances to streams": the reconciler's diff against an in-memory stream
// target (the Directory's add/remove surface), pass by pass, without timers.
import { expect } from 'chai';
import type { SubscriberStreamConfig } from '../../../directory-svc/subscription/stream-config.js';
import type { DiscoveryConfig } from '../../../shared/config/kv-events-config.js';
import { parseInstanceValue } from '../../../directory-svc/discovery/instance-json.js';
import { InstanceTable } from '../../../directory-svc/discovery/instance-table.js';
import { planStreams } from '../../../directory-svc/discovery/stream-planner.js';
import { SubscriptionReconciler, type StreamTarget } from '../../../directory-svc/discovery/subscription-reconciler.js';

const cfg: DiscoveryConfig = { enabled: true, blockSize: 16, topic: '', eventPortOffset: 10000, replayPortOffset: 30000, refreshIntervalMs: 1000 };

/** Records every call in order; refuses adds while `refuseAdds` is set. */
class RecordingTarget implements StreamTarget {
  readonly calls: string[] = [];
  readonly live = new Set<string>();
  refuseAdds = false;
  async addStream(c: SubscriberStreamConfig): Promise<void> {
    if (this.refuseAdds) throw new Error('max_streams: refused');
    this.calls.push(`add ${c.instanceName}/${c.dpRank}`);
    this.live.add(`${c.instanceName}/${c.dpRank}`);
  }
  async removeStream(name: string, rank: number): Promise<boolean> {
    this.calls.push(`remove ${name}/${rank}`);
    return this.live.delete(`${name}/${rank}`);
  }
}

function put(t: InstanceTable, name: string, extra: Record<string, unknown>): void {
  t.put(parseInstanceValue('PREFILL', name, JSON.stringify({ name, rpc_address: 'r:1', type: 1, ...extra })), 0);
}

describe('discovery.md subscription reconciler', () => {
  let table: InstanceTable;
  let target: RecordingTarget;
  let reconciler: SubscriptionReconciler;
  beforeEach(() => {
    table = new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
    target = new RecordingTarget();
    reconciler = new SubscriptionReconciler({ target, plan: () => planStreams(table.instances(), cfg, 128), intervalMs: 1000 });
  });
  afterEach(() => reconciler.close());

  it('adds the planned streams once; an unchanged plan makes no calls', async () => {
    put(table, 'a:1000', { incarnation_id: 'x', dp_size: 2 });
    expect(await reconciler.reconcile()).to.deep.equal({ added: 2, removed: 0, failed: 0 });
    expect(await reconciler.reconcile()).to.deep.equal({ added: 0, removed: 0, failed: 0 });
    expect(target.calls).to.deep.equal(['add a:1000/0', 'add a:1000/1']);
  });

  it('a replacement removes every old stream before adding the new ones', async () => {
    put(table, 'a:1000', { incarnation_id: 'x', dp_size: 2 });
    await reconciler.reconcile();
    target.calls.length = 0;
    put(table, 'a:1000', { incarnation_id: 'y', dp_size: 2 });
    await reconciler.reconcile();
    expect(target.calls).to.deep.equal(['remove a:1000/0', 'remove a:1000/1', 'add a:1000/0', 'add a:1000/1']);
    expect(reconciler.streams().map((s) => s.incarnationId)).to.deep.equal(['y', 'y']);
  });

  it('a same-incarnation refresh with a smaller dp_size removes only the ranks no longer wanted', async () => {
    put(table, 'a:1000', { incarnation_id: 'x', dp_size: 2 });
    await reconciler.reconcile();
    target.calls.length = 0;
    put(table, 'a:1000', { incarnation_id: 'x', dp_size: 1 });
    await reconciler.reconcile();
    expect(target.calls).to.deep.equal(['remove a:1000/1']);
  });

  it('a refused add is retried on the next pass', async () => {
    put(table, 'a:1000', {});
    target.refuseAdds = true;
    expect(await reconciler.reconcile()).to.deep.equal({ added: 0, removed: 0, failed: 1 });
    target.refuseAdds = false;
    expect(await reconciler.reconcile()).to.deep.equal({ added: 1, removed: 0, failed: 0 });
  });

  it('overlapping passes are joined, never run twice', async () => {
    put(table, 'a:1000', {});
    const [r1, r2] = await Promise.all([reconciler.reconcile(), reconciler.reconcile()]);
    expect(r1).to.equal(r2);
    expect(target.calls).to.deep.equal(['add a:1000/0']);
  });

  it('exclusions of the latest plan are kept for diagnostics', async () => {
    put(table, 'a:60000', {});
    await reconciler.reconcile();
    expect(reconciler.exclusions.map((e) => e.class)).to.deep.equal(['port_overflow']);
  });
});
