/**
 * Pure parsing of what engines write to etcd (discovery.md "etcd keys"): the namespace prefix,
 * the key layout and one instance value. Every failure is a `DiscoveryError` about that one key,
 * so the watcher can log and count it and carry on with the rest.
 */
import { DiscoveryError } from './discovery-errors.js';
import { isModelPinProblem, readModelPin } from '../../shared/view/model-pin.js';
import { sameModelLists, type ServedModelList } from '../../shared/view/served-models.js';

export type InstanceType = 'DEFAULT' | 'PREFILL' | 'DECODE' | 'MIX';

/** The JSON `type` numbers, in order (discovery.md: 0 DEFAULT, 1 PREFILL, 2 DECODE, 3 MIX). */
export const INSTANCE_TYPES: readonly InstanceType[] = ['DEFAULT', 'PREFILL', 'DECODE', 'MIX'];

export const DEFAULT_BACKEND_TYPE = 'xllm';

/** The key segment after `XLLM:` of a load-metrics key (read for compatibility only). */
const LOAD_METRICS_SEGMENT = 'LOADMETRICS';
export const KEY_ROOT = 'XLLM:';

// dp_size: the spec gives no upper bound; 1024 ranks matches the config's dp_rank bound
// (0..1023) and keeps port arithmetic sane.
const MAX_DP_SIZE = 1024;

/** One validated registration (a frozen object; the etcd key suffix is its name). */
export interface InstanceRegistration {
  /** The engine's business HTTP address `host:port` (the key suffix, never the JSON field). */
  readonly name: string;
  readonly type: InstanceType;
  readonly rpcAddress: string;
  /** New per engine process; null when the engine does not send one. */
  readonly incarnationId: string | null;
  /** Epoch ms of the registration; null when absent. */
  readonly registerTsMs: number | null;
  /** ≥ 1 (0 in the JSON means 1). */
  readonly dpSize: number;
  /** `[[input_tokens, ttft_ms], ...]` */
  readonly ttftProfile: readonly (readonly [number, number])[];
  /** `[[batch_size, total_tokens, tpot_ms], ...]` */
  readonly tpotProfile: readonly (readonly [number, number, number])[];
  readonly backendType: string;
  /** cache-identity §1: `models` (first the base, the rest its adapters); null when absent (unknown). */
  readonly models: ServedModelList;
}

/** What a key under the namespace names. */
export type DiscoveryKey =
  | { readonly kind: 'instance'; readonly type: InstanceType; readonly name: string }
  | { readonly kind: 'load_metrics'; readonly name: string };

/**
 * `ns` → `/ns/`, `/a/b/` → `/a/b/`, '' → '' (discovery.md: leading and trailing slashes trimmed,
 * then one added on each side; empty gives no prefix).
 */
export function normalizeNamespace(namespace: string): string {
  const trimmed = namespace.replace(/^\/+/, '').replace(/\/+$/, '');
  return trimmed === '' ? '' : `/${trimmed}/`;
}

/** The prefix the watcher lists and watches: the namespace, then `XLLM:`. */
export function discoveryPrefix(namespace: string): string {
  return `${normalizeNamespace(namespace)}${KEY_ROOT}`;
}

// host:port with a DNS name, an IPv4 address or a bracketed IPv6 address. No path, user info or
// whitespace: the name becomes `http://<name>/health` and `tcp://host:port` endpoints.
const NAME_RE = /^(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?):(\d{1,5})$/;

/** Splits an instance name into host and port; null when it is not `host:port` with port 1..65535. */
export function splitInstanceName(name: string): { readonly host: string; readonly port: number } | null {
  const m = NAME_RE.exec(name);
  if (m === null) return null;
  const port = Number(m[3]);
  if (port < 1 || port > 65535) return null;
  return { host: m[1]!, port };
}

/**
 * Parses a key with the namespace already removed (`XLLM:PREFILL:10.0.0.5:8000`). The name is
 * everything after the second colon, so `host:port` keeps its own colon.
 */
export function parseDiscoveryKey(key: string): DiscoveryKey {
  if (!key.startsWith(KEY_ROOT)) throw new DiscoveryError('bad_key', `${show(key)} does not start with ${KEY_ROOT}`);
  const rest = key.slice(KEY_ROOT.length);
  const colon = rest.indexOf(':');
  if (colon <= 0) throw new DiscoveryError('bad_key', `${show(key)} is not XLLM:<TYPE>:<name>`);
  const segment = rest.slice(0, colon);
  const name = rest.slice(colon + 1);
  if (splitInstanceName(name) === null) throw new DiscoveryError('bad_key', `${show(key)}: name ${show(name)} is not host:port`);
  if (segment === LOAD_METRICS_SEGMENT) return { kind: 'load_metrics', name };
  const type = INSTANCE_TYPES.find((t) => t === segment);
  if (type === undefined) {
    throw new DiscoveryError('bad_key', `${show(key)}: type ${show(segment)} is not one of ${INSTANCE_TYPES.join(', ')}, ${LOAD_METRICS_SEGMENT}`);
  }
  return { kind: 'instance', type, name };
}

/**
 * Validates one instance value for the key `XLLM:<keyType>:<name>`. The key suffix overrides any
 * `name` field (which must still be present: it is required). Unknown fields are ignored; a null
 * optional field counts as absent (C++ JSON writers emit null for unset optionals).
 */
export function parseInstanceValue(keyType: InstanceType, name: string, text: string): InstanceRegistration {
  let json: unknown;
  try {
    json = JSON.parse(text);
  } catch {
    throw invalid(name, 'value is not JSON');
  }
  if (typeof json !== 'object' || json === null || Array.isArray(json)) throw invalid(name, 'value is not a JSON object');
  const o = json as Record<string, unknown>;

  if (typeof o['name'] !== 'string') throw invalid(name, 'name: required string');
  const rpcAddress = o['rpc_address'];
  if (typeof rpcAddress !== 'string') throw invalid(name, 'rpc_address: required string');
  const typeNum = o['type'];
  if (typeof typeNum !== 'number' || !Number.isInteger(typeNum) || typeNum < 0 || typeNum > 3) {
    throw invalid(name, `type: expected 0..3, got ${show(typeNum)}`);
  }
  const type = INSTANCE_TYPES[typeNum]!;
  // The key and the value must agree: a PREFILL key holding a DECODE value would otherwise be
  // subscribed or not depending on which one we believed.
  if (type !== keyType) throw invalid(name, `type: ${typeNum} (${type}) does not match the key's ${keyType}`);

  const incarnation = optional(o, 'incarnation_id');
  if (incarnation !== undefined && typeof incarnation !== 'string') throw invalid(name, `incarnation_id: expected a string, got ${show(incarnation)}`);
  const registerTs = optional(o, 'register_ts_ms');
  if (registerTs !== undefined && !isNonNegativeInt(registerTs)) throw invalid(name, `register_ts_ms: expected epoch ms, got ${show(registerTs)}`);
  const dp = optional(o, 'dp_size');
  if (dp !== undefined && (!isNonNegativeInt(dp) || dp > MAX_DP_SIZE)) throw invalid(name, `dp_size: expected 0..${MAX_DP_SIZE}, got ${show(dp)}`);
  const backend = optional(o, 'backend_type');
  if (backend !== undefined && typeof backend !== 'string') throw invalid(name, `backend_type: expected a string, got ${show(backend)}`);
  const models = servedModels(name, optional(o, 'models'));

  return Object.freeze({
    name,
    type,
    rpcAddress,
    // An empty id identifies nothing; treat it as absent rather than as one shared identity.
    incarnationId: incarnation === undefined || incarnation === '' ? null : incarnation,
    registerTsMs: registerTs === undefined ? null : registerTs,
    dpSize: dp === undefined || dp === 0 ? 1 : dp,
    ttftProfile: profile(name, o, 'ttft_profiling_data', 2) as unknown as readonly (readonly [number, number])[],
    tpotProfile: profile(name, o, 'tpot_profiling_data', 3) as unknown as readonly (readonly [number, number, number])[],
    backendType: backend === undefined ? DEFAULT_BACKEND_TYPE : backend,
    models,
  });
}

/**
 * cache-identity §1: absent (or null, or `[]`: a C++ writer's unset vector) is an unknown list;
 * otherwise distinct non-empty names, first the base model. A bad list rejects the key, as any
 * other bad field does: guessing would send requests for one model to engines of another.
 */
function servedModels(name: string, v: unknown): ServedModelList {
  if (v === undefined || (Array.isArray(v) && v.length === 0)) return null;
  const r = readModelPin(v);
  if (isModelPinProblem(r)) throw invalid(name, `${r.index === null ? 'models' : `models[${r.index}]`}: ${r.reason}`);
  return r;
}

/** Whether two registrations carry the same data (a refresh that changes nothing). */
export function sameRegistration(a: InstanceRegistration, b: InstanceRegistration): boolean {
  return (
    a.name === b.name &&
    a.type === b.type &&
    a.rpcAddress === b.rpcAddress &&
    a.incarnationId === b.incarnationId &&
    a.registerTsMs === b.registerTsMs &&
    a.dpSize === b.dpSize &&
    a.backendType === b.backendType &&
    sameModelLists(a.models, b.models) &&
    JSON.stringify(a.ttftProfile) === JSON.stringify(b.ttftProfile) &&
    JSON.stringify(a.tpotProfile) === JSON.stringify(b.tpotProfile)
  );
}

function profile(name: string, o: Record<string, unknown>, field: string, width: number): readonly (readonly number[])[] {
  const v = optional(o, field);
  if (v === undefined) return Object.freeze([]);
  const bad = (): DiscoveryError => invalid(name, `${field}: expected an array of ${width}-number arrays`);
  if (!Array.isArray(v)) throw bad();
  const out: (readonly number[])[] = [];
  for (const row of v) {
    if (!Array.isArray(row) || row.length !== width) throw bad();
    for (const x of row) if (typeof x !== 'number' || !Number.isFinite(x) || x < 0) throw bad();
    out.push(Object.freeze([...(row as number[])]));
  }
  return Object.freeze(out);
}

function optional(o: Record<string, unknown>, field: string): unknown {
  const v = o[field];
  return v === null ? undefined : v;
}

function isNonNegativeInt(v: unknown): v is number {
  return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0;
}

function invalid(name: string, detail: string): DiscoveryError {
  return new DiscoveryError('invalid_instance', `${name}: ${detail}`);
}

function show(v: unknown): string {
  if (v === undefined) return 'nothing';
  const s = JSON.stringify(v) ?? String(v);
  return s.length > 60 ? `${s.slice(0, 57)}...` : s;
}
