/**
 * meta-svc as a real child process serving the MetaService on a free port over a given store
 * (kvcm-meta P-01/P-02, E2E, §9.4 R1–R5): `node --import tsx meta-svc/main.ts`. `store` is a
 * SQLite file path or a `redis://` URL. `kill()` is `kill -9`; `stop()` is SIGTERM
 * (§9.3 drain). Output is kept for failure messages.
 */
import { ServiceProcess } from '../../shared/process/service-process.js';
import { freePort } from './ports.js';

export class MetaProcess {
  private constructor(
    private readonly proc: ServiceProcess,
    readonly url: string,
  ) {}

  /** Starts the process and waits until `/health` answers 200. */
  static async start(store: string, extraArgs: readonly string[] = []): Promise<MetaProcess> {
    const metaPort = await freePort();
    const proc = ServiceProcess.spawn({
      name: 'meta-svc',
      entry: 'meta-svc/main.ts',
      args: [`--http_port=${metaPort}`, `--meta_store=${store.startsWith('redis://') ? store : `sqlite:${store}`}`, ...extraArgs],
    });
    const p = new MetaProcess(proc, `http://127.0.0.1:${metaPort}`);
    try {
      await proc.waitForHttp(`${p.url}/health`, 20000);
    } catch (e) {
      await p.kill();
      throw e;
    }
    return p;
  }

  /** Resolves with the first output line matching `re` (the process writes its log after answering, so a test waits for it). */
  waitForOutput(re: RegExp, timeoutMs = 5000): Promise<string> {
    return this.proc.waitForOutput(re, timeoutMs);
  }

  /** Everything the process printed so far. */
  get log(): string {
    return this.proc.output.join('\n');
  }

  async call(rpc: string, body: unknown): Promise<any> { // `any`: loosely typed response JSON read by tests
    const res = await fetch(`${this.url}/api/${rpc}`, { method: 'POST', body: JSON.stringify(body) });
    if (res.status !== 200) throw new Error(`HTTP ${res.status} from ${rpc}`);
    return res.json();
  }

  /** kill -9: no drain, no flush. */
  async kill(): Promise<void> {
    await this.proc.kill();
  }

  /** SIGTERM: the §9.3 drain; resolves with the exit code. */
  async stop(): Promise<number | null> {
    return (await this.proc.stop()).code;
  }
}
