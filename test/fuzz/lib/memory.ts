// What a fuzz run reports besides its outcomes: the input as hex, and heap/RSS growth (asserted
// only when node runs with --expose-gc).

export function hex(b: Uint8Array, max = 4096): string {
  const s = Buffer.from(b.buffer, b.byteOffset, Math.min(b.length, max)).toString('hex');
  return b.length > max ? `${s}… (${b.length} bytes)` : s;
}

/** `global.gc` when node runs with --expose-gc (then heap growth is asserted, else only reported). */
export function exposedGc(): (() => void) | null {
  const g = (globalThis as { gc?: () => void }).gc;
  return typeof g === 'function' ? g : null;
}

/** Heap used after a full collection when possible (bytes). */
export function settledHeapUsed(): number {
  const gc = exposedGc();
  if (gc !== null) {
    gc();
    gc();
  }
  return process.memoryUsage().heapUsed;
}

export const MIB = 1024 * 1024;

/** How much RSS and heap grew over the timed part of a fuzz load (bytes). */
export interface MemoryGrowth {
  readonly rssBytes: number;
  readonly heapBytes: number;
}

/** `RSS growth … MiB, heap growth … MiB`, noting when the heap figure is only reported. */
export function describeGrowth(g: MemoryGrowth): string {
  return `RSS growth ${(g.rssBytes / MIB).toFixed(1)} MiB, heap growth ${(g.heapBytes / MIB).toFixed(1)} MiB${exposedGc() ? '' : ' (no --expose-gc: heap reported only)'}`;
}
