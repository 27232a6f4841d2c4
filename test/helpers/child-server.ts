/**
 * The lifecycle shared by the real servers tests start (etcd-server.ts, redis-server.ts) on top
 * of the one process supervisor: start the binary, wait until it answers (failing at once, with
 * its output tail, if it exits), stop it with SIGTERM, then SIGKILL after a grace period.
 */
import { rmSync } from 'node:fs';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { startOnFreePorts } from './ports.js';

const STOP_GRACE_MS = 5000;

/**
 * A server process owning a temp data dir: `launch` (the subclass) starts it and waits until it
 * answers; `stop` keeps the dir, `restart` starts it again on the same ports and data, `destroy`
 * stops it and removes the dir.
 */
export abstract class ChildServer {
  protected proc: ServiceProcess | null = null;

  protected constructor(readonly dataDir: string) {}

  get running(): boolean {
    return this.proc !== null;
  }

  /** SIGTERM (SIGKILL after 5 s); the data dir is kept. Idempotent. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    await proc.stop(STOP_GRACE_MS);
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

  /**
   * The server `make` builds (on ports it picks) launched, or its data dir removed and the launch
   * error thrown (the subclasses' `start`); built and launched again on new ports when its bind
   * found one taken (ports.ts `startOnFreePorts`).
   */
  protected static async launched<T extends ChildServer>(make: () => Promise<T>): Promise<T> {
    return startOnFreePorts(async () => {
      const server = await make();
      try {
        await server.launch();
      } catch (e) {
        await server.destroy();
        throw e;
      }
      return server;
    });
  }

  /** Starts `command` and waits until `ready()`; a server that never answers is stopped again. */
  protected async launchProcess(name: string, command: string, args: readonly string[], ready: () => Promise<boolean>, timeoutMs: number): Promise<void> {
    const proc = ServiceProcess.spawn({ name, command, args, stopWithAll: false });
    this.proc = proc;
    try {
      await proc.waitUntil('answering', ready, timeoutMs);
    } catch (e) {
      await this.stop();
      throw e;
    }
  }
}
