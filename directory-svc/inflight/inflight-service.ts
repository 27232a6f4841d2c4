/**
 * In-flight load on the directory (routing.md "In-flight load"): routers' `ReportInflight`
 * messages enter the InflightTable, the instance table's load reports end entries, a timer ends
 * the ones past the TTL, and the view publisher reads the shares (`InflightSource`) into each
 * instance's next upsert. Reports for instances the table does not hold are dropped: the view
 * keys in-flight on the instance name it carries, and unknown names would only grow the table.
 */
import { performance } from 'node:perf_hooks';
import type { WireInflightReport, WireInflightShare } from '../../shared/view/view-wire.js';
import type { InstanceChange, InstanceView } from '../discovery/instance-table.js';
import { InflightTable } from './inflight-table.js';

/** The instance table as discovery exposes it (the publisher's InstanceTableSource, narrowed). */
export interface InflightInstanceSource {
  instances(): readonly InstanceView[];
  onChange(listener: (change: InstanceChange) => void): () => void;
}

/** What the view publisher reads. */
export interface InflightSource {
  sharesOf(instanceName: string): readonly WireInflightShare[];
  onChange(listener: (instanceName: string) => void): () => void;
}

export interface InflightServiceOptions {
  readonly monotonicMs?: () => number;
  /** How often entries past the TTL are ended (default 50 ms). */
  readonly expiryIntervalMs?: number;
  readonly ttlMs?: number;
}

export class InflightService implements InflightSource {
  readonly table: InflightTable;
  private readonly known = new Set<string>();
  private readonly clock: () => number;
  private readonly unsubscribe: () => void;
  private readonly timer: NodeJS.Timeout;

  constructor(source: InflightInstanceSource, opts: InflightServiceOptions = {}) {
    this.clock = opts.monotonicMs ?? (() => performance.now());
    this.table = new InflightTable(opts.ttlMs, this.clock);
    for (const v of source.instances()) this.known.add(v.name);
    this.unsubscribe = source.onChange((c) => this.onInstanceChange(c));
    this.timer = setInterval(() => {
      if (this.table.active) this.table.expire(this.clock());
    }, opts.expiryIntervalMs ?? 50);
    this.timer.unref();
  }

  sharesOf(instanceName: string): readonly WireInflightShare[] {
    return this.table.sharesOf(instanceName);
  }

  onChange(listener: (instanceName: string) => void): () => void {
    return this.table.onChange(listener);
  }

  /** One validated `ReportInflight` message, dated on arrival. */
  report(msg: WireInflightReport): void {
    const now = this.clock();
    for (const d of msg.decisions) {
      if (!this.known.has(d.instance_name)) continue;
      this.table.report(msg.router_id, d.instance_name, d.count, now - d.age_ms, now, (d.prompts ?? []) as Buffer[], d.prefill_tokens ?? [], d.moved_claims ?? [], d.open_claims ?? []);
      // After the decisions of the same message: an answer may end one reported just now.
      this.table.answered(msg.router_id, d.instance_name, d.answered ?? 0);
      if (d.withdrawn_seqs !== undefined) this.table.withdrawn(msg.router_id, d.instance_name, d.withdrawn_seqs);
      if (d.settled_seqs !== undefined) this.table.settled(msg.router_id, d.instance_name, d.settled_seqs);
      const o = d.outstanding_prefill ?? null;
      if (o !== null) this.table.setOutstanding(msg.router_id, d.instance_name, o);
    }
  }

  routerGone(routerId: string): void {
    this.table.routerGone(routerId);
  }

  close(): void {
    clearInterval(this.timer);
    this.unsubscribe();
  }

  private onInstanceChange(c: InstanceChange): void {
    const name = c.instance.name;
    switch (c.kind) {
      case 'load':
        // An invalidated report (load null) is no newer report: entries stay until the TTL.
        if (c.instance.load !== null) this.table.loadReported(name, this.clock());
        return;
      case 'remove':
        this.known.delete(name);
        this.table.forget(name);
        return;
      case 'replace':
        // Another engine process behind the name: the old one's queue is gone with it.
        this.table.forget(name);
        this.known.add(name);
        return;
      default:
        this.known.add(name);
    }
  }
}
