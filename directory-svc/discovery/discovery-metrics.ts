/**
 * Prometheus metrics of discovery, registered in the registry the caller passes (one per
 * directory process, served by `GET /metrics`). They wrap the pure table from outside: the
 * discovery service counts what the table and the watcher return.
 */
import { Counter, Gauge, type Registry } from 'prom-client';

export interface DiscoveryMetrics {
  /** Keys or values rejected on their own, by class (bad_key, invalid_instance, invalid_load). */
  readonly rejectedKeys: Counter<'class'>;
  readonly transitions: Counter<'from' | 'to'>;
  readonly replacements: Counter;
  readonly removals: Counter;
  readonly heartbeats: Counter<'outcome'>;
  readonly instances: Gauge<'state'>;
  /** 1 while the etcd watch is live; 0 while the last table is served stale. */
  readonly etcdConnected: Gauge;
  readonly etcdListings: Counter;
}

export function createDiscoveryMetrics(registry: Registry): DiscoveryMetrics {
  const registers = [registry];
  return {
    rejectedKeys: new Counter({ name: 'discovery_rejected_keys_total', help: 'etcd keys or values rejected on their own', labelNames: ['class'], registers }),
    transitions: new Counter({ name: 'discovery_instance_transitions_total', help: 'instance state moves', labelNames: ['from', 'to'], registers }),
    replacements: new Counter({ name: 'discovery_instance_replacements_total', help: 'registrations with a new identity for a known name', registers }),
    removals: new Counter({ name: 'discovery_instance_removals_total', help: 'SUSPECT instances removed after the detect interval', registers }),
    heartbeats: new Counter({ name: 'discovery_heartbeats_total', help: 'heartbeats by outcome', labelNames: ['outcome'], registers }),
    instances: new Gauge({ name: 'discovery_instances', help: 'instances by state', labelNames: ['state'], registers }),
    etcdConnected: new Gauge({ name: 'discovery_etcd_connected', help: '1 while the etcd watch is live', registers }),
    etcdListings: new Counter({ name: 'discovery_etcd_listings_total', help: 'full listings of the prefix (start and reconnects)', registers }),
  };
}
