/**
 * The cluster benchmark's load generator, on its own worker thread: it sends every session's
 * requests at their times and measures each answer, while the engines and the router replicas
 * share the main thread's event loop. On that loop the client's timers fired late and together
 * whenever the system under test was busy: two first turns scheduled 3.3 ms apart went out
 * 0.3 ms apart in the 4-replica runs (and 3.3 ms apart with 1 router), which decided whether
 * the replicas could hear of each other's decisions in between. A load generator must keep its
 * schedule whatever the load it causes.
 *
 * Closed loop (`startsMs` null): each session sends its next request after the previous answer
 * plus its think time. Open loop (the load sweep): session `si` starts at `startsMs[si]` and
 * sends each turn at its scheduled time whether or not the previous answer came, so offered load
 * does not fall when the cluster slows down.
 *
 * Targets: router replicas in turn (as an L4 balancer spreads requests), or the ORACLE, which
 * lives in the main thread beside the engines' pools: the client asks it per request ('choose')
 * and tells it the answer ('done'), so its true queues count in-transit requests as before.
 */
import { Agent, request as httpRequest } from 'node:http';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, workerData, type Worker } from 'node:worker_threads';
import { performance } from 'node:perf_hooks';
import { INSTANCE_HEADER } from '../../router-svc/proxy/upstream-forwarder.js';
import { PREFILL_TIMING_HEADERS } from '../../tools/engine-sim/prefill-cost-model.js';
import { nextMessage, tsWorker } from '../lib/ts-worker.js';

export interface Sample {
  readonly index: number;
  /** Session (user or agent branch) and its step: what a trace needs to follow a conversation. */
  session: number;
  step: number;
  /** On the client's monotonic clock (the worker's performance.now), from the run's start. */
  readonly sentMs: number;
  readonly doneMs: number;
  readonly ttftMs: number;
  readonly engineTtftMs: number;
  /** The engine's queue wait before its prefill started (engine clock). */
  readonly engineQueueMs: number;
  readonly promptTokens: number;
  readonly cachedTokens: number;
  readonly deviceHitTokens: number;
  readonly hostHitTokens: number;
  readonly instance: string;
}

/** What the client needs of a request: where it goes is the target's business. */
export interface ClientRequest {
  readonly path: string;
  readonly body: string;
  readonly delayMs: number;
}

export type ClientTarget = { readonly kind: 'routers'; readonly urls: readonly string[] } | { readonly kind: 'oracle' };

/** The main thread's side of an ORACLE run: the engine for (session, step), and its answer hook. */
export type OracleChooser = (session: number, step: number) => { readonly url: string; readonly done: () => void };

const ROLE = 'cluster-load-client';

interface RunMessage {
  kind: 'run';
  sessions: ClientRequest[][];
  target: ClientTarget;
  startsMs: readonly number[] | null;
}

export class LoadClient {
  private constructor(private readonly worker: Worker) {}

  static async start(): Promise<LoadClient> {
    const worker = tsWorker(fileURLToPath(import.meta.url), { role: ROLE });
    await nextMessage(worker, 'ready');
    return new LoadClient(worker);
  }

  /** One pass of `sessions`: samples in send order and the client's wall time. */
  async drive(sessions: readonly (readonly ClientRequest[])[], target: ClientTarget, startsMs: readonly number[] | null, oracle: OracleChooser | null): Promise<{ samples: Sample[]; wallMs: number }> {
    const pending = new Map<number, () => void>();
    const onMessage = (m: { kind: string; id?: number; session?: number; step?: number }): void => {
      if (m.kind === 'choose' && oracle !== null) {
        const c = oracle(m.session!, m.step!);
        pending.set(m.id!, c.done);
        this.worker.postMessage({ kind: 'chosen', id: m.id, url: c.url });
      } else if (m.kind === 'done') {
        pending.get(m.id!)?.();
        pending.delete(m.id!);
      }
    };
    this.worker.on('message', onMessage);
    try {
      const result = nextMessage<{ samples: Sample[]; wallMs: number; error?: string }>(this.worker, 'result');
      const run: RunMessage = { kind: 'run', sessions: sessions.map((s) => s.map((r) => ({ path: r.path, body: r.body, delayMs: r.delayMs }))), target, startsMs };
      this.worker.postMessage(run);
      const r = await result;
      if (r.error !== undefined) throw new Error(`load client: ${r.error}`);
      return r;
    } finally {
      this.worker.off('message', onMessage);
    }
  }

  close(): Promise<number> {
    return this.worker.terminate();
  }
}

// ---- the worker ---------------------------------------------------------------------------

/**
 * Keep-alive within a run; a fresh pool per run (`drive`): a socket idle since an earlier run may
 * be closed by its server (5 s keep-alive timeout) just as it is reused, an ECONNRESET that would
 * end the benchmark.
 */
let agent = newAgent();

/**
 * Idle pooled sockets are dropped after 4 s, before a node server's 5 s keep-alive timeout closes
 * them under a request (a trace's sparse, long runs left sockets idle that long).
 */
function newAgent(): Agent {
  return new Agent({ keepAlive: true, maxSockets: 1024, timeout: 4000 });
}

/** One completion; TTFT is send → response headers (the engine answers right after the first token). */
function send(url: string, path: string, body: string, index: number, t0: number): Promise<Sample> {
  return new Promise((resolve, reject) => {
    const sentAt = performance.now();
    const req = httpRequest(`${url}${path}`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } }, (res) => {
      const ttftMs = performance.now() - sentAt;
      const chunks: Buffer[] = [];
      res.on('data', (c: Buffer) => chunks.push(c));
      res.on('error', reject);
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        if (res.statusCode !== 200) return reject(new Error(`${url}: HTTP ${res.statusCode}: ${text}`));
        const usage = (JSON.parse(text) as { usage: { prompt_tokens: number; prompt_tokens_details: { cached_tokens: number } } }).usage;
        const h = (name: string): number => Number(res.headers[name] ?? NaN);
        resolve({
          index,
          session: -1,
          step: -1,
          sentMs: sentAt - t0,
          doneMs: performance.now() - t0,
          ttftMs,
          engineTtftMs: h(PREFILL_TIMING_HEADERS.ttftMs),
          engineQueueMs: h(PREFILL_TIMING_HEADERS.queueMs),
          promptTokens: usage.prompt_tokens,
          cachedTokens: usage.prompt_tokens_details.cached_tokens,
          deviceHitTokens: h(PREFILL_TIMING_HEADERS.deviceHitTokens),
          hostHitTokens: h(PREFILL_TIMING_HEADERS.hostHitTokens),
          instance: String(res.headers[INSTANCE_HEADER] ?? url.slice('http://'.length)),
        });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, Math.max(0, ms)));
}

async function drive(m: RunMessage): Promise<{ samples: Sample[]; wallMs: number }> {
  const port = parentPort!;
  const samples: Sample[] = [];
  let index = 0;
  let next = 0;
  let chooseId = 0;
  const chosen = new Map<number, (url: string) => void>();
  const onChosen = (c: { kind: string; id: number; url: string }): void => {
    if (c.kind !== 'chosen') return;
    chosen.get(c.id)?.(c.url);
    chosen.delete(c.id);
  };
  port.on('message', onChosen);
  const target = m.target;
  const t0 = performance.now();
  const one = async (r: ClientRequest, si: number, k: number): Promise<void> => {
    let url: string;
    let id = -1;
    if (target.kind === 'routers') url = target.urls[next++ % target.urls.length]!;
    else {
      id = chooseId++;
      url = await new Promise<string>((resolve) => {
        chosen.set(id, resolve);
        port.postMessage({ kind: 'choose', id, session: si, step: k });
      });
    }
    try {
      const sample = await send(url, r.path, r.body, index++, t0);
      sample.session = si;
      sample.step = k;
      samples.push(sample);
    } finally {
      if (id >= 0) port.postMessage({ kind: 'done', id });
    }
  };
  try {
    await Promise.all(
      m.sessions.map(async (session, si) => {
        if (m.startsMs === null) {
          for (let k = 0; k < session.length; k++) {
            await sleep(session[k]!.delayMs);
            await one(session[k]!, si, k);
          }
          return;
        }
        const sent: Promise<void>[] = [];
        let at = m.startsMs[si]!;
        for (let k = 0; k < session.length; k++) {
          if (k > 0) at += session[k]!.delayMs;
          await sleep(at - (performance.now() - t0));
          sent.push(one(session[k]!, si, k));
        }
        await Promise.all(sent);
      }),
    );
  } finally {
    port.off('message', onChosen);
  }
  samples.sort((a, b) => a.index - b.index);
  return { samples, wallMs: performance.now() - t0 };
}

if (!isMainThread && (workerData as { role?: string } | null)?.role === ROLE) {
  parentPort!.on('message', (m: { kind: string }) => {
    if (m.kind !== 'run') return;
    agent.destroy();
    agent = newAgent();
    drive(m as RunMessage).then(
      (r) => parentPort!.postMessage({ kind: 'result', ...r }),
      (e: unknown) => parentPort!.postMessage({ kind: 'result', samples: [], wallMs: 0, error: e instanceof Error ? e.message : String(e) }),
    );
  });
  parentPort!.postMessage({ kind: 'ready' });
}
