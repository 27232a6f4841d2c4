/**
 * The steady client load of the chaos and soak runs: `concurrency` seeded loops, each sending
 * prompts that share prefixes (families: a shared prefix of `prefixBlocks` complete blocks, then
 * one of `variants` suffixes of `suffixBlocks` blocks and a partial block) to the routers in turn,
 * through the OpenAI proxy (`POST /v1/completions`, token-id prompt) or `POST /v1/route`. Bounded
 * in count (`maxRequests`) and time (until `stop()`). Every answer is recorded with its start
 * time, so a run can count failures per fault window. No retries: a request that fails counts.
 */
import { seededRandom } from '../../bench/lib/seeded-random.js';

export interface WorkloadOptions {
  readonly routerUrls: () => readonly string[];
  readonly blockSize: number;
  readonly seed: number;
  /** Keeps token ids of different runs and families apart (ids stay below 2^31). */
  readonly salt: number;
  readonly families: number;
  readonly variants: number;
  readonly prefixBlocks: number;
  readonly suffixBlocks: number;
  readonly concurrency: number;
  /** Pause between two requests of one loop. */
  readonly pauseMs: number;
  readonly maxRequests: number;
  /** Share of requests through the proxy (the rest are `POST /v1/route`). */
  readonly proxyShare: number;
  readonly timeoutMs: number;
  /** Every 200 answer of `POST /v1/route`, with when it was asked (the chaos monitor checks its hits). */
  readonly onRouteAnswer?: (startMs: number, router: number, prompt: readonly number[], answer: unknown) => void;
}

export interface RequestRecord {
  readonly startMs: number;
  readonly endMs: number;
  readonly router: number;
  readonly kind: 'proxy' | 'route';
  /** HTTP status, 0 when no answer (refused, reset, timeout). */
  readonly status: number;
  readonly ok: boolean;
  readonly error: string;
}

/** Every prompt of the workload, family-major: prompt(f, v) = prompts[f * variants + v]. */
export function workloadPrompts(o: Pick<WorkloadOptions, 'blockSize' | 'salt' | 'families' | 'variants' | 'prefixBlocks' | 'suffixBlocks'>): number[][] {
  const out: number[][] = [];
  const bs = o.blockSize;
  for (let f = 0; f < o.families; f++) {
    const base = o.salt * 10_000_000 + f * 10_000;
    const prefix = Array.from({ length: o.prefixBlocks * bs }, (_, k) => base + k);
    for (let v = 0; v < o.variants; v++) {
      const suffix = Array.from({ length: o.suffixBlocks * bs + 3 }, (_, k) => base + 5000 + v * 200 + k);
      out.push([...prefix, ...suffix]);
    }
  }
  return out;
}

export class Workload {
  readonly records: RequestRecord[] = [];
  readonly prompts: number[][];
  private stopped = false;
  private sent = 0;
  private loops: Promise<void>[] = [];

  constructor(private readonly o: WorkloadOptions) {
    this.prompts = workloadPrompts(o);
  }

  start(): void {
    for (let i = 0; i < this.o.concurrency; i++) this.loops.push(this.loop(seededRandom(this.o.seed + i * 7919), i));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all(this.loops);
  }

  private async loop(rand: () => number, loopIndex: number): Promise<void> {
    let turn = loopIndex;
    while (!this.stopped && this.sent < this.o.maxRequests) {
      this.sent++;
      const urls = this.o.routerUrls();
      const router = turn++ % urls.length;
      const prompt = this.prompts[Math.floor(rand() * this.prompts.length)]!;
      const kind = rand() < this.o.proxyShare ? 'proxy' : 'route';
      this.records.push(await this.send(urls[router]!, router, kind, prompt));
      await new Promise((r) => setTimeout(r, this.o.pauseMs));
    }
  }

  private async send(url: string, router: number, kind: 'proxy' | 'route', prompt: readonly number[]): Promise<RequestRecord> {
    const startMs = Date.now();
    const path = kind === 'proxy' ? '/v1/completions' : '/v1/route';
    const body = kind === 'proxy' ? { model: 'chaos', prompt, max_tokens: 2 } : { token_ids: prompt };
    try {
      const res = await fetch(`${url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body), signal: AbortSignal.timeout(this.o.timeoutMs) });
      const text = await res.text();
      if (kind === 'route' && res.status === 200 && this.o.onRouteAnswer !== undefined) this.o.onRouteAnswer(startMs, router, prompt, JSON.parse(text) as unknown);
      return { startMs, endMs: Date.now(), router, kind, status: res.status, ok: res.status === 200, error: res.status === 200 ? '' : text.slice(0, 200) };
    } catch (e) {
      const cause = e instanceof Error ? ((e.cause as { code?: string } | undefined)?.code ?? e.name) : String(e);
      return { startMs, endMs: Date.now(), router, kind, status: 0, ok: false, error: cause };
    }
  }
}
