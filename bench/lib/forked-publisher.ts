/**
 * A publisher child process for a scenario benchmark (bench/ingest, bench/scale): it runs under
 * tsx with an IPC channel (started through the one supervisor, shared/process/service-process.ts,
 * so a bench that dies leaves no publisher behind), and `next(type)` waits for its next IPC
 * message of a given type (messages that arrive before anyone waits for them are kept in arrival
 * order). Its stderr is the bench's; stdout is not read.
 */
import { ServiceProcess } from '../../shared/process/service-process.js';

export class ForkedPublisher {
  private readonly child: ServiceProcess;
  private readonly seen: { type: string }[] = [];
  private waiters: { type: string; resolve: (m: unknown) => void }[] = [];

  constructor(file: string, args: readonly string[]) {
    this.child = ServiceProcess.spawn({ name: 'publisher', entry: file, args, ipc: true, inheritStderr: true, keptLines: 0 });
    this.child.onMessage((raw) => {
      const m = raw as { type: string };
      const w = this.waiters.find((x) => x.type === m.type);
      if (w === undefined) {
        this.seen.push(m);
        return;
      }
      this.waiters = this.waiters.filter((x) => x !== w);
      w.resolve(m);
    });
  }

  next<T>(type: string): Promise<T> {
    const i = this.seen.findIndex((m) => m.type === type);
    if (i >= 0) return Promise.resolve(this.seen.splice(i, 1)[0] as T);
    return new Promise<T>((resolve) => this.waiters.push({ type, resolve: resolve as (m: unknown) => void }));
  }

  send(msg: Record<string, unknown>): void {
    this.child.send(msg);
  }

  /** Asks the child to exit and waits until it has. */
  async stop(): Promise<void> {
    if (!this.child.isRunning) return;
    this.child.send({ type: 'exit' });
    await this.child.whenExited();
  }
}
