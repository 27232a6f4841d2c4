/**
 * The SQLite store's read-through cache of decoded blocks, per instance; `null` = known absent.
 * Keyed by the bigint itself: a Map probe by bigint costs ~6x less than building a string key
 * per probe. One budget of entries across instances; past it each instance drops the oldest
 * quarter of its entries (FIFO by insertion). `lru-cache` was measured in its place and kept
 * out (bench/meta/libraries.bench.ts, README "MetaService libraries").
 */
import type { StoredBlock } from './meta-store.js';

/** What a lookup probes: the entries of one instance. */
export type InstanceBlocks = ReadonlyMap<bigint, StoredBlock | null>;

export class BlockCache {
  private readonly byInstance = new Map<string, Map<bigint, StoredBlock | null>>();
  private size = 0;

  /** `capacity` 0 turns the cache off. */
  constructor(readonly capacity: number) {}

  get enabled(): boolean {
    return this.capacity > 0;
  }

  /** The instance's cached entries, probed once per looked-up key; undefined when it has none. */
  entriesOf(instanceId: string): InstanceBlocks | undefined {
    return this.byInstance.get(instanceId);
  }

  /** Records what a read found for `keys[i]` (`read[i]`, undefined = absent); keys already cached are left alone. */
  remember(instanceId: string, keys: readonly bigint[], read: readonly (StoredBlock | undefined)[]): void {
    let entries = this.byInstance.get(instanceId);
    if (entries === undefined) {
      entries = new Map();
      this.byInstance.set(instanceId, entries);
    }
    for (let i = 0; i < keys.length; i++) {
      const key = keys[i] as bigint;
      if (entries.has(key)) continue;
      entries.set(key, read[i] ?? null);
      this.size++;
    }
    if (this.size > this.capacity) this.evict();
  }

  /** Drops one key (a mutation is about to change it). */
  forget(instanceId: string, key: bigint): void {
    if (this.size > 0 && this.byInstance.get(instanceId)?.delete(key) === true) this.size--;
  }

  /** Drops every entry of one instance (a bulk write by another handle touched too many keys to name). */
  forgetInstance(instanceId: string): void {
    const entries = this.byInstance.get(instanceId);
    if (entries === undefined) return;
    this.size -= entries.size;
    this.byInstance.delete(instanceId);
  }

  clear(): void {
    this.byInstance.clear();
    this.size = 0;
  }

  private evict(): void {
    for (const [instanceId, entries] of this.byInstance) {
      let drop = Math.ceil(entries.size / 4);
      for (const k of entries.keys()) {
        if (drop-- <= 0) break;
        entries.delete(k);
        this.size--;
      }
      if (entries.size === 0) this.byInstance.delete(instanceId);
    }
  }
}
