/**
 * Pure: the streams one engines-file engine publishes (engines.md §4, §6): the ranks its
 * `/kv_event_sources` answer lists when it serves one, otherwise rank `r` on the entry's ports
 * `+ r` as stream dp_rank `dp_rank_offset + r` (vLLM's own rule). An engine with neither (a DNS
 * entry without `event_port` whose engine does not serve the route) has no streams.
 */
import { rankEndpoint, type EngineEntry } from './engines-file.js';
import type { KvEventSource } from './kv-event-sources.js';

const NO_RANKS: readonly KvEventSource[] = Object.freeze([]);

/** The engine's streams, in dp-rank order; `replayEndpoint` null: no replay endpoint (engines.md §3). */
export function engineRanks(entry: EngineEntry): readonly KvEventSource[] {
  if (entry.eventSources !== null) return entry.eventSources;
  const events = entry.eventEndpoint;
  if (events === null) return NO_RANKS;
  const out: KvEventSource[] = [];
  for (let r = 0; r < entry.dpSize; r++) {
    out.push({
      dpRank: entry.dpRankOffset + r,
      endpoint: rankEndpoint(events, r),
      replayEndpoint: entry.replayEndpoint === null ? null : rankEndpoint(entry.replayEndpoint, r),
      topic: entry.topic,
    });
  }
  return out;
}
