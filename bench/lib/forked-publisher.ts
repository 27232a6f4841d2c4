/**
 * A publisher child process forked for a scenario benchmark (bench/ingest, bench/scale): it runs
 * under tsx with an IPC channel, and `next(type)` waits for its next IPC message of a given type
 * (messages that arrive before anyone waits for them are kept in arrival order).
 */
import { fork } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';

export class ForkedPublisher {
  private readonly child: ChildProcess;
  private readonly seen: { type: string }[] = [];
  private waiters: { type: string; resolve: (m: unknown) => void }[] = [];

  constructor(file: string, args: readonly string[]) {
    this.child = fork(file, args, { execArgv: ['--import', 'tsx'], stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
    this.child.on('message', (m: { type: string }) => {
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
    if (this.child.exitCode !== null) return;
    const exited = new Promise<void>((r) => this.child.once('exit', () => r()));
    this.child.send({ type: 'exit' });
    await exited;
  }
}
