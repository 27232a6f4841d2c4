/**
 * Chat templates rendered off the event loop: `@huggingface/jinja` interprets the template in
 * JavaScript (about 50–100 µs per message for Qwen3's on the development machine), so an 8k-token
 * chat would hold the router's event loop for milliseconds and a 4096-message one for a good part
 * of a second. A few worker threads, each with the template compiled once, render in parallel;
 * requests go to the worker with the fewest in flight. A worker that dies fails only its pending
 * renders (template errors, so those requests are routed by load) and is replaced.
 * Workers are unref'd: they never keep a process alive.
 */
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { ChatRequest } from './chat-request.js';
import { TemplateRenderError } from './chat-template.js';
import type { RenderReply, RenderWorkerData } from './render-worker.js';

interface Pending {
  readonly resolve: (text: string) => void;
  readonly reject: (e: Error) => void;
}

interface Slot {
  worker: Worker;
  readonly pending: Map<number, Pending>;
}

/**
 * Built, the worker is the .js beside this file. Under tsx (tests, `node --import tsx`) it is the
 * .ts source, and a worker thread does not inherit tsx's module hooks: a two-line bootstrap
 * registers them in the thread first (the only place tsx is named; production never takes it).
 */
const FROM_SOURCE = import.meta.url.endsWith('.ts');

function newWorker(workerData: RenderWorkerData): Worker {
  if (!FROM_SOURCE) return new Worker(new URL('./render-worker.js', import.meta.url), { workerData });
  const entry = new URL('./render-worker.ts', import.meta.url).href;
  const api = pathToFileURL(createRequire(import.meta.url).resolve('tsx/esm/api')).href;
  const bootstrap = `import(${JSON.stringify(api)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`;
  return new Worker(bootstrap, { eval: true, workerData });
}

export class RenderPool {
  private readonly slots: Slot[] = [];
  private nextId = 0;
  private closed = false;

  constructor(
    private readonly data: RenderWorkerData,
    size: number,
  ) {
    for (let i = 0; i < size; i++) this.slots.push({ worker: this.spawn(i), pending: new Map() });
  }

  get size(): number {
    return this.slots.length;
  }

  /** The rendered text; rejects with TemplateRenderError. */
  render(request: ChatRequest): Promise<string> {
    if (this.closed) return Promise.reject(new TemplateRenderError('chat template failed: the render pool is closed'));
    let slot = this.slots[0]!;
    for (const s of this.slots) if (s.pending.size < slot.pending.size) slot = s;
    const id = this.nextId++;
    return new Promise<string>((resolve, reject) => {
      slot.pending.set(id, { resolve, reject });
      slot.worker.postMessage({ id, request });
    });
  }

  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.slots.map((s) => s.worker.terminate()));
  }

  private spawn(index: number): Worker {
    const worker = newWorker(this.data);
    worker.unref();
    worker.on('message', (reply: RenderReply) => {
      const slot = this.slots[index];
      const p = slot?.pending.get(reply.id);
      if (slot === undefined || p === undefined) return;
      slot.pending.delete(reply.id);
      if ('text' in reply) p.resolve(reply.text);
      else p.reject(new TemplateRenderError(reply.error));
    });
    const lost = (why: string): void => {
      const slot = this.slots[index];
      if (slot === undefined || slot.worker !== worker) return;
      for (const p of slot.pending.values()) p.reject(new TemplateRenderError(`chat template failed: render worker ${why}`));
      slot.pending.clear();
      if (!this.closed) slot.worker = this.spawn(index);
    };
    worker.on('error', (e: Error) => lost(`failed (${e.message})`));
    worker.on('exit', (code) => lost(`exited (${code})`));
    return worker;
  }
}
