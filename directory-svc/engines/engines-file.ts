/**
 * Pure parsing of the `--engines_file` JSON (engines.md §4, §6): the engines that do not register
 * in etcd (vLLM, SGLang, or xLLM without etcd). An entry either lists one engine (`name`, `url`)
 * or names a DNS name whose every address is an engine (`dns`, dns-entry.ts); the addresses are
 * the DNS watcher's business, not the file's. Strict: unknown fields, wrong types and
 * out-of-range values are `ConfigError`s whose path names the entry index and field
 * (`engines[2].dp_size`), so a reload that fails says exactly what to fix. The file system is the
 * caller's (engines-source).
 */
import { ConfigError } from '../../shared/config/config-error.js';
import type { EngineKind } from '../../shared/config/engine-kind.js';
import { int, object, show, str, tcpEndpoint, unknownFields, type JsonObject } from '../../shared/config/kv-events-config.js';
import { isDnsEntry, parseDnsEntry, type DnsEngineEntry } from './dns-entry.js';
import { engineCommonFields, MAX_DP_SIZE, MAX_PORT, type EngineRole } from './entry-fields.js';
import { sameKvEventSources, type KvEventSource } from './kv-event-sources.js';
import { sameModelLists, type ServedModel } from '../../shared/view/served-models.js';
import { jsonRootList } from '../../shared/config/json-root-list.js';

export type { EngineRole } from './entry-fields.js';

const ENTRY_FIELDS = ['name', 'url', 'kind', 'role', 'dp_size', 'event_endpoint', 'replay_endpoint', 'topic', 'block_size', 'dp_rank_offset', 'models'] as const;
// Global dp ranks stay within the static streams' dp_rank bound (0..1023).
const MAX_DP_RANK = 1023;

/** One engine (frozen): a listed entry, or one address of a DNS entry (dns-expansion.ts). */
export interface EngineEntry {
  readonly name: string;
  /** OpenAI-compatible base URL without a trailing slash (`http://10.0.0.5:8000`); the router forwards here. */
  readonly url: string;
  readonly kind: EngineKind;
  readonly role: EngineRole;
  readonly dpSize: number;
  /** Rank `r` of this entry is the stream `dp_rank_offset + r` and uses these ports `+ r`. */
  readonly dpRankOffset: number;
  /**
   * Rank 0's event endpoint; null only for a DNS entry without `event_port`, whose engines must
   * serve `GET /kv_event_sources` (engines.md §6).
   */
  readonly eventEndpoint: string | null;
  /** null: no replay endpoint (engines.md §3, vLLM's default). */
  readonly replayEndpoint: string | null;
  readonly topic: string;
  readonly blockSize: number;
  /**
   * cache-identity §1: the pinned served models (first the base, the rest its adapters); null when
   * not pinned, so the engine's `GET /v1/models` says what it serves.
   */
  readonly models: readonly ServedModel[] | null;
  /** engines.md §6: the DNS name the engine was resolved from (`ViewInstance.source` "dns:<name>"); null when listed. */
  readonly dnsName: string | null;
  /**
   * The streams the engine reported on `GET <url>/kv_event_sources`, which win over the ports
   * above (engines.md §6); null: the ports. Never set by the file: the engine's scraper fills it.
   */
  readonly eventSources: readonly KvEventSource[] | null;
}

/** The whole file: the listed engines and the DNS entries, each in file order. */
export interface EnginesFile {
  readonly engines: readonly EngineEntry[];
  readonly dnsEntries: readonly DnsEngineEntry[];
}

/** Names the file may not use: static streams' instance names (engines.md §4: never the same name twice). */
export interface EnginesFileContext {
  readonly reservedNames?: ReadonlySet<string>;
}

/** Parses the file's text; throws `ConfigError` naming `engines[i].field` (or '' for bad JSON). */
export function parseEnginesFile(text: string, ctx: EnginesFileContext = {}): EnginesFile {
  const list = jsonRootList(text, 'engines', 'required');
  const names = new Map<string, number>();
  // Lower-cased endpoint of every rank → where it was first claimed (events or replay, any entry).
  const endpoints = new Map<string, string>();
  const out: EngineEntry[] = [];
  const dnsEntries: DnsEngineEntry[] = [];
  for (let i = 0; i < list.length; i++) {
    const path = `engines[${i}]`;
    const o = object(list[i], path);
    if (isDnsEntry(o)) {
      dnsEntries.push(parseDnsEntry(o, path));
      continue;
    }
    unknownFields(o, ENTRY_FIELDS, path);
    const entry = engineEntry(o, path);
    const dup = names.get(entry.name);
    if (dup !== undefined) throw new ConfigError(`${path}.name`, `${JSON.stringify(entry.name)} already used by engines[${dup}]`);
    if (ctx.reservedNames?.has(entry.name) === true) {
      throw new ConfigError(`${path}.name`, `${JSON.stringify(entry.name)} is a static stream's instance_name`);
    }
    names.set(entry.name, i);
    for (let r = 0; r < entry.dpSize; r++) {
      claimEndpoint(endpoints, rankEndpoint(entry.eventEndpoint, r), `${path}.event_endpoint`, `${path} rank ${r} events`);
      if (entry.replayEndpoint !== null) {
        claimEndpoint(endpoints, rankEndpoint(entry.replayEndpoint, r), `${path}.replay_endpoint`, `${path} rank ${r} replay`);
      }
    }
    out.push(entry);
  }
  return Object.freeze({ engines: Object.freeze(out), dnsEntries: Object.freeze(dnsEntries) });
}

/** `tcp://host:port` with `r` added to the port (vLLM's DP rule, engines.md §4). */
export function rankEndpoint(endpoint: string, r: number): string {
  const colon = endpoint.lastIndexOf(':');
  return `${endpoint.slice(0, colon + 1)}${Number(endpoint.slice(colon + 1)) + r}`;
}

/** Whether two entries describe the same engine configuration (a reload that changes nothing for it). */
export function sameEngineEntry(a: EngineEntry, b: EngineEntry): boolean {
  for (const k of Object.keys(a) as (keyof EngineEntry)[]) {
    if (k === 'eventSources') {
      if (!sameKvEventSources(a.eventSources, b.eventSources)) return false;
    } else if (k === 'models') {
      if (!sameModelLists(a.models, b.models)) return false;
    } else if (a[k] !== b[k]) return false;
  }
  return true;
}

/** A listed entry: its event endpoint is always given (engines.md §4). */
function engineEntry(o: JsonObject, path: string): EngineEntry & { readonly eventEndpoint: string } {
  const name = o['name'];
  if (name === undefined) throw new ConfigError(`${path}.name`, 'required');
  // Control characters would break log lines and the one-line errors.
  if (typeof name !== 'string' || name === '' || /[\u0000-\u001f\u007f]/.test(name)) {
    throw new ConfigError(`${path}.name`, `expected a non-empty string without control characters, got ${show(name)}`);
  }
  const url = baseUrl(o, path);
  const { kind, role, blockSize, models } = engineCommonFields(o, path);
  const dpSize = int(o, 'dp_size', path, 1, 1, MAX_DP_SIZE);
  const dpRankOffset = int(o, 'dp_rank_offset', path, 0, 0, MAX_DP_RANK);
  if (dpRankOffset + dpSize - 1 > MAX_DP_RANK) {
    throw new ConfigError(`${path}.dp_rank_offset`, `dp_rank_offset ${dpRankOffset} + dp_size ${dpSize} gives ranks above ${MAX_DP_RANK}`);
  }
  const eventEndpoint = rankedEndpoint(o, 'event_endpoint', path, dpSize);
  const replayEndpoint = o['replay_endpoint'] === undefined ? null : rankedEndpoint(o, 'replay_endpoint', path, dpSize);
  const topic = str(o, 'topic', path, '');
  return Object.freeze({ name, url, kind, role, dpSize, dpRankOffset, eventEndpoint, replayEndpoint, topic, blockSize, models, dnsName: null, eventSources: null });
}

/** A connectable `tcp://host:port` whose last rank's port (`+ dp_size − 1`) is still a port. */
function rankedEndpoint(o: JsonObject, field: string, path: string, dpSize: number): string {
  const ep = tcpEndpoint(o, field, path);
  const port = Number(ep.slice(ep.lastIndexOf(':') + 1));
  if (port + dpSize - 1 > MAX_PORT) {
    throw new ConfigError(`${path}.${field}`, `port ${port} + dp_size ${dpSize} - 1 is above ${MAX_PORT}`);
  }
  return ep;
}

/**
 * The engine's OpenAI base URL: `http://host:port[/prefix]`, no query, fragment or user info.
 * https is refused: the router's forwarder speaks plain HTTP to engines (a TLS engine sits
 * behind a local proxy), and accepting it would fail only at the first request.
 */
function baseUrl(o: JsonObject, path: string): string {
  const v = o['url'];
  const p = `${path}.url`;
  if (v === undefined) throw new ConfigError(p, 'required');
  const bad = (why: string): ConfigError => new ConfigError(p, `expected http://host:port[/path] (${why}), got ${show(v)}`);
  if (typeof v !== 'string') throw bad('a string');
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw bad('not a URL');
  }
  if (u.protocol !== 'http:') throw bad('scheme must be http');
  if (u.username !== '' || u.password !== '' || u.search !== '' || u.hash !== '') throw bad('no user info, query or fragment');
  if (u.port === '') throw bad('an explicit port');
  return `${u.protocol}//${u.host}${u.pathname.replace(/\/+$/, '')}`;
}

function claimEndpoint(claims: Map<string, string>, endpoint: string, path: string, who: string): void {
  const key = endpoint.toLowerCase();
  const other = claims.get(key);
  if (other !== undefined) throw new ConfigError(path, `${endpoint} (${who}) is already used by ${other}`);
  claims.set(key, who);
}
