/**
 * The process lifecycle shared by the real servers tests start (etcd-server.ts, redis-server.ts):
 * keep the tail of a child's output, wait until it answers (failing at once if it exits), and stop
 * it with SIGTERM, then SIGKILL after a grace period.
 */
import type { ChildProcess } from 'node:child_process';
import { rmSync } from 'node:fs';
import { waitFor } from './ports.js';

const STOP_GRACE_MS = 5000;

/**
 * A server process owning a temp data dir: `launch` (the subclass) starts it and waits until it
 * answers; `stop` keeps the dir, `restart` starts it again on the same ports and data, `destroy`
 * stops it and removes the dir.
 */
export abstract class ChildServer {
  protected proc: ChildProcess | null = null;

  protected constructor(readonly dataDir: string) {}

  get running(): boolean {
    return this.proc !== null;
  }

  /** SIGTERM (SIGKILL after 5 s); the data dir is kept. Idempotent. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    await stopChild(proc, STOP_GRACE_MS);
  }

  /** Stops and starts again on the same ports and data dir. */
  async restart(): Promise<void> {
    await this.stop();
    await this.launch();
  }

  /** Stops the process and removes the data dir. */
  async destroy(): Promise<void> {
    await this.stop();
    rmSync(this.dataDir, { recursive: true, force: true });
  }

  protected abstract launch(): Promise<void>;
}

/** Keeps the last 2000 characters of `proc`'s stderr (and stdout when piped) for error messages. */
export function outputTail(proc: ChildProcess): () => string {
  let tail = '';
  const keep = (chunk: Buffer): void => {
    tail = (tail + chunk.toString('utf8')).slice(-2000);
  };
  proc.stdout?.on('data', keep);
  proc.stderr?.on('data', keep);
  return () => tail;
}

/** Waits until `ready()` is true; throws with the output tail if the process exits first or time runs out. */
export async function waitUntilReady(proc: ChildProcess, ready: () => Promise<boolean>, timeoutMs: number, what: string, tail: () => string): Promise<void> {
  let exited = false;
  proc.once('exit', () => {
    exited = true;
  });
  await waitFor(
    async () => {
      if (exited) throw new Error(`${what} exited during start: ${tail()}`);
      return ready();
    },
    timeoutMs,
    what,
  );
}

/** SIGTERM, SIGKILL after `graceMs`; resolves once the process is gone. */
export async function stopChild(proc: ChildProcess, graceMs: number): Promise<void> {
  if (proc.exitCode !== null || proc.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
  proc.kill('SIGTERM');
  const timer = setTimeout(() => proc.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}
