// Main-thread side of a guarded fuzz run (see fuzz-worker.ts): starts the worker, watches its
// progress counter, and turns every way a run can go wrong into one failure message that names
// the seed, the iteration and the input, so `FUZZ_SEED=<seed>` reproduces it.
import { Worker } from 'node:worker_threads';
import { MIB } from './lib/memory.js';
import { Rng } from './lib/rng.js';
import { makeTarget } from './fuzz-targets.js';
import type { FuzzWorkerData, FuzzWorkerMessage } from './fuzz-worker.js';

export interface FuzzRunOptions {
  readonly target: string;
  readonly seed: number;
  readonly iterations: number;
  /** One input running longer than this (wall clock, main thread's view) is a hang. */
  readonly hangMs?: number;
  /** One input measured longer than this inside the worker is reported as too slow. */
  readonly slowMs?: number;
}

export interface FuzzRunResult {
  readonly outcomes: Record<string, number>;
  readonly heapGrowthBytes: number;
  readonly gcExposed: boolean;
}

const WORKER_URL = new URL('./fuzz-worker.ts', import.meta.url).href;
// tsx's loader hooks are per thread: the worker registers them before importing TypeScript.
const BOOT = `import('tsx/esm/api').then((m) => { m.register(); return import(${JSON.stringify(WORKER_URL)}); })`;

/** The input of iteration i, rebuilt for the report. */
function describeInput(target: string, seed: number, iteration: number): string {
  const t = makeTarget(target);
  return t.show(t.generate(Rng.forIteration(seed, iteration)));
}

export async function runGuardedFuzz(opts: FuzzRunOptions): Promise<FuzzRunResult> {
  const hangMs = opts.hangMs ?? 20_000;
  const progressBuf = new SharedArrayBuffer(4);
  const progress = new Int32Array(progressBuf);
  progress[0] = -1;
  const data: FuzzWorkerData = { target: opts.target, seed: opts.seed, iterations: opts.iterations, slowMs: opts.slowMs ?? 5000, progress: progressBuf };
  // A bounded heap: an input that makes a parser allocate without limit fails the run instead of the machine.
  const worker = new Worker(BOOT, { eval: true, workerData: data, resourceLimits: { maxOldGenerationSizeMb: 512 } });
  const failure = (iteration: number, detail: string): Error => {
    const input = iteration >= 0 ? `\ninput ${iteration}: ${describeInput(opts.target, opts.seed, iteration)}` : '';
    return new Error(`fuzz ${opts.target} failed (FUZZ_SEED=${opts.seed}, iteration ${iteration}): ${detail}${input}`);
  };
  try {
    return await new Promise<FuzzRunResult>((resolve, reject) => {
      let lastSeen = -2;
      let lastMoveAt = performance.now();
      const watch = setInterval(() => {
        const now = performance.now();
        const at = Atomics.load(progress, 0);
        if (at !== lastSeen) {
          lastSeen = at;
          lastMoveAt = now;
        } else if (at >= 0 && now - lastMoveAt > hangMs) {
          clearInterval(watch);
          reject(failure(at, `no progress for ${hangMs} ms (hang)`));
        }
      }, 250);
      worker.on('message', (m: FuzzWorkerMessage) => {
        clearInterval(watch);
        if (m.kind === 'failure') reject(failure(m.iteration, m.detail));
        else resolve({ outcomes: m.outcomes, heapGrowthBytes: m.heapAfterBytes - m.heapBeforeBytes, gcExposed: m.gcExposed });
      });
      worker.on('error', (e) => {
        clearInterval(watch);
        reject(failure(Atomics.load(progress, 0), `worker died: ${e instanceof Error ? e.message : String(e)}`));
      });
      worker.on('exit', (code) => {
        clearInterval(watch);
        reject(failure(Atomics.load(progress, 0), `worker exited with code ${code} before finishing`));
      });
    });
  } finally {
    await worker.terminate();
  }
}

/** Heap growth bound of the brief: asserted only with --expose-gc, else reported. */
export const HEAP_GROWTH_BOUND_BYTES = 64 * MIB;
