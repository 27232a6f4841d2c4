/**
 * Pure: an engines-file entry that names a DNS name instead of one engine (engines.md §6):
 *
 *   {"dns": "vllm-llama.inference.svc.cluster.local", "port": 8000, "kind": "vllm", "role": "DEFAULT",
 *    "block_size": 16, "event_port": 5557, "replay_port": 5567, "topic": "", "dp_size": 1}
 *
 * Every A/AAAA address of the name (or every SRV target, `"srv": true`, each with its own port) is
 * one engine; dns-expansion.ts turns the addresses into engines. `event_port` is optional: an entry
 * without it says that its engines serve `GET /kv_event_sources` (vLLM with bind-time ports), and
 * then `replay_port`, `dp_size` and `topic`, which only describe the ports, are refused too: the
 * engine's answer gives its ranks, endpoints and topic. Errors name `engines[i].field`.
 */
import { isIP } from 'node:net';
import { ConfigError } from '../../shared/config/config-error.js';
import { int, show, str, unknownFields, type JsonObject } from '../../shared/config/kv-events-config.js';
import { engineCommonFields, MAX_DP_SIZE, MAX_PORT, type EngineCommonFields } from './entry-fields.js';

const DNS_ENTRY_FIELDS = ['dns', 'srv', 'port', 'kind', 'role', 'block_size', 'event_port', 'replay_port', 'topic', 'dp_size', 'models'] as const;
/** Fields that only describe the entry's own ports (§6: without `event_port` they come from the engine). */
const PORT_FIELDS = ['replay_port', 'dp_size', 'topic'] as const;
const MAX_NAME_LENGTH = 253;
const LABEL_RE = /^[A-Za-z0-9_]([A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?$/;

/** One validated DNS entry (frozen). */
export interface DnsEngineEntry extends EngineCommonFields {
  /** The name as resolved: lower case, no trailing dot. */
  readonly dns: string;
  /** SRV records give the engines (targets and ports) rather than A/AAAA records of the name. */
  readonly srv: boolean;
  /** Every engine's HTTP port; null with `srv` (each SRV record carries its own). */
  readonly port: number | null;
  /** Rank r publishes on `event_port + r`; null: the engines serve `GET /kv_event_sources`. */
  readonly eventPort: number | null;
  readonly replayPort: number | null;
  readonly dpSize: number;
  readonly topic: string;
}

/** Whether an entry object is a DNS entry (it has `dns`); the others list one engine each. */
export function isDnsEntry(o: JsonObject): boolean {
  return o['dns'] !== undefined;
}

export function parseDnsEntry(o: JsonObject, path: string): DnsEngineEntry {
  for (const named of ['name', 'url'] as const) {
    if (o[named] !== undefined) {
      throw new ConfigError(`${path}.${named}`, 'a DNS entry finds its engines by name: give either name and url (one engine) or dns (every address of a name)');
    }
  }
  unknownFields(o, DNS_ENTRY_FIELDS, path);
  const dns = dnsName(o['dns'], `${path}.dns`);
  const srv = o['srv'];
  if (srv !== undefined && typeof srv !== 'boolean') throw new ConfigError(`${path}.srv`, `expected true or false, got ${show(srv)}`);
  const isSrv = srv === true;
  let port: number | null = null;
  if (isSrv) {
    if (o['port'] !== undefined) throw new ConfigError(`${path}.port`, 'not with "srv": true (each SRV record gives its engine\'s port)');
  } else {
    if (o['port'] === undefined) throw new ConfigError(`${path}.port`, 'required (the engines\' HTTP port), unless "srv": true');
    port = int(o, 'port', path, 0, 1, MAX_PORT);
  }
  const common = engineCommonFields(o, path);
  if (o['event_port'] === undefined) {
    for (const f of PORT_FIELDS) {
      if (o[f] !== undefined) throw new ConfigError(`${path}.${f}`, 'only with event_port (without it, ranks, endpoints and topic come from GET /kv_event_sources)');
    }
    return Object.freeze({ dns, srv: isSrv, port, ...common, eventPort: null, replayPort: null, dpSize: 1, topic: '' });
  }
  const dpSize = int(o, 'dp_size', path, 1, 1, MAX_DP_SIZE);
  const eventPort = rankedPort(o, 'event_port', path, dpSize);
  const replayPort = o['replay_port'] === undefined ? null : rankedPort(o, 'replay_port', path, dpSize);
  // One engine binds all these ports on one address: they must not overlap each other or the HTTP port.
  if (replayPort !== null && eventPort < replayPort + dpSize && replayPort < eventPort + dpSize) {
    throw new ConfigError(`${path}.replay_port`, `ports ${replayPort}..${replayPort + dpSize - 1} overlap the event ports ${eventPort}..${eventPort + dpSize - 1}`);
  }
  if (port !== null) {
    for (const [field, first] of [['event_port', eventPort], ['replay_port', replayPort]] as const) {
      if (first !== null && port >= first && port < first + dpSize) throw new ConfigError(`${path}.${field}`, `ports ${first}..${first + dpSize - 1} include the HTTP port ${port}`);
    }
  }
  const topic = str(o, 'topic', path, '');
  return Object.freeze({ dns, srv: isSrv, port, ...common, eventPort, replayPort, dpSize, topic });
}

/** A host name (letters, digits, `-`, `_` for SRV's `_http._tcp`), at most 253 characters, not an address. */
function dnsName(v: unknown, path: string): string {
  const bad = (why: string): ConfigError => new ConfigError(path, `expected a DNS name (${why}), got ${show(v)}`);
  if (typeof v !== 'string') throw bad('a string');
  const name = (v.endsWith('.') ? v.slice(0, -1) : v).toLowerCase();
  if (name === '' || name.length > MAX_NAME_LENGTH) throw bad(`1..${MAX_NAME_LENGTH} characters`);
  if (isIP(name) !== 0 || isIP(name.replace(/^\[|\]$/g, '')) !== 0) throw bad('an address is one engine: list it with name and url');
  if (!name.split('.').every((l) => LABEL_RE.test(l))) throw bad('dot-separated labels of letters, digits, - and _, each at most 63');
  return name;
}

/** A port whose last rank (`+ dp_size − 1`) is still a port. */
function rankedPort(o: JsonObject, field: string, path: string, dpSize: number): number {
  const port = int(o, field, path, 0, 1, MAX_PORT);
  if (port + dpSize - 1 > MAX_PORT) throw new ConfigError(`${path}.${field}`, `port ${port} + dp_size ${dpSize} - 1 is above ${MAX_PORT}`);
  return port;
}
