/**
 * A real InstanceTable behind the surface the view publisher, the instance listing and the
 * in-flight service read (what DiscoveryService offers them): its rows, and its changes handed to
 * every listener by `emit`, which the test calls with what a table method returned.
 */
import { InstanceTable, type InstanceChange } from '../../directory-svc/discovery/instance-table.js';

export class TableInstances {
  readonly table = new InstanceTable({ leaseLostHeartbeatTimeoutMs: 3000, detectDisconnectedIntervalMs: 15000 });
  private readonly listeners: ((c: InstanceChange) => void)[] = [];

  instances() {
    return this.table.instances();
  }

  onChange(l: (c: InstanceChange) => void): () => void {
    this.listeners.push(l);
    return () => undefined;
  }

  /** Hands `changes` to every listener, in order; returns them. */
  emit(changes: readonly InstanceChange[]): readonly InstanceChange[] {
    for (const c of changes) for (const l of this.listeners) l(c);
    return changes;
  }
}
