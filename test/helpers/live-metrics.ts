/**
 * Every service of the stack as a real process, with traffic through it, so each one's `/metrics`
 * shows the series it exports in use (labelled counters only appear once counted):
 *
 *   SimProcess (vLLM kind) ◀── /health, /metrics, ZMQ ── directory-svc --engines_file ══▶ router-svc
 *   meta-svc (SQLite in a temp dir)       client ──/v1/completions, /v1/route──▶ router-svc
 *
 * `texts()` answers each service's exposition text by service name.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { stopAllProcesses } from '../../shared/process/service-process.js';
import { FleetDirectory, SimProcess } from './engines-fleet.js';
import { MetaProcess } from './meta-process.js';
import { RouterProcess } from './router-stack.js';
import { waitFor } from './ports.js';

export type ServiceName = 'directory-svc' | 'router-svc' | 'meta-svc';

export class LiveMetricsStack {
  private constructor(
    private readonly dir: FleetDirectory,
    private readonly router: RouterProcess,
    private readonly meta: MetaProcess,
    private readonly tmp: string,
  ) {}

  static async start(): Promise<LiveMetricsStack> {
    const tmp = mkdtempSync(join(tmpdir(), 'live-metrics-'));
    const sim = await SimProcess.start('vllm-0');
    const dir = await FleetDirectory.start([sim.entry()], { refreshIntervalMs: 500 });
    const router = await RouterProcess.start(`127.0.0.1:${dir.grpcPort}`, ['--load_balance_policy=CAR', '--log_level=warn']);
    const meta = await MetaProcess.start(join(tmp, 'kvcm.db'), ['--log_level=warn']);
    const stack = new LiveMetricsStack(dir, router, meta, tmp);
    await stack.traffic();
    return stack;
  }

  /** Proxied and routed requests (the view must list the engine first), and one MetaService call. */
  private async traffic(): Promise<void> {
    const prompt = Array.from({ length: 16 }, (_, k) => 700 + k);
    const post = (path: string, body: unknown): Promise<Response> =>
      fetch(`${this.router.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
    await waitFor(async () => (await post('/v1/completions', { model: 'm', prompt, max_tokens: 2 })).status === 200, 60000, 'a proxied completion answered');
    for (let i = 0; i < 3; i++) await (await post('/v1/route', { token_ids: prompt })).arrayBuffer();
    await (await post('/v1/chat/completions', { model: 'm', messages: [{ role: 'user', content: 'hi' }], max_tokens: 2 })).arrayBuffer();
    await this.meta.call('getClusterInfo', { trace_id: 't' }).catch(() => undefined);
  }

  /** Each service's `GET /metrics` text. */
  async texts(): Promise<Record<ServiceName, string>> {
    const get = async (url: string): Promise<string> => (await fetch(`${url}/metrics`)).text();
    return {
      'directory-svc': await get(`http://127.0.0.1:${this.dir.httpPort}`),
      'router-svc': await get(this.router.url),
      'meta-svc': await get(this.meta.url),
    };
  }

  async close(): Promise<void> {
    await this.router.stop();
    await this.meta.stop();
    await this.dir.close();
    await stopAllProcesses();
    rmSync(this.tmp, { recursive: true, force: true });
  }
}
