// The load loop of the HTTP fuzz suites (meta-http, router-http).
import { exposedGc, type MemoryGrowth } from './memory.js';

/**
 * The HTTP fuzz load: 20 warm-up requests (JIT, pages, sockets) before the memory baseline, then
 * requests 0..iterations `parallel` at a time with `health` every 100, and `health` once more at
 * the end. `send(i)` sends and checks request i; warm-up requests get i ≥ iterations.
 */
export async function runFuzzLoad(
  iterations: number,
  parallel: number,
  send: (i: number) => Promise<void>,
  health: () => Promise<void>,
): Promise<MemoryGrowth> {
  for (let i = 0; i < 20; i++) await send(iterations + i);
  exposedGc()?.();
  const rssBefore = process.memoryUsage().rss;
  const heapBefore = process.memoryUsage().heapUsed;
  for (let i = 0; i < iterations; i += parallel) {
    const batch: Promise<void>[] = [];
    for (let k = i; k < Math.min(iterations, i + parallel); k++) batch.push(send(k));
    await Promise.all(batch);
    if (i % 100 === 0) await health();
  }
  await health();
  exposedGc()?.();
  return { rssBytes: process.memoryUsage().rss - rssBefore, heapBytes: process.memoryUsage().heapUsed - heapBefore };
}
