// discovery.md "Instance states": the lifecycle table, identity rules, heartbeats and timeouts,
// driven with an explicit clock (no timers).
import { expect } from 'chai';
import type { InstanceRegistration, InstanceType } from '../../../directory-svc/discovery/instance-json.js';
import { parseInstanceValue } from '../../../directory-svc/discovery/instance-json.js';
import {
  InstanceTable,
  InstanceTransitionError,
  transition,
  type InstanceChange,
} from '../../../directory-svc/discovery/instance-table.js';
import type { HeartbeatReport } from '../../../directory-svc/discovery/load-report.js';

const TYPE_NUM: Record<InstanceType, number> = { DEFAULT: 0, PREFILL: 1, DECODE: 2, MIX: 3 };

function reg(name: string, extra: Record<string, unknown> = {}, type: InstanceType = 'PREFILL'): InstanceRegistration {
  return parseInstanceValue(type, name, JSON.stringify({ name, rpc_address: 'x:1', type: TYPE_NUM[type], ...extra }));
}

function hb(name: string, extra: Partial<HeartbeatReport> = {}): HeartbeatReport {
  return { name, incarnationId: null, currentRole: null, load: { waitingRequests: 1, gpuCacheUsage: 0.5, recentMaxTtftMs: null, recentMaxTbtMs: null }, ...extra };
}

const kinds = (cs: readonly InstanceChange[]): string[] => cs.map((c) => (c.kind === 'state' ? `state:${c.from}->${c.to}` : c.kind));

describe('discovery.md Instance states', () => {
  let table: InstanceTable;
  beforeEach(() => {
    table = new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
  });

  it('the transition function allows exactly the moves of the state table', () => {
    expect(transition('ACTIVE', 'LEASE_LOST')).to.equal('LEASE_LOST');
    expect(transition('SUSPECT', 'REMOVED')).to.equal('REMOVED');
    expect(() => transition('ACTIVE', 'REMOVED')).to.throw(InstanceTransitionError);
    expect(() => transition('LEASE_LOST', 'REMOVED')).to.throw(InstanceTransitionError);
    expect(() => transition('LEASE_LOST', 'LEASE_LOST')).to.throw(InstanceTransitionError);
  });

  it('a PUT registers ACTIVE, schedulable but no routing candidate until a load report', () => {
    expect(kinds(table.put(reg('h:1', { incarnation_id: 'a' }), 0).changes)).to.deep.equal(['upsert']);
    const v = table.get('h:1')!;
    expect(v).to.deep.include({ state: 'ACTIVE', schedulable: true, routingCandidate: false, load: null });
    expect(table.heartbeat(hb('h:1', { incarnationId: 'a' }), 10).outcome).to.equal('accepted');
    expect(table.get('h:1')!.routingCandidate).to.equal(true);
  });

  it('a PUT with the same incarnation refreshes: same generation, nothing to change', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    const g = table.get('h:1')!.generation;
    expect(table.put(reg('h:1', { incarnation_id: 'a' }), 100).changes).to.deep.equal([]);
    expect(table.get('h:1')!.generation).to.equal(g);
  });

  it('a PUT with another incarnation is a replacement: new generation, load dropped', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    table.heartbeat(hb('h:1'), 1);
    const g = table.get('h:1')!.generation;
    const changes = table.put(reg('h:1', { incarnation_id: 'b' }), 2).changes;
    expect(kinds(changes)).to.deep.equal(['replace']);
    expect(table.get('h:1')!.generation).to.not.equal(g);
    expect(table.get('h:1')!.load).to.equal(null);
  });

  it('without incarnation ids a newer register_ts_ms is a replacement, an equal one a refresh', () => {
    table.put(reg('h:1', { register_ts_ms: 100 }), 0);
    expect(kinds(table.put(reg('h:1', { register_ts_ms: 100 }), 1).changes)).to.deep.equal([]);
    expect(kinds(table.put(reg('h:1', { register_ts_ms: 200 }), 2).changes)).to.deep.equal(['replace']);
    expect(kinds(table.put(reg('h:1', { register_ts_ms: 150 }), 3).changes)).to.deep.equal(['upsert']);
  });

  it('a delete asks for a probe; healthy → LEASE_LOST (still schedulable), failed → SUSPECT', () => {
    table.put(reg('a:1', { incarnation_id: 'x' }), 0);
    table.put(reg('b:1', { incarnation_id: 'y' }), 0);
    const pa = table.delete('PREFILL', 'a:1', reg('a:1', { incarnation_id: 'x' }));
    const pb = table.delete('PREFILL', 'b:1', null);
    expect(table.get('a:1')!.state).to.equal('ACTIVE'); // while probing
    expect(kinds(table.probeResult(pa.probe!, true, 5))).to.deep.equal(['state:ACTIVE->LEASE_LOST']);
    expect(kinds(table.probeResult(pb.probe!, false, 5))).to.deep.equal(['state:ACTIVE->SUSPECT']);
    expect(table.get('a:1')!.schedulable).to.equal(true);
    expect(table.get('b:1')!.schedulable).to.equal(false);
  });

  it('a delete whose previous value carries another incarnation is stale and ignored', () => {
    table.put(reg('h:1', { incarnation_id: 'new' }), 0);
    const res = table.delete('PREFILL', 'h:1', reg('h:1', { incarnation_id: 'old' }));
    expect(res.ignored).to.equal('stale_delete');
    expect(res.probe).to.equal(null);
    expect(table.get('h:1')!.keyPresent).to.equal(true);
  });

  it('a delete of another type key for the same name is stale', () => {
    table.put(reg('h:1', {}, 'MIX'), 0);
    expect(table.delete('PREFILL', 'h:1', null).ignored).to.equal('stale_delete');
  });

  it('a probe result after a new PUT is stale and dropped', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    const p = table.delete('PREFILL', 'h:1', null).probe!;
    table.put(reg('h:1', { incarnation_id: 'b' }), 1);
    expect(table.probeResult(p, false, 2)).to.deep.equal([]);
    expect(table.get('h:1')!.state).to.equal('ACTIVE');
  });

  it('LEASE_LOST with heartbeats stays; without one for the timeout → SUSPECT; then removed after the interval', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    table.probeResult(table.delete('PREFILL', 'h:1', null).probe!, true, 1000);
    table.heartbeat(hb('h:1'), 2500);
    expect(table.tick(4000)).to.deep.equal([]);
    expect(kinds(table.tick(5500))).to.deep.equal(['state:LEASE_LOST->SUSPECT']);
    expect(table.tick(5500 + 14999)).to.deep.equal([]);
    expect(kinds(table.tick(5500 + 15000))).to.deep.equal(['remove']);
    expect(table.get('h:1')).to.equal(null);
    expect(table.heartbeat(hb('h:1'), 30000).outcome).to.equal('unknown_instance');
  });

  it('a SUSPECT instance heartbeating goes to LEASE_LOST, never ACTIVE; only a same-incarnation PUT makes it ACTIVE', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    table.probeResult(table.delete('PREFILL', 'h:1', null).probe!, false, 1);
    expect(kinds(table.heartbeat(hb('h:1', { incarnationId: 'a' }), 2).changes)).to.deep.equal(['state:SUSPECT->LEASE_LOST', 'load']);
    const g = table.get('h:1')!.generation;
    expect(kinds(table.put(reg('h:1', { incarnation_id: 'a' }), 3).changes)).to.deep.equal(['state:LEASE_LOST->ACTIVE']);
    expect(table.get('h:1')!.generation).to.equal(g); // index preserved
  });

  it('heartbeats from unknown names or another incarnation are refused', () => {
    table.put(reg('h:1', { incarnation_id: 'a' }), 0);
    expect(table.heartbeat(hb('z:1'), 1).outcome).to.equal('unknown_instance');
    expect(table.heartbeat(hb('h:1', { incarnationId: 'b' }), 1).outcome).to.equal('stale_incarnation');
    expect(table.heartbeat(hb('h:1', { incarnationId: null }), 1).outcome).to.equal('accepted');
  });

  it('an invalid report takes the instance out of the routing candidates until a valid one', () => {
    table.put(reg('h:1'), 0);
    table.heartbeat(hb('h:1'), 1);
    expect(kinds(table.invalidateLoad('h:1'))).to.deep.equal(['load']);
    expect(table.get('h:1')!.routingCandidate).to.equal(false);
    table.heartbeat(hb('h:1'), 2);
    expect(table.get('h:1')!.routingCandidate).to.equal(true);
  });

  it('MIX current_role defaults to PREFILL and follows heartbeats; other types have none', () => {
    table.put(reg('m:1', {}, 'MIX'), 0);
    table.put(reg('p:1'), 0);
    expect(table.get('m:1')!.currentRole).to.equal('PREFILL');
    expect(kinds(table.heartbeat(hb('m:1', { currentRole: 'DECODE', load: null }), 1).changes)).to.deep.equal(['upsert']);
    expect(table.get('m:1')!.currentRole).to.equal('DECODE');
    table.heartbeat(hb('p:1', { currentRole: 'DECODE' }), 1);
    expect(table.get('p:1')!.currentRole).to.equal(null);
  });

  it('LOADMETRICS load counts only until the first heartbeat', () => {
    table.put(reg('h:1'), 0);
    const legacy = { waitingRequests: 9, gpuCacheUsage: 0.9, recentMaxTtftMs: null, recentMaxTbtMs: null };
    expect(kinds(table.legacyLoad('h:1', legacy, 1))).to.deep.equal(['load']);
    table.heartbeat(hb('h:1'), 2);
    expect(table.legacyLoad('h:1', legacy, 3)).to.deep.equal([]);
    expect(table.get('h:1')!.load!.waitingRequests).to.equal(1);
  });

  it('a resync applies listed registrations and treats registered keys no longer listed as deletes', () => {
    table.put(reg('a:1', { incarnation_id: 'x' }), 0);
    table.put(reg('b:1', { incarnation_id: 'y' }), 0);
    const res = table.resync({ registrations: [reg('c:1')], presentKeys: new Set(['PREFILL:b:1', 'PREFILL:c:1']) }, 10);
    expect(res.probes.map((p) => p.name)).to.deep.equal(['a:1']);
    expect(kinds(res.changes)).to.deep.equal(['upsert']);
    expect(table.instances().map((i) => i.name)).to.deep.equal(['a:1', 'b:1', 'c:1']);
  });
});
