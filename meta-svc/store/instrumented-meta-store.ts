/**
 * kvcm-meta §9.3 `kvcm_store_tx_duration_seconds{op}` around any MetaStore: metrics wrap the
 * store from outside (style: instrumented index), so the SQLite code stays bare. `op` is the
 * method name (`getBlocks`, `apply`, …); failed calls are timed too.
 */
import type {
  GetBlocksOptions,
  InstanceRecord,
  LocationPage,
  LocationScanFilter,
  MetaStore,
  MutationResult,
  StoreMutation,
  StoredBlock,
  WorkerStoreLocation,
} from './meta-store.js';

/** The histogram surface used (prom-client Histogram<'op'> fits). */
export interface StoreTxHistogram {
  observe(labels: { op: string }, seconds: number): void;
}

export class InstrumentedMetaStore implements MetaStore {
  constructor(
    readonly inner: MetaStore,
    private readonly histogram: StoreTxHistogram,
  ) {}

  private async timed<T>(op: string, fn: () => Promise<T>): Promise<T> {
    const t0 = process.hrtime.bigint();
    try {
      return await fn();
    } finally {
      this.histogram.observe({ op }, Number(process.hrtime.bigint() - t0) / 1e9);
    }
  }

  getInstance(instanceId: string): Promise<InstanceRecord | null> {
    return this.timed('getInstance', () => this.inner.getInstance(instanceId));
  }
  putInstance(rec: InstanceRecord): Promise<void> {
    return this.timed('putInstance', () => this.inner.putInstance(rec));
  }
  listInstances(): Promise<InstanceRecord[]> {
    return this.timed('listInstances', () => this.inner.listInstances());
  }
  countInstances(instanceGroup: string): Promise<number> {
    return this.timed('countInstances', () => this.inner.countInstances(instanceGroup));
  }
  getBlocks(instanceId: string, blockKeys: readonly bigint[], opts?: GetBlocksOptions): Promise<Map<bigint, StoredBlock>> {
    return this.timed('getBlocks', () => this.inner.getBlocks(instanceId, blockKeys, opts));
  }
  apply(mutations: readonly StoreMutation[]): Promise<MutationResult[]> {
    return this.timed('apply', () => this.inner.apply(mutations));
  }
  scanLocations(instanceId: string | null, filter: LocationScanFilter, cursor: string | null, limit: number): Promise<LocationPage> {
    return this.timed('scanLocations', () => this.inner.scanLocations(instanceId, filter, cursor, limit));
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  workerLocation(): WorkerStoreLocation | null {
    return this.inner.workerLocation();
  }
  externalWrite<T>(instanceId: string, write: () => Promise<T>, touched: (result: T) => ArrayLike<bigint> | null): Promise<T> {
    return this.timed('externalWrite', () => this.inner.externalWrite(instanceId, write, touched));
  }
}
