/**
 * The HTTP side of engines.md §6's `GET <url>/kv_event_sources`: one request, classified for the
 * scraper (engine-scraper.ts) — an answer (the engine's streams), the route not served (any 4xx:
 * the entry's ports), an unusable answer (the ports, logged and counted), or a failure to ask
 * again (transport error, 5xx, 408, 429). Parsing is kv-event-sources.ts's (pure).
 */
import { KvEventSourcesError, parseKvEventSources, type KvEventSource } from './kv-event-sources.js';

/** vLLM's discovery route (engines.md §6). */
export const KV_EVENT_SOURCES_PATH = '/kv_event_sources';

/** One `GET /kv_event_sources`: an answer, or why there is none. */
export type KvEventSourcesFetch =
  | { readonly kind: 'served'; readonly sources: readonly KvEventSource[] }
  | { readonly kind: 'unserved' | 'malformed' | 'failed'; readonly detail: string };

export async function fetchKvEventSources(baseUrl: string, signal: AbortSignal): Promise<KvEventSourcesFetch> {
  const url = `${baseUrl}${KV_EVENT_SOURCES_PATH}`;
  let status: number;
  let text: string;
  try {
    const res = await fetch(url, { signal, redirect: 'manual' });
    status = res.status;
    text = await res.text();
  } catch (e) {
    return { kind: 'failed', detail: `GET ${url}: ${e instanceof Error ? e.message : String(e)}` };
  }
  // A busy or starting engine: ask again. Any other non-200 means the route is not there.
  if (status >= 500 || status === 408 || status === 429) return { kind: 'failed', detail: `GET ${url} answered ${status}` };
  if (status !== 200) return { kind: 'unserved', detail: `GET ${url} answered ${status}` };
  let body: unknown;
  try {
    body = JSON.parse(text);
  } catch {
    return { kind: 'malformed', detail: `GET ${url}: not JSON` };
  }
  try {
    return { kind: 'served', sources: parseKvEventSources(body, new URL(baseUrl).hostname) };
  } catch (e) {
    if (e instanceof KvEventSourcesError) return { kind: 'malformed', detail: `GET ${url}: ${e.detail}` };
    throw e;
  }
}
