/**
 * Issue 28: what one big EVENT_BLOCK_SNAPSHOT does to everything else a meta-svc serves.
 *
 * One meta-svc process (real: `node --import tsx meta-svc/main.ts`) on the given store; one
 * reporter registered; 20 other reporters each sending 1-block ADDs back to back; `/health`
 * polled every 10 ms. First a baseline window without the snapshot, then the same load while one
 * reportEvent with `blocks` snapshot blocks (built before timing) is sent and answered.
 * Measured, each window: the service's longest event-loop delay (`kvcm_event_loop_delay_max_seconds`,
 * scraped right before and right after the window), the `/health` round trip p99 and max, and
 * the other reporters' ADD requests answered OK per second.
 */
import { Agent, request } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ServiceProcess } from '../../shared/process/service-process.js';
import { freePort } from '../../test/helpers/ports.js';
import type { RedisServer } from '../../test/helpers/redis-server.js';

export interface StallResult {
  readonly snapshotMs: number;
  readonly snapshotCode: string;
  readonly bodyBytes: number;
  readonly stallMaxMs: number;
  readonly healthP99Ms: number;
  readonly healthMaxMs: number;
  readonly healthSamples: number;
  readonly addsPerS: number;
  readonly baseline: { readonly stallMaxMs: number; readonly healthP99Ms: number; readonly healthMaxMs: number; readonly addsPerS: number; readonly windowMs: number };
}

const OTHER_REPORTERS = 20;
const HEALTH_EVERY_MS = 10;
const WARMUP_MS = 3000;
const INSTANCE = 'test_instance';
const L2 = 'ST_EVENT_REPORT_L2';

interface Reply {
  readonly status: number;
  readonly text: string;
}

function send(agent: Agent, port: number, method: string, path: string, body?: Buffer | string): Promise<Reply> {
  return new Promise((resolve, reject) => {
    const req = request({ host: '127.0.0.1', port, path, method, agent, headers: body === undefined ? {} : { 'content-length': Buffer.byteLength(body) } }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    req.on('error', reject);
    req.end(body);
  });
}

function codeOf(r: Reply): string {
  if (r.status !== 200) return `http_${r.status}`;
  return (JSON.parse(r.text) as { header: { status: { code: string } } }).header.status.code;
}

/** `kvcm_event_loop_delay_max_seconds` in ms; each scrape resets it. */
async function loopStallMs(port: number, agent: Agent): Promise<number> {
  const text = (await send(agent, port, 'GET', '/metrics')).text;
  const m = /^kvcm_event_loop_delay_max_seconds (\S+)$/m.exec(text);
  return m === null ? Number.NaN : Math.round(Number(m[1]) * 1e6) / 1e3;
}

function pct(sorted: readonly number[], p: number): number {
  return sorted.length === 0 ? 0 : (sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] as number);
}

const round = (v: number): number => Math.round(v * 1000) / 1000;

/** The snapshot request: `blocks` blocks on medium gpu, one spec each (≈ 115 bytes a block). */
export function snapshotBody(host: string, blocks: number): Buffer {
  const parts: string[] = [];
  for (let i = 0; i < blocks; i++) {
    const key = 70_000_000 + i;
    parts.push(`{"block_key":"${key}","medium":"gpu","specs":[{"name":"tp0","uri":"event_report://${host}/gpu/${key}?size=4096"}]}`);
  }
  return Buffer.from(`{"instance_id":"${INSTANCE}","host_ip_port":"${host}","storage_type":"${L2}","events":[{"event_type":"EVENT_BLOCK_SNAPSHOT","block_snapshot":{"blocks":[${parts.join(',')}]}}]}`);
}

/** Runs the two windows against a fresh meta-svc on `store` (`sqlite:<path>` or a redis URL). */
export async function measureSnapshotStall(opts: { store: 'sqlite' | 'redis'; redis: RedisServer | null; blocks: number; baselineMs: number }): Promise<StallResult> {
  const dir = mkdtempSync(join(tmpdir(), 'kvcm-stall-'));
  const port = await freePort();
  const storeArg = opts.redis !== null ? opts.redis.url() : `sqlite:${join(dir, 'kvcm.db')}`;
  const child = ServiceProcess.spawn({ name: 'meta-svc', entry: 'meta-svc/main.ts', args: [`--http_port=${port}`, `--meta_store=${storeArg}`, '--log_level=warn', '--node_id=stall'] });
  const addAgent = new Agent({ keepAlive: true, maxSockets: OTHER_REPORTERS });
  const probe = new Agent({ keepAlive: true, maxSockets: 1 });
  const snapAgent = new Agent({ keepAlive: true, maxSockets: 1 });
  try {
    await child.waitForHttp(`http://127.0.0.1:${port}/health`, 60000);
    const host = '10.9.9.9:1';
    const body = snapshotBody(host, opts.blocks);
    const register = JSON.stringify({ instance_id: INSTANCE, host_ip_port: host, storage_type: L2, events: [{ event_type: 'EVENT_NODE_REGISTER', node_register: { mediums: ['gpu'] } }] });
    if (codeOf(await send(snapAgent, port, 'POST', '/api/reportEvent', register)) !== 'OK') throw new Error('register failed');

    // Load: 20 reporters' 1-block ADDs and the /health poller, for both windows.
    let stop = false;
    const addDone: number[] = [];
    const health: { at: number; ms: number }[] = [];
    const adder = async (r: number): Promise<void> => {
      for (let k = 0; !stop; k++) {
        const key = 1_000_000 * (r + 1) + k;
        const b = JSON.stringify({
          instance_id: INSTANCE,
          host_ip_port: `10.1.0.${r}:1`,
          storage_type: L2,
          events: [{ event_type: 'EVENT_BLOCK_ADD', block_add: { block_key: String(key), medium: 'gpu', specs: [{ name: 'tp0', uri: `event_report://10.1.0.${r}:1/gpu/${key}` }] } }],
        });
        if (codeOf(await send(addAgent, port, 'POST', '/api/reportEvent', b)) === 'OK') addDone.push(performance.now());
      }
    };
    const poller = async (): Promise<void> => {
      while (!stop) {
        const t0 = performance.now();
        await send(probe, port, 'GET', '/health');
        const t1 = performance.now();
        health.push({ at: t1, ms: t1 - t0 });
        const wait = HEALTH_EVERY_MS - (t1 - t0);
        if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      }
    };
    const loops = [poller(), ...Array.from({ length: OTHER_REPORTERS }, (_, r) => adder(r))];
    // Warm-up (every reporter created, connections open, the process's code compiled), then the
    // baseline window: a fresh process is slow for its first seconds.
    await new Promise((r) => setTimeout(r, WARMUP_MS));
    await loopStallMs(port, probe);
    const b0 = performance.now();
    await new Promise((r) => setTimeout(r, opts.baselineMs));
    const b1 = performance.now();
    const baselineStall = await loopStallMs(port, probe);

    await loopStallMs(port, probe);
    const s0 = performance.now();
    const snap = await send(snapAgent, port, 'POST', '/api/reportEvent', body);
    const s1 = performance.now();
    const stall = await loopStallMs(port, probe);
    stop = true;
    await Promise.all(loops);

    const within = (t0: number, t1: number): { adds: number; health: number[] } => ({
      adds: addDone.filter((t) => t >= t0 && t < t1).length,
      health: health.filter((h) => h.at >= t0 && h.at < t1).map((h) => h.ms).sort((x, y) => x - y),
    });
    const base = within(b0, b1);
    const during = within(s0, s1);
    return {
      snapshotMs: Math.round(s1 - s0),
      snapshotCode: codeOf(snap),
      bodyBytes: body.length,
      stallMaxMs: stall,
      healthP99Ms: round(pct(during.health, 99)),
      healthMaxMs: round(during.health.length > 0 ? (during.health[during.health.length - 1] as number) : 0),
      healthSamples: during.health.length,
      addsPerS: round((during.adds * 1000) / (s1 - s0)),
      baseline: {
        stallMaxMs: baselineStall,
        healthP99Ms: round(pct(base.health, 99)),
        healthMaxMs: round(base.health.length > 0 ? (base.health[base.health.length - 1] as number) : 0),
        addsPerS: round((base.adds * 1000) / (b1 - b0)),
        windowMs: Math.round(b1 - b0),
      },
    };
  } finally {
    addAgent.destroy();
    probe.destroy();
    snapAgent.destroy();
    await child.stop();
    rmSync(dir, { recursive: true, force: true });
  }
}
