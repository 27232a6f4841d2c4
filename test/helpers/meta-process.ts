/**
 * meta-svc as a real child process serving the MetaService on a free port over a given store
 * (kvcm-meta P-01/P-02, E2E, §9.4 R1–R5): `node --import tsx meta-svc/main.ts`. `store` is a
 * SQLite file path or a `redis://` URL. `kill()` is `kill -9`; `stop()` is SIGTERM
 * (§9.3 drain). Output is kept for failure messages.
 */
import { spawn } from 'node:child_process';
import type { ChildProcess } from 'node:child_process';
import { freePort, waitFor } from './ports.js';

export class MetaProcess {
  private output = '';
  private exited: Promise<number | null>;

  private constructor(
    private readonly child: ChildProcess,
    readonly url: string,
  ) {
    child.stdout?.on('data', (d: Buffer) => (this.output += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (this.output += d.toString()));
    this.exited = new Promise((resolve) => child.once('exit', (code) => resolve(code)));
  }

  /** Starts the process and waits until `/health` answers 200. */
  static async start(store: string, extraArgs: readonly string[] = []): Promise<MetaProcess> {
    const metaPort = await freePort();
    const child = spawn(
      process.execPath,
      [
        '--import',
        'tsx',
        'meta-svc/main.ts',
        `--http_port=${metaPort}`,
        `--meta_store=${store.startsWith('redis://') ? store : `sqlite:${store}`}`,
        ...extraArgs,
      ],
      { cwd: process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] },
    );
    const p = new MetaProcess(child, `http://127.0.0.1:${metaPort}`);
    try {
      await waitFor(
        async () => {
          if (child.exitCode !== null) throw new Error(`meta-svc exited ${child.exitCode}:\n${p.output}`);
          const res = await fetch(`${p.url}/health`).catch(() => null);
          return res !== null && res.status === 200;
        },
        20000,
        'MetaService /health 200',
      );
    } catch (e) {
      await p.kill();
      throw e;
    }
    return p;
  }

  get log(): string {
    return this.output;
  }

  async call(rpc: string, body: unknown): Promise<any> { // `any`: loosely typed response JSON read by tests
    const res = await fetch(`${this.url}/api/${rpc}`, { method: 'POST', body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${rpc}`);
    return res.json();
  }

  /** kill -9: no drain, no flush. */
  async kill(): Promise<void> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGKILL');
    await this.exited;
  }

  /** SIGTERM: the §9.3 drain; resolves with the exit code. */
  async stop(): Promise<number | null> {
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill('SIGTERM');
    return this.exited;
  }
}
