// discovery.md "From instances to streams" and kv-events §1 endpoints: the pure planner.
import { expect } from 'chai';
import type { DiscoveryConfig } from '../../../shared/config/kv-events-config.js';
import { parseInstanceValue, type InstanceType } from '../../../directory-svc/discovery/instance-json.js';
import { InstanceTable } from '../../../directory-svc/discovery/instance-table.js';
import { planStreams } from '../../../directory-svc/discovery/stream-planner.js';

const TYPE_NUM: Record<InstanceType, number> = { DEFAULT: 0, PREFILL: 1, DECODE: 2, MIX: 3 };
const cfg: DiscoveryConfig = { enabled: true, blockSize: 128, topic: 'xllm-kv', eventPortOffset: 10000, replayPortOffset: 30000, refreshIntervalMs: 1000 };

function tableWith(entries: { name: string; type?: InstanceType; extra?: Record<string, unknown> }[]): InstanceTable {
  const t = new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
  for (const e of entries) {
    const type = e.type ?? 'PREFILL';
    t.put(parseInstanceValue(type, e.name, JSON.stringify({ name: e.name, rpc_address: 'r:1', type: TYPE_NUM[type], ...e.extra })), 0);
  }
  return t;
}

describe('discovery.md From instances to streams', () => {
  it('DP=2 on 127.0.0.1:8000 gives events 18000/18001 and recovery 38000/38001, block size and topic from the config, seed 1024', () => {
    const plan = planStreams(tableWith([{ name: '127.0.0.1:8000', extra: { dp_size: 2 } }]).instances(), cfg, 128);
    expect(plan.exclusions).to.deep.equal([]);
    expect(plan.streams.map((s) => [s.dpRank, s.endpoint, s.replayEndpoint])).to.deep.equal([
      [0, 'tcp://127.0.0.1:18000', 'tcp://127.0.0.1:38000'],
      [1, 'tcp://127.0.0.1:18001', 'tcp://127.0.0.1:38001'],
    ]);
    expect(plan.streams[0]).to.deep.include({ instanceName: '127.0.0.1:8000', blockSize: 128, topic: 'xllm-kv', hashSeed: 1024n });
  });

  it('DEFAULT, PREFILL and MIX-as-PREFILL are subscribed; DECODE, MIX-as-DECODE and other backends never', () => {
    const t = tableWith([
      { name: 'a:1000', type: 'DEFAULT' },
      { name: 'b:1000', type: 'PREFILL' },
      { name: 'c:1000', type: 'DECODE' },
      { name: 'd:1000', type: 'MIX' },
      { name: 'e:1000', type: 'MIX' },
      { name: 'f:1000', type: 'PREFILL', extra: { backend_type: 'vllm' } },
    ]);
    t.heartbeat({ name: 'e:1000', incarnationId: null, currentRole: 'DECODE', load: null }, 1);
    expect(planStreams(t.instances(), cfg, 128).streams.map((s) => s.instanceName)).to.deep.equal(['a:1000', 'b:1000', 'd:1000']);
  });

  it('MIX role switch: DECODE drops the streams, back to PREFILL plans them again with the same identity', () => {
    const t = tableWith([{ name: 'm:1000', type: 'MIX' }]);
    const before = planStreams(t.instances(), cfg, 128).streams.map((s) => s.planKey);
    t.heartbeat({ name: 'm:1000', incarnationId: null, currentRole: 'DECODE', load: null }, 1);
    expect(planStreams(t.instances(), cfg, 128).streams).to.have.length(0);
    t.heartbeat({ name: 'm:1000', incarnationId: null, currentRole: 'PREFILL', load: null }, 2);
    expect(planStreams(t.instances(), cfg, 128).streams.map((s) => s.planKey)).to.deep.equal(before);
  });

  it('SUSPECT instances lose their streams; LEASE_LOST keep them', () => {
    const t = tableWith([{ name: 'a:1000' }, { name: 'b:1000' }]);
    t.probeResult(t.delete('PREFILL', 'a:1000', null).probe!, true, 1);
    t.probeResult(t.delete('PREFILL', 'b:1000', null).probe!, false, 1);
    expect(planStreams(t.instances(), cfg, 128).streams.map((s) => s.instanceName)).to.deep.equal(['a:1000']);
  });

  it('a replacement gives streams a new identity; a same-incarnation refresh keeps it', () => {
    const t = tableWith([{ name: 'a:1000', extra: { incarnation_id: 'x' } }]);
    const id0 = planStreams(t.instances(), cfg, 128).streams[0]!.planKey;
    t.put(parseInstanceValue('PREFILL', 'a:1000', JSON.stringify({ name: 'a:1000', rpc_address: 'r:1', type: 1, incarnation_id: 'x' })), 1);
    expect(planStreams(t.instances(), cfg, 128).streams[0]!.planKey).to.equal(id0);
    t.put(parseInstanceValue('PREFILL', 'a:1000', JSON.stringify({ name: 'a:1000', rpc_address: 'r:1', type: 1, incarnation_id: 'y' })), 2);
    const s = planStreams(t.instances(), cfg, 128).streams[0]!;
    expect(s.planKey).to.not.equal(id0);
    expect(s.incarnationId).to.equal('y');
  });

  it('a same-incarnation refresh with a larger dp_size adds ranks and keeps the identity of the existing ones', () => {
    const t = tableWith([{ name: 'a:1000', extra: { incarnation_id: 'x', dp_size: 1 } }]);
    const before = planStreams(t.instances(), cfg, 128).streams.map((s) => s.planKey);
    t.put(parseInstanceValue('PREFILL', 'a:1000', JSON.stringify({ name: 'a:1000', rpc_address: 'r:1', type: 1, incarnation_id: 'x', dp_size: 2 })), 1);
    const after = planStreams(t.instances(), cfg, 128).streams;
    expect(after).to.have.length(2);
    expect(after[0]!.planKey).to.equal(before[0]);
  });

  it('a port above 65535 excludes that instance only, with an error naming it', () => {
    const plan = planStreams(tableWith([{ name: 'a:35535', extra: { dp_size: 2 } }, { name: 'b:1000' }]).instances(), cfg, 128);
    expect(plan.streams.map((s) => s.instanceName)).to.deep.equal(['b:1000']);
    expect(plan.exclusions).to.have.length(1);
    expect(plan.exclusions[0]).to.deep.include({ class: 'port_overflow', instances: ['a:35535'] });
    expect(plan.exclusions[0]!.detail).to.contain('a:35535');
  });

  it('an endpoint shared across instances (events of one = recovery of another) excludes every affected instance', () => {
    // h:8000 has recovery on 38000; h:28000 has events on 38000 (= h:8000's recovery).
    const plan = planStreams(tableWith([{ name: 'h:8000' }, { name: 'h:28000' }, { name: 'h:9000' }]).instances(), cfg, 128);
    expect(plan.streams.map((s) => s.instanceName)).to.deep.equal(['h:9000']);
    expect(plan.exclusions).to.have.length(1);
    expect(plan.exclusions[0]).to.deep.include({ class: 'endpoint_conflict', instances: ['h:28000', 'h:8000'] });
  });

  it('overlapping event ranges of two DP instances exclude both', () => {
    const plan = planStreams(tableWith([{ name: 'h:8000', extra: { dp_size: 2 } }, { name: 'h:8001' }]).instances(), cfg, 128);
    expect(plan.streams).to.have.length(0);
    expect(plan.exclusions.flatMap((e) => e.instances)).to.include.members(['h:8000', 'h:8001']);
  });

  it('the same port on different hosts is no conflict', () => {
    const plan = planStreams(tableWith([{ name: 'a:8000' }, { name: 'b:8000' }]).instances(), cfg, 128);
    expect(plan.streams).to.have.length(2);
  });

  it('max_streams takes whole instances in name order and skips one that does not fit, with the reason', () => {
    const t = tableWith([
      { name: 'a:1000', extra: { dp_size: 2 } },
      { name: 'b:1000', extra: { dp_size: 2 } },
      { name: 'c:1000', extra: { dp_size: 1 } },
    ]);
    const plan = planStreams(t.instances(), cfg, 3);
    expect(plan.streams.map((s) => `${s.instanceName}/${s.dpRank}`)).to.deep.equal(['a:1000/0', 'a:1000/1', 'c:1000/0']);
    expect(plan.exclusions).to.have.length(1);
    expect(plan.exclusions[0]).to.deep.include({ class: 'max_streams', instances: ['b:1000'] });
  });
});
