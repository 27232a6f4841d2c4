/**
 * A MetaStore that delegates to a real store and fails or pauses on demand (D-07, S-05, C-02,
 * C-03). Faults are armed explicitly by the test; nothing random, nothing timed.
 */
import {
  StoreError,
  type GetBlocksOptions,
  type InstanceRecord,
  type LocationPage,
  type LocationScanFilter,
  type MetaStore,
  type MutationResult,
  type StoreMutation,
  type StoredBlock,
  type WorkerStoreLocation,
} from '../../meta-svc/store/meta-store.js';

export type FaultyMethod = 'getBlocks' | 'apply' | 'scanLocations';

export class FaultyMetaStore implements MetaStore {
  private readonly failures = new Map<FaultyMethod, number>();
  private applyPause: { started: () => void; release: Promise<void> } | null = null;
  /** Every apply batch seen (after any fault), for assertions on transaction counts. */
  readonly applied: Array<readonly StoreMutation[]> = [];

  constructor(readonly inner: MetaStore) {}

  /** The next `times` calls of `method` throw StoreError. */
  failNext(method: FaultyMethod, times = 1): void {
    this.failures.set(method, (this.failures.get(method) ?? 0) + times);
  }

  /**
   * The next apply waits until the returned `release` is called; `started` resolves when it
   * is waiting (a delta holding its gate lease, C-02/C-03).
   */
  pauseNextApply(): { started: Promise<void>; release: () => void } {
    let release!: () => void;
    let started!: () => void;
    const startedP = new Promise<void>((r) => (started = r));
    const releaseP = new Promise<void>((r) => (release = r));
    this.applyPause = { started, release: releaseP };
    return { started: startedP, release };
  }

  private maybeFail(method: FaultyMethod): void {
    const n = this.failures.get(method) ?? 0;
    if (n > 0) {
      this.failures.set(method, n - 1);
      throw new StoreError(`injected ${method} failure`);
    }
  }

  getInstance(instanceId: string): Promise<InstanceRecord | null> {
    return this.inner.getInstance(instanceId);
  }
  putInstance(rec: InstanceRecord): Promise<void> {
    return this.inner.putInstance(rec);
  }
  listInstances(): Promise<InstanceRecord[]> {
    return this.inner.listInstances();
  }
  countInstances(instanceGroup: string): Promise<number> {
    return this.inner.countInstances(instanceGroup);
  }
  async getBlocks(instanceId: string, blockKeys: readonly bigint[], opts?: GetBlocksOptions): Promise<Map<bigint, StoredBlock>> {
    this.maybeFail('getBlocks');
    return this.inner.getBlocks(instanceId, blockKeys, opts);
  }
  async apply(mutations: readonly StoreMutation[]): Promise<MutationResult[]> {
    const pause = this.applyPause;
    if (pause) {
      this.applyPause = null;
      pause.started();
      await pause.release;
    }
    this.maybeFail('apply');
    this.applied.push(mutations);
    return this.inner.apply(mutations);
  }
  async scanLocations(instanceId: string | null, filter: LocationScanFilter, cursor: string | null, limit: number): Promise<LocationPage> {
    this.maybeFail('scanLocations');
    return this.inner.scanLocations(instanceId, filter, cursor, limit);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
  workerLocation(): WorkerStoreLocation | null {
    return this.inner.workerLocation();
  }
  externalWrite<T>(instanceId: string, write: () => Promise<T>, touched: (result: T) => ArrayLike<bigint> | null): Promise<T> {
    return this.inner.externalWrite(instanceId, write, touched);
  }
}
