/**
 * Pure: the engines in force from the engines file's listed entries and the addresses its DNS
 * entries resolve to (engines.md §6). A DNS engine is named `<address>:<port>` (IPv6
 * `[address]:port`) with url `http://<address>:<port>`, and takes its streams from the entry's
 * ports (`tcp://<address>:<event_port + r>`) unless the engine serves `/kv_event_sources`
 * (engine-scraper.ts decides that later).
 *
 * An engine found twice is kept once: a listed entry wins over any DNS entry (same name, or a url
 * naming the same host:port), an earlier DNS entry over a later one; every drop is reported so
 * the caller can log it. Names reserved by static streams are dropped the same way.
 *
 * Cost: O(listed + resolved addresses) per call, run when the file or an answer changes.
 */
import type { DnsEngineEntry } from './dns-entry.js';
import type { DnsTarget } from './dns-resolution.js';
import type { EngineEntry } from './engines-file.js';

/** An engine left out because another entry already gives it. */
export interface DnsDuplicate {
  /** The engine's name (`10.0.0.5:8000`). */
  readonly engine: string;
  /** The DNS name whose engine was dropped. */
  readonly dropped: string;
  /** What keeps it: `engines-file entry "vllm-0"`, `dns:<other name>`, `a static stream`. */
  readonly keptBy: string;
}

export interface ExpandedEngines {
  /** Listed entries first (file order), then each DNS entry's engines (entry order, then address order). */
  readonly engines: readonly EngineEntry[];
  readonly duplicates: readonly DnsDuplicate[];
}

/** `targets(entry)`: the addresses in force for a DNS entry (the watcher's answer). */
export function expandDnsEntries(
  listed: readonly EngineEntry[],
  dnsEntries: readonly DnsEngineEntry[],
  targets: (entry: DnsEngineEntry) => readonly DnsTarget[],
  reservedNames: ReadonlySet<string> = new Set(),
): ExpandedEngines {
  const engines: EngineEntry[] = [...listed];
  const duplicates: DnsDuplicate[] = [];
  // name or url host:port (lower case) → who holds it
  const holders = new Map<string, string>();
  for (const e of listed) {
    const who = `engines-file entry ${JSON.stringify(e.name)}`;
    holders.set(e.name.toLowerCase(), who);
    const host = urlHost(e.url);
    if (host !== null && !holders.has(host)) holders.set(host, who);
  }
  for (const entry of dnsEntries) {
    for (const t of targets(entry)) {
      const port = t.port ?? entry.port;
      if (port === null) continue; // an SRV entry's target always has its port
      const engine = dnsEngine(entry, t.address, port);
      const key = engine.name.toLowerCase();
      const keptBy = reservedNames.has(engine.name) ? 'a static stream' : holders.get(key);
      if (keptBy !== undefined) {
        duplicates.push({ engine: engine.name, dropped: entry.dns, keptBy });
        continue;
      }
      holders.set(key, `dns:${entry.dns}`);
      engines.push(engine);
    }
  }
  return { engines: Object.freeze(engines), duplicates };
}

/** The engine at `address:port` of a DNS entry. */
export function dnsEngine(entry: DnsEngineEntry, address: string, port: number): EngineEntry {
  const host = address.includes(':') ? `[${address}]` : address;
  const name = `${host}:${port}`;
  return Object.freeze({
    name,
    url: `http://${name}`,
    kind: entry.kind,
    role: entry.role,
    dpSize: entry.dpSize,
    dpRankOffset: 0,
    eventEndpoint: entry.eventPort === null ? null : `tcp://${host}:${entry.eventPort}`,
    replayEndpoint: entry.replayPort === null ? null : `tcp://${host}:${entry.replayPort}`,
    topic: entry.topic,
    blockSize: entry.blockSize,
    models: entry.models,
    dnsName: entry.dns,
    eventSources: null,
  });
}

/** `host:port` of a url as URL normalizes it (IPv6 compressed and bracketed), lower case. */
function urlHost(url: string): string | null {
  try {
    return new URL(url).host.toLowerCase();
  } catch {
    return null;
  }
}
