/**
 * A real etcd for integration tests (house rule: real parts, never the default 2379). Each server
 * gets two free ports and a fresh temp data dir; `restart()` stops it and starts it again on the
 * same ports and data, so "etcd restarted" scenarios see the same keys (leases keep running on
 * the server's own clock).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, waitFor } from './ports.js';

const ETCD_BIN = process.env['ETCD_BIN'] ?? 'etcd';
const START_TIMEOUT_MS = 15000;
const STOP_TIMEOUT_MS = 5000;

export class EtcdServer {
  private proc: ChildProcess | null = null;
  private stderrTail = '';

  private constructor(
    readonly clientPort: number,
    readonly peerPort: number,
    readonly dataDir: string,
  ) {}

  /** Starts etcd on fresh free ports and waits until it answers `/health`. */
  static async start(): Promise<EtcdServer> {
    const server = new EtcdServer(await freePort(), await freePort(), mkdtempSync(join(tmpdir(), 'etcd-test-')));
    try {
      await server.launch();
    } catch (e) {
      await server.destroy();
      throw e;
    }
    return server;
  }

  /** `127.0.0.1:P`, the form `--etcd_addr` takes. */
  get address(): string {
    return `127.0.0.1:${this.clientPort}`;
  }

  get clientUrl(): string {
    return `http://${this.address}`;
  }

  get running(): boolean {
    return this.proc !== null;
  }

  /** Stops the process (data dir kept). Idempotent. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (proc === null) return;
    this.proc = null;
    if (proc.exitCode !== null || proc.signalCode !== null) return;
    const exited = new Promise<void>((resolve) => proc.once('exit', () => resolve()));
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), STOP_TIMEOUT_MS);
    await exited;
    clearTimeout(timer);
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

  private async launch(): Promise<void> {
    const client = `http://127.0.0.1:${this.clientPort}`;
    const peer = `http://127.0.0.1:${this.peerPort}`;
    const proc = spawn(
      ETCD_BIN,
      [
        '--data-dir', this.dataDir,
        '--name', 'default',
        '--listen-client-urls', client,
        '--advertise-client-urls', client,
        '--listen-peer-urls', peer,
        '--initial-advertise-peer-urls', peer,
        '--initial-cluster', `default=${peer}`,
        '--log-level', 'error',
      ],
      { stdio: ['ignore', 'ignore', 'pipe'] },
    );
    this.proc = proc;
    this.stderrTail = '';
    proc.stderr?.on('data', (chunk: Buffer) => {
      this.stderrTail = (this.stderrTail + chunk.toString('utf8')).slice(-2000);
    });
    let exitedEarly = false;
    proc.once('exit', () => {
      exitedEarly = true;
    });
    try {
      await waitFor(
        async () => {
          if (exitedEarly) throw new Error(`etcd exited during start: ${this.stderrTail}`);
          return isHealthy(client);
        },
        START_TIMEOUT_MS,
        `etcd on ${client}`,
      );
    } catch (e) {
      await this.stop();
      throw e;
    }
  }
}

async function isHealthy(clientUrl: string): Promise<boolean> {
  try {
    const res = await fetch(`${clientUrl}/health`, { signal: AbortSignal.timeout(500) });
    if (res.status !== 200) return false;
    const body = (await res.json()) as { health?: unknown };
    return body.health === 'true' || body.health === true;
  } catch {
    return false;
  }
}
