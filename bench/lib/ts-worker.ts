/**
 * Worker threads running TypeScript source, for benchmarks that give a part its own event loop
 * (a load generator, a publisher) without a build step.
 */
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/** Node 20 does not apply `--import tsx` to a worker's entry file: register tsx inside, then import. */
export function tsWorker(file: string, data: unknown): Worker {
  const entry = pathToFileURL(file).href;
  const boot = `import('tsx/esm/api').then(({ register }) => { register(); return import(${JSON.stringify(entry)}); })`;
  return new Worker(boot, { eval: true, workerData: data });
}

/** The worker's next message of `kind` (rejects if the worker fails first). */
export function nextMessage<T>(w: Worker, kind: string): Promise<T> {
  return new Promise((resolve, reject) => {
    const onMsg = (m: { kind: string }): void => {
      if (m.kind !== kind) return;
      w.off('message', onMsg);
      w.off('error', reject);
      resolve(m as T);
    };
    w.on('message', onMsg);
    w.once('error', reject);
  });
}
