/**
 * `ListInstances` (kvctl, diagnostics): every instance of the table with its heartbeat age and
 * the planner's exclusion reason, sorted by name. A read of the instance table and the in-flight
 * shares at call time; the view stream (view-publisher.ts) streams the same rows as deltas but
 * plays no part here.
 */
import type { WireInflightShare, WireListInstancesResponse } from '../../shared/view/view-wire.js';
import type { InflightSource } from '../inflight/inflight-service.js';
import type { InstanceView } from '../discovery/instance-table.js';
import type { PlanExclusion } from '../discovery/stream-planner.js';
import { toWireViewInstance } from './view-wire.js';

/** The instance table as discovery exposes it (`DiscoveryService` satisfies it). */
export interface ListedInstances {
  instances(): readonly InstanceView[];
  /** Connection state and planner exclusions, when discovery has them. */
  diagnostics?(): { readonly etcdConnected: boolean; readonly etcdEnabled?: boolean; readonly exclusions: readonly PlanExclusion[] };
}

const NO_PROMPTS: Buffer[] = [];

/** The listing is for operators: per-router counts, not the pending prompts' fingerprint bytes. */
function countsOnly(shares: readonly WireInflightShare[] | null): WireInflightShare[] | null {
  return shares === null ? null : shares.map((s) => ({ router_id: s.router_id, count: s.count, prompts: NO_PROMPTS }));
}

export class InstanceListing {
  /** `source` null: no instance table (static streams only): no instances, etcd not connected. */
  constructor(
    private readonly source: ListedInstances | null,
    private readonly inflight: Pick<InflightSource, 'sharesOf'> | null = null,
    private readonly nowMs: () => number = Date.now,
  ) {}

  listInstances(): WireListInstancesResponse {
    const source = this.source;
    if (source === null) return { instances: [], etcd_connected: false, etcd_disabled: false };
    const diag = source.diagnostics?.() ?? null;
    const reasons = new Map<string, string>();
    for (const ex of diag?.exclusions ?? []) {
      for (const name of ex.instances) if (!reasons.has(name)) reasons.set(name, `${ex.class}: ${ex.detail}`);
    }
    const now = this.nowMs();
    const rows = [...source.instances()].sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return {
      instances: rows.map((v) =>
        toWireViewInstance(v, {
          heartbeatAgeMs: v.lastHeartbeatMs === null ? -1 : Math.max(0, now - v.lastHeartbeatMs),
          excludedReason: reasons.get(v.name) ?? '',
        }, countsOnly(this.inflight?.sharesOf(v.name) ?? null)),
      ),
      etcd_connected: diag?.etcdConnected ?? false,
      etcd_disabled: diag?.etcdEnabled === false,
    };
  }
}
