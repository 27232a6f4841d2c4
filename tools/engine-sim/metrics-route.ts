/**
 * `GET /metrics` on a vLLM- or SGLang-kind simulator's business port (engines.md §5): the engine's
 * load as its own Prometheus exposition, which the directory's engines-file scraper reads instead
 * of heartbeats. Every other path is left to the wrapped routes (the OpenAI endpoint).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { EngineHttpRoutes } from './engine-control.js';
import { goFloat, renderSimMetrics, type MetricsEngineKind } from './prometheus-exposition.js';
import type { RankDispatcher } from './rank-dispatcher.js';

/** prometheus_client reads the start time from /proc in clock ticks: 10 ms resolution. */
const PROCESS_START_TIME_S = Math.round(performance.timeOrigin / 10) / 100;

/** `process_start_time_seconds` as this process exports it: what the directory takes as its incarnation (engines.md §4.3). */
export function processIdentity(): string {
  return goFloat(PROCESS_START_TIME_S);
}

/** The content type prometheus_client's exposition answers with. */
const CONTENT_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

export class MetricsRoute implements EngineHttpRoutes {
  constructor(
    private readonly kind: MetricsEngineKind,
    private readonly dispatcher: RankDispatcher,
    private readonly processMetrics: boolean,
    private readonly inner: EngineHttpRoutes,
    /** The served base model: the `model_name` label vLLM and SGLang put on every sample. */
    private readonly baseModel: string = 'sim',
  ) {}

  handle(req: IncomingMessage, res: ServerResponse): boolean {
    const path = (req.url ?? '').split('?', 1)[0]!;
    if (path !== '/metrics') return this.inner.handle(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      res.writeHead(405).end();
      return true;
    }
    const load = this.dispatcher.load();
    const text = renderSimMetrics({
      kind: this.kind,
      model: this.baseModel,
      waitingRequests: load.waiting_requests_num,
      runningRequests: 0,
      cacheUsageByRank: this.dispatcher.cacheUsageByRank(),
      processStartTimeS: this.processMetrics ? PROCESS_START_TIME_S : null,
      residentMemoryBytes: process.memoryUsage.rss(),
    });
    res.writeHead(200, { 'content-type': CONTENT_TYPE, 'content-length': Buffer.byteLength(text) });
    res.end(req.method === 'HEAD' ? undefined : text);
    return true;
  }
}
