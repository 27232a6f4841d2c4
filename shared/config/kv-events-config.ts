/**
 * The `--kv_events_config_file` JSON (kv-events §9, discovery.md "Discovery config"), parsed and
 * strictly validated at start-up: unknown fields, wrong types and out-of-range values are errors,
 * each one line naming the field path (`streams[2].endpoint: expected ...`). Pure apart from
 * `readKvEventsConfigFile`, the one helper that touches the file system.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from './config-error.js';
import { DEFAULT_ENGINE_KIND, ENGINE_KINDS, isEngineKind, replaysHistory } from './engine-kind.js';
import type { EngineKind } from './engine-kind.js';
import { streamKey } from '../keys/stream-key.js';

/** The per-stream limits of kv-events §9, exactly what a stream subscriber needs. */
export interface StreamLimits {
  readonly maxBlocksPerStream: number;
  readonly maxMessageBytes: number;
  readonly maxBufferedBytes: number;
  /** Whole snapshot exchange (§6), and the §7.5 wait for `last ≥ W − 1`. */
  readonly replayTimeoutMs: number;
  /** §7.5 period of continuous SYNCHRONIZED; 0 disables periodic reconciliation. */
  readonly resyncIntervalMs: number;
}

/** One static `streams` entry (kv-events §9). */
export interface StaticStreamConfig {
  readonly instanceName: string;
  readonly dpRank: number;
  readonly blockSize: number;
  /** Connectable `tcp://host:port` of the PUB socket (§1). */
  readonly endpoint: string;
  /**
   * Connectable `tcp://host:port` of the ROUTER replay socket (§6; engines.md §3 for history
   * kinds). '' = none, allowed only for `vllm`/`sglang` (vLLM's default has no replay endpoint).
   */
  readonly replayEndpoint: string;
  /**
   * engines.md §1: `xllm` replays a snapshot, `vllm`/`sglang` replay history. The parser always
   * sets it; optional so configs built in code may leave it out (absent = `xllm`).
   */
  readonly engineKind?: EngineKind;
  /** Exact topic bytes as UTF-8 (§2); '' = no topic. */
  readonly topic: string;
  /** Content-key seed (§4), 0..2^53−1; a number so the config stays JSON-printable. */
  readonly hashSeed: number;
}

/** The `discovery` block (discovery.md "From instances to streams"). */
export interface DiscoveryConfig {
  readonly enabled: boolean;
  readonly blockSize: number;
  readonly topic: string;
  readonly eventPortOffset: number;
  readonly replayPortOffset: number;
  readonly refreshIntervalMs: number;
}

export interface KvEventsConfig {
  readonly maxStreams: number;
  readonly limits: StreamLimits;
  /**
   * Snapshot exchanges (§7.2 recoveries and §7.5 reconciliations) in flight at once across the
   * whole directory, 1..128. Our extension beyond kv-events §9: streams beyond it queue for a
   * slot before sending their request, so the §6 `replay_timeout_ms` never covers the queueing.
   */
  readonly maxConcurrentRecoveries: number;
  /** Static streams; empty when `discovery` is set (the two are exclusive). */
  readonly streams: readonly StaticStreamConfig[];
  readonly discovery: DiscoveryConfig | null;
}

export const DEFAULT_MAX_STREAMS = 128;
export const DEFAULT_MAX_CONCURRENT_RECOVERIES = 8;
export const DEFAULT_STREAM_LIMITS: StreamLimits = Object.freeze({
  maxBlocksPerStream: 262144,
  maxMessageBytes: 8388608,
  maxBufferedBytes: 16777216,
  replayTimeoutMs: 2000,
  resyncIntervalMs: 30000,
});
export const DEFAULT_BLOCK_SIZE = 128;
export const DEFAULT_HASH_SEED = 1024;

// Offsets (discovery.md): an offset of 0 would put the event socket on the engine's HTTP port,
// so both lie in 1..65534 and must differ. Whether ranks overlap depends on dp_size, which only
// a registration tells, so that check is discovery's, per instance.
const OFFSET_MIN = 1;
const OFFSET_MAX = 65534;
// dp_rank: the spec gives no bound; 0..1023 is far above any real data-parallel size and keeps
// base + rank port arithmetic sane.
const DP_RANK_MAX = 1023;

const TOP_FIELDS = [
  'max_streams',
  'max_blocks_per_stream',
  'max_message_bytes',
  'max_buffered_bytes',
  'replay_timeout_ms',
  'resync_interval_ms',
  'max_concurrent_recoveries',
  'streams',
  'discovery',
] as const;
const STREAM_FIELDS = ['instance_name', 'dp_rank', 'block_size', 'endpoint', 'replay_endpoint', 'topic', 'hash_seed', 'engine_kind'] as const;
const DISCOVERY_FIELDS = ['enabled', 'block_size', 'topic', 'event_port_offset', 'replay_port_offset', 'refresh_interval_ms'] as const;

/** A JSON object being validated (shared with the engines-file parser). */
export type JsonObject = Record<string, unknown>;

/**
 * Reads and validates the file named by `--kv_events_config_file`. An empty path returns null:
 * the directory is disabled and the caller logs one warning. A missing or unreadable file is a
 * `ConfigError` naming the path.
 */
export function readKvEventsConfigFile(path: string): KvEventsConfig | null {
  if (path === '') return null;
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (e) {
    const code = typeof e === 'object' && e !== null && 'code' in e ? String((e as { code: unknown }).code) : 'error';
    throw new ConfigError('', `cannot read ${JSON.stringify(path)} (${code})`);
  }
  return parseKvEventsConfig(text);
}

/** Parses the JSON text; throws `ConfigError` (path '' for a syntax error). */
export function parseKvEventsConfig(text: string): KvEventsConfig {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch (e) {
    const detail = e instanceof Error ? e.message.split('\n')[0]! : 'syntax error';
    throw new ConfigError('', `not valid JSON: ${detail}`);
  }
  return validateKvEventsConfig(json);
}

/** Validates an already-parsed JSON value and returns the frozen camelCase config. */
export function validateKvEventsConfig(json: unknown): KvEventsConfig {
  const root = object(json, '');
  unknownFields(root, TOP_FIELDS, '');
  const maxStreams = int(root, 'max_streams', '', DEFAULT_MAX_STREAMS, 1, 128);
  const maxBlocksPerStream = int(root, 'max_blocks_per_stream', '', DEFAULT_STREAM_LIMITS.maxBlocksPerStream, 1, 16777216);
  const maxMessageBytes = int(root, 'max_message_bytes', '', DEFAULT_STREAM_LIMITS.maxMessageBytes, 65536, 67108864);
  const maxBufferedBytes = int(root, 'max_buffered_bytes', '', DEFAULT_STREAM_LIMITS.maxBufferedBytes, 65536, 1073741824);
  if (maxBufferedBytes < maxMessageBytes) {
    throw new ConfigError('max_buffered_bytes', `expected at least max_message_bytes (${maxMessageBytes}), got ${maxBufferedBytes}`);
  }
  const replayTimeoutMs = int(root, 'replay_timeout_ms', '', DEFAULT_STREAM_LIMITS.replayTimeoutMs, 100, 60000);
  const resyncIntervalMs = resyncInterval(root, replayTimeoutMs);
  const limits: StreamLimits = Object.freeze({ maxBlocksPerStream, maxMessageBytes, maxBufferedBytes, replayTimeoutMs, resyncIntervalMs });
  // Extension beyond §9: no upper bound above max_streams' own maximum (a cap ≥ streams is no cap).
  const maxConcurrentRecoveries = int(root, 'max_concurrent_recoveries', '', DEFAULT_MAX_CONCURRENT_RECOVERIES, 1, 128);

  const discovery = root['discovery'] === undefined ? null : discoveryConfig(root['discovery']);
  const streams = root['streams'] === undefined ? [] : staticStreams(root['streams'], maxStreams);
  if (discovery !== null && streams.length > 0) {
    throw new ConfigError('streams', 'must be empty when discovery is set (the two are exclusive)');
  }
  return Object.freeze({ maxStreams, limits, maxConcurrentRecoveries, streams: Object.freeze(streams), discovery });
}

function resyncInterval(root: JsonObject, replayTimeoutMs: number): number {
  const v = root['resync_interval_ms'];
  if (v === undefined) {
    if (DEFAULT_STREAM_LIMITS.resyncIntervalMs <= replayTimeoutMs) {
      throw new ConfigError('resync_interval_ms', `default ${DEFAULT_STREAM_LIMITS.resyncIntervalMs} is not above replay_timeout_ms (${replayTimeoutMs}); set it`);
    }
    return DEFAULT_STREAM_LIMITS.resyncIntervalMs;
  }
  const expected = 'an integer 0 (off) or in 1000..3600000';
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || (v !== 0 && (v < 1000 || v > 3600000))) {
    throw new ConfigError('resync_interval_ms', `expected ${expected}, got ${show(v)}`);
  }
  if (v !== 0 && v <= replayTimeoutMs) {
    throw new ConfigError('resync_interval_ms', `expected 0 or more than replay_timeout_ms (${replayTimeoutMs}), got ${v}`);
  }
  return v;
}

function staticStreams(value: unknown, maxStreams: number): StaticStreamConfig[] {
  if (!Array.isArray(value)) throw new ConfigError('streams', `expected an array, got ${show(value)}`);
  if (value.length > maxStreams) {
    throw new ConfigError('streams', `${value.length} entries exceed max_streams (${maxStreams})`);
  }
  const out: StaticStreamConfig[] = [];
  const identities = new Map<string, number>();
  // Normalized endpoint → where it was first used, to reject duplicates and event/replay overlap (§1).
  const eventEndpoints = new Map<string, number>();
  const replayEndpoints = new Map<string, number>();
  for (let i = 0; i < value.length; i++) {
    const path = `streams[${i}]`;
    const s = object(value[i], path);
    unknownFields(s, STREAM_FIELDS, path);
    const instanceName = instance(s, path);
    const dpRank = int(s, 'dp_rank', path, 0, 0, DP_RANK_MAX);
    const blockSize = int(s, 'block_size', path, DEFAULT_BLOCK_SIZE, 1, 4096);
    const engineKind = kind(s, path);
    const endpoint = tcpEndpoint(s, 'endpoint', path);
    // engines.md §3: optional for history kinds (vLLM's default has none), required for xllm.
    const replayEndpoint = replaysHistory(engineKind) && s['replay_endpoint'] === undefined ? '' : tcpEndpoint(s, 'replay_endpoint', path);
    const topic = str(s, 'topic', path, '');
    const hashSeed = int(s, 'hash_seed', path, DEFAULT_HASH_SEED, 0, Number.MAX_SAFE_INTEGER);

    const identity = streamKey(instanceName, dpRank);
    const dupOf = identities.get(identity);
    if (dupOf !== undefined) {
      throw new ConfigError(`${path}.dp_rank`, `(instance_name ${JSON.stringify(instanceName)}, dp_rank ${dpRank}) already used by streams[${dupOf}]`);
    }
    identities.set(identity, i);
    claim(endpoint, `${path}.endpoint`, eventEndpoints, replayEndpoints, 'endpoint', 'replay_endpoint', i);
    if (replayEndpoint !== '') claim(replayEndpoint, `${path}.replay_endpoint`, replayEndpoints, eventEndpoints, 'replay_endpoint', 'endpoint', i);
    out.push(Object.freeze({ instanceName, dpRank, blockSize, endpoint, replayEndpoint, topic, hashSeed, engineKind }));
  }
  return out;
}

function claim(
  endpoint: string,
  path: string,
  same: Map<string, number>,
  other: Map<string, number>,
  sameName: string,
  otherName: string,
  index: number,
): void {
  const key = normalizeEndpoint(endpoint);
  const dup = same.get(key);
  if (dup !== undefined) throw new ConfigError(path, `${JSON.stringify(endpoint)} already used as streams[${dup}].${sameName}`);
  const cross = other.get(key);
  if (cross !== undefined) throw new ConfigError(path, `${JSON.stringify(endpoint)} already used as streams[${cross}].${otherName}`);
  same.set(key, index);
}

function discoveryConfig(value: unknown): DiscoveryConfig {
  const path = 'discovery';
  const d = object(value, path);
  unknownFields(d, DISCOVERY_FIELDS, path);
  // Present block, no `enabled`: the operator wrote a discovery block, so it is meant to run.
  const enabled = bool(d, 'enabled', path, true);
  const blockSize = int(d, 'block_size', path, DEFAULT_BLOCK_SIZE, 1, 4096);
  // §2: the topic defaults to empty for discovery streams too.
  const topic = str(d, 'topic', path, '');
  const eventPortOffset = int(d, 'event_port_offset', path, 10000, OFFSET_MIN, OFFSET_MAX);
  const replayPortOffset = int(d, 'replay_port_offset', path, 30000, OFFSET_MIN, OFFSET_MAX);
  if (eventPortOffset === replayPortOffset) {
    throw new ConfigError(`${path}.replay_port_offset`, `expected an offset different from event_port_offset, got ${replayPortOffset}`);
  }
  const refreshIntervalMs = int(d, 'refresh_interval_ms', path, 1000, 50, 60000);
  return Object.freeze({ enabled, blockSize, topic, eventPortOffset, replayPortOffset, refreshIntervalMs });
}

const TCP_RE = /^tcp:\/\/(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9.-]*[A-Za-z0-9])?):(\d{1,5})$/;
const UNCONNECTABLE_HOSTS = new Set(['*', '0.0.0.0', '[::]', '[0:0:0:0:0:0:0:0]']);

/** §1: a subscriber endpoint is a connectable `tcp://host:port`, never a wildcard bind address. */
export function tcpEndpoint(o: JsonObject, field: string, parent: string): string {
  const path = `${parent}.${field}`;
  const v = o[field];
  if (v === undefined) throw new ConfigError(path, 'required');
  const bad = (): ConfigError => new ConfigError(path, `expected a connectable tcp://host:port, got ${show(v)}`);
  if (typeof v !== 'string') throw bad();
  const m = TCP_RE.exec(v);
  if (m === null || UNCONNECTABLE_HOSTS.has(m[1]!)) throw bad();
  const port = Number(m[3]);
  if (port < 1 || port > 65535) throw bad();
  return v;
}

/** engines.md §1: one of ENGINE_KINDS, `xllm` when absent. */
function kind(o: JsonObject, parent: string): EngineKind {
  const v = o['engine_kind'];
  if (v === undefined) return DEFAULT_ENGINE_KIND;
  if (!isEngineKind(v)) throw new ConfigError(`${parent}.engine_kind`, `expected one of ${ENGINE_KINDS.join(', ')}, got ${show(v)}`);
  return v;
}

function normalizeEndpoint(endpoint: string): string {
  return endpoint.toLowerCase();
}

function instance(o: JsonObject, parent: string): string {
  const path = `${parent}.instance_name`;
  const v = o['instance_name'];
  if (v === undefined) throw new ConfigError(path, 'required');
  // Control characters would break log lines and the one-line errors.
  if (typeof v !== 'string' || v === '' || /[\u0000-\u001f\u007f]/.test(v)) {
    throw new ConfigError(path, `expected a non-empty string without control characters, got ${show(v)}`);
  }
  return v;
}

export function object(v: unknown, path: string): JsonObject {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) {
    throw new ConfigError(path, `expected a JSON object, got ${show(v)}`);
  }
  return v as JsonObject;
}

export function unknownFields(o: JsonObject, known: readonly string[], parent: string): void {
  for (const k of Object.keys(o)) {
    if (!known.includes(k)) throw new ConfigError(parent === '' ? k : `${parent}.${k}`, `unknown field (allowed: ${known.join(', ')})`);
  }
}

export function int(o: JsonObject, field: string, parent: string, dflt: number, min: number, max: number): number {
  const v = o[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'number' || !Number.isSafeInteger(v) || v < min || v > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `${min}..2^53-1` : `${min}..${max}`;
    throw new ConfigError(parent === '' ? field : `${parent}.${field}`, `expected an integer in ${range}, got ${show(v)}`);
  }
  return v;
}

export function str(o: JsonObject, field: string, parent: string, dflt: string): string {
  const v = o[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'string') throw new ConfigError(`${parent}.${field}`, `expected a string, got ${show(v)}`);
  return v;
}

function bool(o: JsonObject, field: string, parent: string, dflt: boolean): boolean {
  const v = o[field];
  if (v === undefined) return dflt;
  if (typeof v !== 'boolean') throw new ConfigError(`${parent}.${field}`, `expected true or false, got ${show(v)}`);
  return v;
}

/** A short, one-line rendering of a bad value for the error message. */
export function show(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'an array';
  if (typeof v === 'object') return 'an object';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 80 ? `${s.slice(0, 77)}...` : s;
}
