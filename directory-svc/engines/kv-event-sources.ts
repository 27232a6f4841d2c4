/**
 * Pure: an engine's answer to `GET <url>/kv_event_sources` (engines.md §6; vLLM's route from its
 * PR 55844, which binds each DP rank's publisher and reports where it landed) as the streams it
 * publishes. vLLM answers a bare JSON array, one object per DP rank:
 *
 *   [{"data_parallel_rank": 0, "endpoint": "tcp://*:5557", "replay_endpoint": "tcp://*:5558", "topic": ""}, ...]
 *
 * `replay_endpoint` is null without a replay socket (vLLM's default). A bind-side wildcard host
 * (`*`, `0.0.0.0`, `[::]`) is not connectable: it becomes the engine's own address. Unknown keys
 * are ignored (a newer vLLM may add some); anything else unexpected is a `KvEventSourcesError`
 * naming the element and key, and the caller keeps the entry's ports (engine-scraper.ts).
 */
import { DomainError } from '../../shared/errors/domain-error.js';

/** One DP rank's publisher: where the directory subscribes (and replays) for it. */
export interface KvEventSource {
  /** The batches' `data_parallel_rank`, and the stream's dp_rank. */
  readonly dpRank: number;
  /** Connectable `tcp://host:port`. */
  readonly endpoint: string;
  /** Connectable `tcp://host:port`; null: no replay endpoint (engines.md §3). */
  readonly replayEndpoint: string | null;
  readonly topic: string;
}

export class KvEventSourcesError extends DomainError {
  readonly class = 'kv_event_sources' as const;
}

/** Streams' dp ranks stay within the directory's dp_rank bound (as engines-file dp_rank_offset). */
const MAX_DP_RANK = 1023;
const TCP_RE = /^tcp:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9*]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/;
const WILDCARD_HOSTS = new Set(['*', '0.0.0.0', '[::]', '[0:0:0:0:0:0:0:0]']);

/**
 * The answer's ranks, sorted by dp rank, with wildcard hosts replaced by `engineHost` (the host of
 * the engine's url as a URL writes it: `10.0.0.5`, `[fd00::5]`, `vllm-0.svc`). An empty array is
 * a valid answer: the engine publishes no KV events.
 */
export function parseKvEventSources(body: unknown, engineHost: string): readonly KvEventSource[] {
  if (!Array.isArray(body)) throw new KvEventSourcesError(`expected a JSON array (one object per DP rank), got ${kindOf(body)}`);
  const out: KvEventSource[] = [];
  const ranks = new Set<number>();
  const endpoints = new Map<string, string>();
  for (let i = 0; i < body.length; i++) {
    const at = `[${i}]`;
    const o: unknown = body[i];
    if (typeof o !== 'object' || o === null || Array.isArray(o)) throw new KvEventSourcesError(`${at}: expected an object, got ${kindOf(o)}`);
    const rec = o as Record<string, unknown>;
    const dpRank = rec['data_parallel_rank'];
    if (typeof dpRank !== 'number' || !Number.isInteger(dpRank) || dpRank < 0 || dpRank > MAX_DP_RANK) {
      throw new KvEventSourcesError(`${at}.data_parallel_rank: expected an integer in 0..${MAX_DP_RANK}, got ${kindOf(dpRank)}`);
    }
    if (ranks.has(dpRank)) throw new KvEventSourcesError(`${at}.data_parallel_rank: rank ${dpRank} listed twice`);
    ranks.add(dpRank);
    const endpoint = connectable(rec['endpoint'], `${at}.endpoint`, engineHost);
    if (endpoint === null) throw new KvEventSourcesError(`${at}.endpoint: required`);
    const replayEndpoint = connectable(rec['replay_endpoint'], `${at}.replay_endpoint`, engineHost);
    const topic = rec['topic'] ?? '';
    if (typeof topic !== 'string') throw new KvEventSourcesError(`${at}.topic: expected a string, got ${kindOf(topic)}`);
    for (const [ep, what] of [[endpoint, 'endpoint'], [replayEndpoint, 'replay_endpoint']] as const) {
      if (ep === null) continue;
      const other = endpoints.get(ep.toLowerCase());
      if (other !== undefined) throw new KvEventSourcesError(`${at}.${what}: ${ep} is also ${other}`);
      endpoints.set(ep.toLowerCase(), `${at}.${what}`);
    }
    out.push(Object.freeze({ dpRank, endpoint, replayEndpoint, topic }));
  }
  out.sort((a, b) => a.dpRank - b.dpRank);
  return Object.freeze(out);
}

/** Whether two answers name the same streams (an unchanged answer changes nothing downstream). */
export function sameKvEventSources(a: readonly KvEventSource[] | null, b: readonly KvEventSource[] | null): boolean {
  if (a === b) return true;
  if (a === null || b === null || a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) {
    const x = a[i]!;
    const y = b[i]!;
    if (x.dpRank !== y.dpRank || x.endpoint !== y.endpoint || x.replayEndpoint !== y.replayEndpoint || x.topic !== y.topic) return false;
  }
  return true;
}

/** A `tcp://host:port` the directory can connect to; null for an absent or null value. */
function connectable(v: unknown, at: string, engineHost: string): string | null {
  if (v === undefined || v === null) return null;
  const bad = (why: string): KvEventSourcesError => new KvEventSourcesError(`${at}: expected tcp://host:port (${why}), got ${kindOf(v)}`);
  if (typeof v !== 'string') throw bad('a string');
  const m = TCP_RE.exec(v);
  if (m === null) throw bad(v.startsWith('ipc:') || v.startsWith('inproc:') ? 'a local ipc/inproc socket is not reachable from the directory' : 'not a tcp endpoint');
  const port = Number(m[3]);
  if (port < 1 || port > 65535) throw bad('port in 1..65535');
  const host = m[1]!;
  if (WILDCARD_HOSTS.has(host)) return `tcp://${engineHost}:${port}`;
  if (host.includes('*')) throw bad('a wildcard only as the whole host');
  return v;
}

function kindOf(v: unknown): string {
  if (v === undefined) return 'nothing';
  const text = JSON.stringify(v);
  return text === undefined ? typeof v : text.length > 80 ? `${text.slice(0, 77)}...` : text;
}
