// The guarded side of an in-process fuzz run: runs one target's inputs 0..n−1 in a worker thread
// and publishes the iteration it is on in shared memory, so the main thread can kill a worker stuck
// on one input (a hang) and name that input, which a synchronous call could never report itself.
//
//   main ──{target, seed, iterations, slowMs}──▶ worker: for i: progress[0] = i; run(generate(i))
//   main ◀── {kind: 'done', outcomes, heap…} | {kind: 'failure', iteration, detail} ──
import { parentPort, workerData } from 'node:worker_threads';
import { Rng } from './lib/rng.js';
import { exposedGc, settledHeapUsed } from './lib/memory.js';
import { ContractViolation, describeError, makeTarget, prepareTargets } from './fuzz-targets.js';

export interface FuzzWorkerData {
  readonly target: string;
  readonly seed: number;
  readonly iterations: number;
  /** An input taking longer than this is reported (far above any input's normal cost). */
  readonly slowMs: number;
  /** Int32Array over a SharedArrayBuffer: [0] = iteration in progress. */
  readonly progress: SharedArrayBuffer;
}

export type FuzzWorkerMessage =
  | { kind: 'failure'; iteration: number; detail: string }
  | { kind: 'done'; outcomes: Record<string, number>; heapBeforeBytes: number; heapAfterBytes: number; gcExposed: boolean };

async function main(): Promise<void> {
  const data = workerData as FuzzWorkerData;
  const port = parentPort;
  if (port === null) throw new Error('fuzz-worker must run in a worker thread');
  const progress = new Int32Array(data.progress);
  await prepareTargets();
  const target = makeTarget(data.target);
  /** Runs input i under the guard; returns its outcome, or null after reporting a failure. */
  const runOne = (i: number): string | null => {
    Atomics.store(progress, 0, i);
    const input = target.generate(Rng.forIteration(data.seed, i));
    const t0 = performance.now();
    let outcome: string;
    try {
      outcome = target.run(input);
    } catch (e) {
      const detail = e instanceof ContractViolation ? e.message : `${data.target}: harness error ${describeError(e)}`;
      port.postMessage({ kind: 'failure', iteration: i, detail } satisfies FuzzWorkerMessage);
      return null;
    }
    const ms = performance.now() - t0;
    if (ms > data.slowMs) {
      port.postMessage({ kind: 'failure', iteration: i, detail: `${data.target}: one input took ${ms.toFixed(0)} ms (guard ${data.slowMs} ms)` } satisfies FuzzWorkerMessage);
      return null;
    }
    return outcome;
  };
  // Warm up (JIT, lazy tables) on the run's own first inputs, under the same guard, before the
  // heap baseline, so growth means retained garbage.
  for (let i = 0; i < Math.min(50, data.iterations); i++) if (runOne(i) === null) return;
  const heapBeforeBytes = settledHeapUsed();
  const outcomes: Record<string, number> = {};
  for (let i = 0; i < data.iterations; i++) {
    const outcome = runOne(i);
    if (outcome === null) return;
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
  }
  const heapAfterBytes = settledHeapUsed();
  port.postMessage({ kind: 'done', outcomes, heapBeforeBytes, heapAfterBytes, gcExposed: exposedGc() !== null } satisfies FuzzWorkerMessage);
}

void main();
