/**
 * Serializes the read-check-write sequences of the data path per instance group in this process:
 * startWriteCache (existence check then allocation; group quota), finishWriteCache, removeCache
 * and trimCache. Across replicas the store itself decides (createLocationIf, addHits): the lock
 * only saves this process from planning against its own in-flight allocations. FIFO per key;
 * keys never block each other. Waiters are promise chains, so an idle group holds no memory.
 */
export class GroupLock {
  private readonly tails = new Map<string, Promise<void>>();

  async run<T>(group: string, fn: () => Promise<T>): Promise<T> {
    const prev = this.tails.get(group) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => {
      release = resolve;
    });
    const tail = prev.then(() => mine);
    this.tails.set(group, tail);
    await prev;
    try {
      return await fn();
    } finally {
      release();
      if (this.tails.get(group) === tail) this.tails.delete(group);
    }
  }
}
